"""Attention Explorer: page navigation only. Run with `streamlit run app.py`."""

import os

# One torch thread per process: the app's matrices are small, and on a shared 2-core machine two
# spin-waiting OpenMP threads made every trace and curve 15-20x slower (measured). Read when torch
# is first imported, which the pages do lazily.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import importlib  # noqa: E402
from typing import Callable  # noqa: E402

import streamlit as st  # noqa: E402

from explorer.app import serve  # noqa: E402
from explorer.app.pages import presenter, warmup  # noqa: E402
from explorer.data.subwords import isolate_untrusted  # noqa: E402
from explorer.app.pages.addresses import explore_alias, explore_page  # noqa: E402


def main() -> None:
    """Lay out the navigation and run the page shown."""
    st.set_page_config(page_title="Attention Explorer", page_icon=":material/search:", layout="wide")
    isolate_untrusted()  # an uploaded model's tokenizer runs in a process of its own: an abort there spares the server
    explore = explore_page(_lazy("explore"))
    alias = explore_alias(explore)
    navigation = st.navigation([
        explore,
        st.Page(_lazy("train"), title="Train", icon=":material/fitness_center:", url_path="train"),
        st.Page(_lazy("compare"), title="Compare", icon=":material/balance:", url_path="compare"),
        st.Page(_lazy("learn"), title="Learn", icon=":material/menu_book:", url_path="learn"),
        alias,
    ], position="top")  # the pages' links in a bar above them: a sidebar took 320 of a 1024-pixel projector's width
    holder = warmup.start(live_charts=navigation in (explore, alias))
    try:
        presenter.switch()
        navigation.run()
    finally:
        warmup.finish(holder)
        serve.engine_after_first_run()


def _lazy(module: str) -> Callable[[], None]:
    """A page that imports its module when it is shown: the page modules pull in pandas and the figures (~0.5 s on
    a cold start; the engine, torch, when a page first runs a model), and the warm-up elements should reach the
    browser before that."""
    def render() -> None:
        importlib.import_module(f"explorer.app.pages.{module}").render()
    render.__name__ = module  # Streamlit's default name for a callable page; each its own
    return render


# Streamlit runs this script as __main__. A training job's process (multiprocessing, explorer/jobs/lifecycle.py)
# runs the main script of the process that started it again as __mp_main__: there, nothing is laid out (it
# cost every job a run of the whole app and 117 "missing ScriptRunContext" log lines).
if __name__ == "__main__":
    main()
