"""The record, the figures and every page module must not load torch when imported.

Each module is imported in a fresh interpreter (this test process has torch loaded already), and the
test checks `torch` is absent from `sys.modules` afterwards. Pages that run a model (traces, training,
comparisons) reach the engine through explorer.app.engine_link, which imports it on first use.
"""

from __future__ import annotations

import json
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

# Every page module: the pages that run a model reach the engine through explorer.app.engine_link, on first use.
# The views, the shipped models' headers and their stored first traces too: a first view needs nothing more.
TORCH_FREE = ("explorer.record", "explorer.faithfulness", "explorer.defaults", "explorer.settings", "explorer.equations",
              "explorer.app.engine_link", "explorer.app.views", "explorer.engine.bundle", "explorer.engine.copying",
              "explorer.checkpoints.checkpoint", "explorer.checkpoints.registry", "explorer.app.first_trace",
              *FIGURES, *PAGES)


def loads_torch(module: str) -> bool:
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "True"


def test_every_page_is_checked():
    assert len(PAGES) >= 16 and "explorer.app.pages.explore" in PAGES and "explorer.app.pages.train" in PAGES


def test_a_page_that_runs_a_model_imports_the_engine_on_first_use():
    """Importing the Explore page and reading a shipped model's header load no torch; using its model does."""
    code = ("import sys\n"
            "from explorer.app.pages import explore_shared\n"
            "from explorer.app.pages import common\n"
            "bundle = common.model_registry.load_shipped('reverse')\n"
            "import explorer.app.views as real\n"
            "assert explore_shared.views.example_inputs is real.example_inputs\n"
            "assert explore_shared.views.example_inputs(bundle) and bundle.title\n"
            "assert 'torch' not in sys.modules and not bundle.built\n"
            "assert bundle.model.cfg == bundle.cfg and bundle.built\n"
            "assert 'torch' in sys.modules\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


FIRST_VIEW = """
import json, os, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=120).run()
print(json.dumps({"torch": "torch" in sys.modules, "tables": sorted(m for m in ("pandas", "pyarrow") if m in sys.modules),
                  "lookup": sum("explorer-lookup" in h.proto.body for h in at.get("html")), "exceptions": [e.value for e in at.exception],
                  "errors": [e.value for e in at.error], "metrics": [m.value for m in at.metric]}))
"""


def test_the_apps_first_view_draws_without_torch_pandas_or_pyarrow():
    """The app's first page (Explore, its first shipped model and example, every step chart, the lookup table) draws
    from the model's header and its stored first trace: torch stays unimported until a user asks for something
    else, and pandas and pyarrow until a page shows a data grid (0.45 s of a cold start)."""
    out = subprocess.run([sys.executable, "-c", FIRST_VIEW], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert not found["exceptions"] and not found["errors"], found
    assert len(found["metrics"]) >= 2 and found["metrics"][0] == found["metrics"][1], found  # output = correct answer
    assert not found["torch"]
    assert found["lookup"] == 1 and found["tables"] == [], found


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


def test_an_engine_module_forwards_public_names_only():
    """Copying, pickling or inspecting the stand-in probes special names: they must not import or recurse."""
    import copy
    from explorer.app.engine_link import engine_module
    link = engine_module("explorer.data.vocab")
    assert link.EOS == "<eos>"
    assert copy.copy(link) is not None and "explorer.data.vocab" in repr(link)
    with pytest.raises(AttributeError):
        link._private_name


def test_the_command_line_trains_and_saves_without_loading_pandas():
    """`train` never builds a table: the modules its run goes through leave pandas unloaded (half a second of
    every command's start-up)."""
    code = ("import sys, explorer.__main__, explorer.training.recipes, explorer.checkpoints.checkpoint, "
            "explorer.engine.trace; print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
