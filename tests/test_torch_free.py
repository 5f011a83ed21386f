"""The record, the figures and the page helpers that only read records must not load torch.

Each module is imported in a fresh interpreter (this test process has torch loaded already), and the
test checks `torch` is absent from `sys.modules` afterwards. The page modules that do load torch are
listed with the reason, and the test checks that list is complete, so a new page module gets sorted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer.record import Intervention, Trace

ROOT = Path(__file__).resolve().parent.parent
FIGURES = sorted(f"explorer.app.figures.{p.stem}" for p in (ROOT / "explorer" / "app" / "figures").glob("*.py")
                 if p.stem != "__init__")
PAGES = sorted(f"explorer.app.pages.{p.stem}" for p in (ROOT / "explorer" / "app" / "pages").glob("*.py")
               if p.stem != "__init__")

TORCH_FREE_PAGES = ("explorer.app.pages.addresses", "explorer.app.pages.learn_text", "explorer.app.pages.presenter",
                    "explorer.app.pages.warmup")
# Page modules that run a model in the Streamlit process, so they need the engine (and torch):
NEEDS_TORCH = {
    "explorer.app.pages.common": "loads shipped and session models (registry, checkpoint) for every page",
    "explorer.app.pages.explore": "builds traces and beam records through explorer.app.views",
    "explorer.app.pages.explore_state": "reads requests and interventions from the URL through explorer.app.views",
    "explorer.app.pages.explore_shared": "computes the trace of a request through explorer.app.views",
    "explorer.app.pages.explore_panels": "reads step summaries and lookup tables through explorer.app.views",
    "explorer.app.pages.explore_what_if": "redecodes with an intervention through explorer.app.views",
    "explorer.app.pages.beam_panel": "runs beam search through explorer.app.views",
    "explorer.app.pages.neighbours_panel": "decodes the neighbouring inputs (explorer.engine.neighbours)",
    "explorer.app.pages.score_twins": "scores twin models on shared inputs (explorer.engine.score_functions)",
    "explorer.app.pages.learn": "computes the lessons' numbers with the model (explorer.app.lessons)",
    "explorer.app.pages.compare": "measures accuracy curves by running models (explorer.training.comparison)",
    "explorer.app.pages.train": "configures and starts training jobs (explorer.training.jobs, explorer.training.train)",
}
TORCH_FREE = ("explorer.record", "explorer.defaults", "explorer.equations", *FIGURES, *TORCH_FREE_PAGES)


def loads_torch(module: str) -> bool:
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "True"


def test_every_page_module_is_sorted():
    assert sorted((*TORCH_FREE_PAGES, *NEEDS_TORCH)) == PAGES


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_does_not_load_torch(module):
    assert not loads_torch(module), f"{module} imports torch (directly or through an engine module)"


def test_the_check_sees_torch_when_it_is_loaded():
    assert loads_torch("explorer.engine.trace")


def _tiny_trace() -> Trace:
    z = np.zeros
    return Trace(model_name="m", attention="dot", source_tokens=("a", "b"), output_tokens=("x",),
                 previous_tokens=("<sos>",), unknown_tokens=(), encoder_states=z((2, 3)), keys=z((2, 3)),
                 values=z((2, 3)), initial_state=z(3), decoder_states=z((1, 3)), queries=z((1, 3)),
                 scores=z((1, 2)), weights=np.array([[0.25, 0.75]]), contexts=z((1, 3)), probs=np.ones((1, 1)),
                 output_ids=np.zeros(1, dtype=int), target_vocab=("x",), alignment=np.ones((1, 2), dtype=bool),
                 intervention=Intervention())


def test_trace_arrays_are_read_only():
    tr = _tiny_trace()
    arrays = [v for v in vars(tr).values() if isinstance(v, np.ndarray)]
    assert len(arrays) == 12
    for a in arrays:
        with pytest.raises(ValueError, match="read-only"):
            a[...] = 1
    assert tr.weights[0, 1] == 0.75
