"""Shared engine fixtures: small random models of every architecture, and one tiny trained copy model.

- `make_random_bundle(cell=..., attention=..., ...)` builds an untrained, tiny model (E=6, H=8, D=5)
  for the copy task's digits; it is deterministic in its `seed`.
- `random_bundle` runs a test once per architecture in `ARCHITECTURES`: every cell meets every
  score function, and stacked / bidirectional encoders are spread over them (a Latin square).
- `random_attention_bundle`: the same, only the architectures that attend.
- `trained_copy`: a small GRU with dot attention trained for a few seconds on `copy` (lengths
  1–6), once per test session. Treat it as read-only: deep-copy it before training it further.
- `any_model`: runs a test on random models of every architecture, on the trained copy model and
  on every checkpoint shipped in pretrained/ (none shipped: the other cases still run), each with
  a few inputs it accepts.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import Callable

import pytest
import torch

from explorer.checkpoints import checkpoint
from explorer.engine.bundle import ModelBundle
from explorer.defaults import ATTENTIONS, CELLS
from explorer.engine.model import ModelConfig, Seq2Seq
from explorer.training.recipes import train_task
from explorer.data.tasks import TaskSpec
from explorer.training.train import TrainConfig, TrainResult
from explorer.data.vocab import Vocab

# Tests share two CPU cores with other work: one thread is faster than contending for two.
torch.set_num_threads(1)
# The suite's numbers (accuracies reached in N steps, byte-identical reruns) are CPU numbers, so "auto"
# trains on the CPU here even where torch sees a GPU; EXPLORER_DEVICE=cuda runs the suite's training there.
os.environ.setdefault("EXPLORER_DEVICE", "cpu")

# --- test tiers: markers by module (registered in pyproject.toml, --strict-markers) ----------------
# The quick tier is `-m "not slow and not browser and not multiprocess"`; scripts/test.sh runs everything.
BROWSER_PREFIX = "test_browser_"
MULTIPROCESS = frozenset({  # start several processes (ranks, training jobs, CLI runs) that share the cores
    "test_app_compare", "test_app_train", "test_cli", "test_determinism", "test_distributed", "test_isolation",
    "test_jobs", "test_load_test",
    "test_subword_dropout::test_training_batches_are_spelt_afresh_alike_on_every_rank",
    "test_reliability_ui::test_an_uploaded_translation_model_tokenizes_in_the_worker_and_its_abort_is_a_message",
})
SLOW = frozenset({  # one process, but long: training runs, real corpora, a fresh interpreter per case
    "test_reliability_attacks", "test_train", "test_translation", "test_torch_free", "test_readme_peak",
    "test_font_coverage", "test_data_prep",
    "test_offline_trace::test_a_chinese_trace_embeds_exactly_the_glyphs_it_shows",
    "test_bf16::test_train_bf16_learns_a_toy_task_and_saves_float32_weights",
    "test_checkpoint::test_loading_a_checkpoint_stays_cheap_on_a_cold_process",
    "test_corpus::test_real_data",
    "test_embed_dropout::test_the_cli_trains_with_it_and_stores_it",
    "test_optim::test_training_does_not_import_torch_dynamo",
    "test_faithfulness::test_the_stored_reports_are_what_the_cli_computes",
})
LONG_TIERS = ("slow", "browser", "multiprocess")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier (by module, or module::function). On an xdist worker the modules that hold a
    long test go first: under scripts/test.sh's --dist loadfile (a module is one unit, so its module-scoped
    fixtures are built once) none then starts last while the other worker idles."""
    for item in items:
        module = item.path.stem
        names = {module, f"{module}::{getattr(item, 'originalname', item.name)}"}
        if module.startswith(BROWSER_PREFIX):
            item.add_marker(pytest.mark.browser)
        if names & MULTIPROCESS:
            item.add_marker(pytest.mark.multiprocess)
        if names & SLOW:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # xdist's worker: the controller schedules in the order it collected
        items[:] = long_modules_first(items)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a module's last test, close the Chromium its browser tests shared (tests/browser_support.py)."""
    if item.path.stem.startswith(BROWSER_PREFIX) and (nextitem is None or nextitem.path != item.path):
        from browser_support import close_browser
        close_browser()


