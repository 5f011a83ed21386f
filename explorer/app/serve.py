"""`python -m explorer.app.serve [streamlit options]`: `streamlit run app.py`, with room for any address a browser sends.

Streamlit serves through uvicorn, whose HTTP parser (h11) refuses a request whose first line and headers
exceed 16 KiB while they arrive in pieces (over ~128 KiB on a loopback): a shared link with a long
`?input=` (100 KB of text) got a 400 and a blank page before the app could say anything. Chromium sends
addresses of up to 2 MiB; with 4 MiB of room the app itself answers ("the input has 100,000 characters;
the limit is 1,000") and the page stays usable. `scripts/start.sh` starts the app this way; plain
`streamlit run app.py` works too, without the room.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

APP = Path(__file__).resolve().parents[2] / "app.py"
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # above Chromium's 2 MiB address limit
# The engine (torch, ~1-2 s to import): a shipped model's first view needs none of it (its stored first trace,
# explorer/app/first_trace.py), so it is imported in the background once the browser has drawn that view
# (ENGINE_DELAY_S after the first run); a page that needs it sooner imports it itself. Imported while the page
# loaded (as before), it held the interpreter while the server sent Streamlit's JavaScript; the first view's light
# modules (pandas, the figures) are left to the first run for the same reason (benchmarks/RESULTS.md, "2026-12-07
# late: a first view without torch"). explorer's modules import one another without cycles, so the preload and a
# page importing at once cannot deadlock.
ENGINE = ("explorer.engine.trace", "explorer.engine.decoding", "explorer.engine.seeding", "safetensors.torch")
ENGINE_DELAY_S = 5.0  # after the first run: the browser is still drawing the first view for ~2-3 s (2 cores)
_engine = {"armed": False, "started": False}


def allow_long_addresses() -> None:
    """Make every uvicorn server this process starts accept requests of up to MAX_REQUEST_BYTES.

    Streamlit builds its `uvicorn.Config` when the server starts, through the module attribute, so a
    subclass with this one default changes nothing else."""
    import uvicorn

    if getattr(uvicorn.Config, "explorer_long_addresses", False):
        return

    class Config(uvicorn.Config):
        explorer_long_addresses = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("h11_max_incomplete_event_size", MAX_REQUEST_BYTES)
            super().__init__(*args, **kwargs)

    uvicorn.Config = Config  # type: ignore[misc]


def preload(modules: Sequence[str], delay_s: float = 0.0) -> threading.Thread:
    """Import `modules` in a daemon thread after `delay_s`; a page importing one meanwhile waits for it (the
    import lock)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as app.py sets it: read when torch is first imported

    def run() -> None:
        time.sleep(delay_s)
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the page imports it again and shows the problem
                return
        freeze_imports()  # what they imported

    thread = threading.Thread(target=run, name="explorer-preload", daemon=True)
    thread.start()
    return thread


def arm_engine() -> None:
    """Have `engine_after_first_run` import the engine (this server is the README's app command)."""
    _engine["armed"] = True


def engine_after_first_run() -> threading.Thread | None:
    """Called by app.py after each run: the first time, under `main`, import the engine in the background."""
    if not _engine["armed"] or _engine["started"]:
        return None
    _engine["started"] = True
    freeze_imports()  # the first run's: pandas, plotly, the pages
    return preload(ENGINE, ENGINE_DELAY_S)


def freeze_imports() -> None:
    """Move every object alive now (chiefly modules' contents) out of the cyclic collector's sight: Streamlit
    collects all generations after every run (`runner.postScriptGC`), and those scans of the imports took 60-100 ms
    a run, 0.26 s of a cold start's first view (0.03 s frozen). Frozen objects that die in a cycle later are never
    collected: modules live for good, and only the sessions open at the freezes after the first run and after the
    engine's import leave theirs."""
    gc.freeze()


def before_serving() -> None:
    """Spare the first view two costs: Streamlit's check that it runs under `streamlit run`, made at a process's
    first element, reads the source file of every frame on the stack (0.1-0.27 s on a first run's script thread;
    this is `streamlit run`, so it is marked done), and the imports' scans (`freeze_imports`)."""
    from streamlit import delta_generator

    delta_generator._use_warning_has_been_displayed = True
    freeze_imports()


def main(argv: Sequence[str] | None = None) -> int:
    """Run `streamlit run app.py ARGV` in this process, the engine importing after the first run."""
    allow_long_addresses()
    from streamlit.web import cli
    before_serving()
    # `python -m explorer.app.serve` runs this file as __main__: app.py imports it again by name.
    importlib.import_module("explorer.app.serve").arm_engine()
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
