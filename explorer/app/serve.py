"""`python -m explorer.app.serve [streamlit options]`: `streamlit run app.py`, with room for any address a browser sends.

Streamlit serves through uvicorn, whose HTTP parser (h11) refuses a request whose first line and headers
exceed 16 KiB while they arrive in pieces (over ~128 KiB on a loopback): a shared link with a long
`?input=` (100 KB of text) got a 400 and a blank page before the app could say anything. Chromium sends
addresses of up to 2 MiB; with 4 MiB of room the app itself answers ("the input has 100,000 characters;
the limit is 1,000") and the page stays usable. `scripts/start.sh` starts the app this way; plain
`streamlit run app.py` works too, without the room.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

APP = Path(__file__).resolve().parents[2] / "app.py"
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # above Chromium's 2 MiB address limit
# What the first view needs and a bare Streamlit app does not: the engine (torch, ~2 s to import), pandas, the
# Explore page and its figures (plotly's template). Imported in the background while the server starts and
# the browser loads Streamlit's JavaScript, so the first run finds them ready instead of importing them after.
# (explorer's modules import one another without cycles, so two threads importing them cannot deadlock.)
PRELOAD = ("explorer.app.views", "explorer.app.pages.explore")


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


def preload(modules: Sequence[str] = PRELOAD) -> threading.Thread:
    """Import `modules` in a daemon thread; a page importing one meanwhile waits for it (the import lock)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as app.py sets it: read when torch is first imported

    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the page imports it again and shows the problem
                return

    thread = threading.Thread(target=run, name="explorer-preload", daemon=True)
    thread.start()
    return thread


def main(argv: Sequence[str] | None = None) -> int:
    """Run `streamlit run app.py ARGV` in this process, the first view's modules importing meanwhile."""
    allow_long_addresses()
    from streamlit.web import cli  # Streamlit itself first: the preload then shares none of its imports
    preload()
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
