"""Small untrained checkpoints for the Explore page's tests: a folder to point EXPLORER_PRETRAINED at.

Untrained models (random weights, instant to build) exercise every code path of the page; the
numbers are meaningless, which no UI test relies on. Written once per folder, atomically.

- `copy`: GRU, bidirectional encoder, dot attention, digits 1–8 long.
- `reverse-none`: the plain encoder–decoder (attention "none").
- `dates`: scaled-dot attention on the dates task (letters, digits, punctuation).
- `tiny-fra`: English→French subword pieces from tests/fixtures/eng-fra-good.tsv (no input is <unk>).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import torch

from explorer.checkpoints import checkpoint
from explorer.engine.model import Seq2Seq
from explorer.training.recipes import translation_setup
from explorer.data.tasks import TaskSpec
from explorer.training.train import new_task_bundle

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SMALL = {"embed": 8, "hidden": 16, "attn_dim": 8, "max_src_len": 40, "max_tgt_len": 12}
NAMES = ("copy", "dates", "reverse-none", "tiny-fra")


def _task(name: str, spec: TaskSpec, **options):
    bundle, _ = new_task_bundle(spec, name, seed=1, **{**SMALL, **options})
    bundle.model.eval()
    return bundle


def build_models() -> list:
    """The bundles, freshly initialised (deterministic seeds)."""
    bundles = [
        _task("copy", TaskSpec("copy", 1, 8), bidirectional=True, attention="dot"),
        _task("dates", TaskSpec("dates"), attention="scaled_dot"),
        _task("reverse-none", TaskSpec("reverse", 1, 8), attention="none"),
    ]
    fra, _, _ = translation_setup(FIXTURES / "eng-fra-good.tsv", "tiny-fra",
                                  {"embed": 8, "hidden": 16, "attn_dim": 8, "bidirectional": False, "dropout": 0.0},
                                  src_lang="en", tgt_lang="fr", min_freq=1, valid_fraction=0.0)
    torch.manual_seed(2)
    fra.model = Seq2Seq(replace(fra.model.cfg, max_tgt_len=12)).eval()
    bundles.append(fra)
    return bundles


def write_models(folder: str | Path) -> Path:
    """Write every test checkpoint into `folder` (skipping those already there) and return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if all((folder / f"{n}.safetensors").exists() for n in NAMES):
        return folder
    for bundle in build_models():
        checkpoint.save(bundle, folder / f"{bundle.name}.safetensors")
    return folder


def browser_models(tmp_path_factory, name: str) -> Path:
    """The checkpoints a browser test serves: EXPLORER_TEST_PRETRAINED's folder of real ones when set, else
    these small test models written to a fresh temporary folder."""
    given = os.environ.get("EXPLORER_TEST_PRETRAINED")
    return Path(given) if given else write_models(tmp_path_factory.mktemp(name))