def long_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The modules that hold a slow, browser or multiprocess test first; otherwise the order stays."""
    long_modules = {item.path for item in items if any(item.get_closest_marker(m) for m in LONG_TIERS)}
    return sorted(items, key=lambda item: item.path not in long_modules)


COPY_SPEC = TaskSpec("copy", 1, 6)
RANDOM_MAX_SRC_LEN = 12  # random models accept inputs of up to 12 symbols ...
RANDOM_MAX_TGT_LEN = 10  # ... and stop decoding after 10 steps (they rarely say <eos>)


@dataclass(frozen=True)
class Architecture:
    """One model shape to test: the cell, the score function, and how the encoder is stacked."""

    cell: str
    attention: str
    layers: int = 1
    bidirectional: bool = False

    @property
    def id(self) -> str:
        return f"{self.cell}-{self.attention}-L{self.layers}" + ("-bi" if self.bidirectional else "")


def _latin_square() -> list[Architecture]:
    """Every cell with every score function; each cell and each score function also meets every
    (layers, bidirectional) pair once. The unshared RNN has one layer and one direction only."""
    shapes = [(1, False), (2, False), (1, True), (2, True)]
    out = []
    for c, cell in enumerate(CELLS):
        for a, attention in enumerate(ATTENTIONS):
            layers, bidirectional = (1, False) if cell == "unshared" else shapes[(a + c) % len(shapes)]
            out.append(Architecture(cell, attention, layers, bidirectional))
    return out


ARCHITECTURES: list[Architecture] = _latin_square()
ATTENDING_ARCHITECTURES: list[Architecture] = [a for a in ARCHITECTURES if a.attention != "none"]


def random_bundle_for(cell: str = "gru", attention: str = "dot", layers: int = 1, bidirectional: bool = False,
                      seed: int = 0, **config) -> ModelBundle:
    """An untrained tiny model for the copy task's digits, initialised from `seed`, in eval mode."""
    src_vocab = tgt_vocab = Vocab.build("0123456789")
    options = {"embed": 6, "hidden": 8, "attn_dim": 5, "max_src_len": RANDOM_MAX_SRC_LEN,
               "max_tgt_len": RANDOM_MAX_TGT_LEN, **config}
    cfg = ModelConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), cell=cell, attention=attention,
                      layers=layers, bidirectional=bidirectional, **options)
    torch.manual_seed(seed)
    model = Seq2Seq(cfg).eval()
    return ModelBundle(f"random-{cell}-{attention}", model, src_vocab, tgt_vocab, task=COPY_SPEC)


@pytest.fixture(scope="session")
def make_random_bundle() -> Callable[..., ModelBundle]:
    """Factory: `make_random_bundle(cell="lstm", attention="additive", layers=2, bidirectional=True, seed=3)`."""
    return random_bundle_for


@pytest.fixture(params=ARCHITECTURES, ids=lambda a: a.id)
def random_bundle(request) -> ModelBundle:
    """A random tiny model, once per architecture."""
    arch: Architecture = request.param
    return random_bundle_for(arch.cell, arch.attention, arch.layers, arch.bidirectional)


@pytest.fixture(params=ATTENDING_ARCHITECTURES, ids=lambda a: a.id)
def random_attention_bundle(request) -> ModelBundle:
    """A random tiny model with attention, once per attending architecture."""
    arch: Architecture = request.param
    return random_bundle_for(arch.cell, arch.attention, arch.layers, arch.bidirectional)


@dataclass(frozen=True)
class TrainedCopy:
    """The session's tiny trained copy model and how its training went."""

    bundle: ModelBundle
    result: TrainResult
    config: TrainConfig
    spec: TaskSpec
    wall_seconds: float


TRAINED_COPY_MODEL = {"embed": 16, "hidden": 48, "attn_dim": 24, "cell": "gru", "attention": "dot",
                      "bidirectional": False}
TRAINED_COPY_TRAINING = TrainConfig(steps=400, batch_size=64, lr=1e-2, eval_every=50, eval_samples=200,
                                    seed=0, target_accuracy=1.0, max_seconds=30, confirm_samples=0)


@pytest.fixture(scope="session")
def shipped_server():
    """`streamlit run app.py` on the shipped checkpoints, once per test process: the browser modules on them share
    it, so its start and its caches (models loaded, Learn's lesson models trained) are paid once. Each test has
    its own browser session; what a session trains or uploads stays in it. A closed tab's training stops 1 s after
    the browser disconnects (the default is 30 s), for test_browser_train."""
    from browser_support import require_browser, streamlit_server
    require_browser()
    with streamlit_server(env={"EXPLORER_TRAINING_GONE_SECONDS": "1"}) as running:
        yield running


@pytest.fixture(scope="session")
def test_models_server(tmp_path_factory):
    """`streamlit run app.py` on the small test checkpoints of tests/explore_models.py (or EXPLORER_TEST_PRETRAINED's
    real ones), once per test process: Explore's and the beam tree's browser tests share it."""
    from browser_support import require_browser, streamlit_server
    from explore_models import browser_models
    require_browser()
    with streamlit_server(browser_models(tmp_path_factory, "browser-models")) as running:
        yield running


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """The app's pages on the small untrained checkpoints of tests/explore_models.py: written to a temporary
    folder that becomes the shipped-checkpoint folder (EXPLORER_PRETRAINED is read at import, so the module
    attribute is patched, and the caches that hold models are cleared on the way in and out)."""
    import streamlit as st

    from explore_models import write_models
    folder = write_models(tmp_path_factory.mktemp("explore-models"))
    saved = checkpoint.PRETRAINED_DIR
    checkpoint.PRETRAINED_DIR = folder
    st.cache_resource.clear()
    yield folder
    checkpoint.PRETRAINED_DIR = saved
    st.cache_resource.clear()


@pytest.fixture(scope="session")
def trained_copy() -> TrainedCopy:
    """A GRU with dot attention that learned `copy` on lengths 1–6 in a few seconds (read-only)."""
    started = time.perf_counter()
    bundle, _, result = train_task(COPY_SPEC, "tiny-copy", dict(TRAINED_COPY_MODEL), TRAINED_COPY_TRAINING)
    bundle.model.eval()
    return TrainedCopy(bundle, result, TRAINED_COPY_TRAINING, COPY_SPEC, time.perf_counter() - started)


# --- every model we can test: random, trained, shipped -----------------------------------------

SHIPPED_NAMES: list[str] = checkpoint.pretrained_names()
TRANSLATION_INPUTS = ["I am happy.", "Tom is here.", "Where is the station?"]


@functools.lru_cache(maxsize=None)
def load_shipped(name: str) -> ModelBundle:
    """A shipped checkpoint, loaded once per session (read-only)."""
    return checkpoint.load(name)


def inputs_for(bundle: ModelBundle) -> list[str]:
    """A few inputs the model accepts: the task's own examples, or short sentences for translation."""
    if bundle.task_obj is None:
        return TRANSLATION_INPUTS
    limit = bundle.model.cfg.max_src_len
    return [text for text in bundle.task_obj.examples() if len(bundle.tokenize_source(text)) <= limit][:3]


@dataclass(frozen=True)
class ModelCase:
    """A model to check and inputs to check it on."""

    name: str
    bundle: ModelBundle
    inputs: list[str]


MODEL_CASES = ([f"random-{a.id}" for a in ARCHITECTURES] + ["trained-copy"]
               + [f"shipped-{name}" for name in SHIPPED_NAMES])


@pytest.fixture(params=MODEL_CASES)
def any_model(request) -> ModelCase:
    """Random models of every architecture, the trained copy model, every shipped checkpoint."""
    case: str = request.param
    if case.startswith("random-"):
        arch = next(a for a in ARCHITECTURES if f"random-{a.id}" == case)
        bundle = random_bundle_for(arch.cell, arch.attention, arch.layers, arch.bidirectional, seed=11)
    elif case == "trained-copy":
        bundle = request.getfixturevalue("trained_copy").bundle
    else:
        bundle = load_shipped(case.removeprefix("shipped-"))
    inputs = inputs_for(bundle)
    assert inputs, f"{case}: no example input fits the model"
    return ModelCase(case, bundle, inputs)
