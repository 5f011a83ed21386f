"""Shared support for the Compare and Learn AppTests: reversal twins to compare, and the app's
navigation with one page opened first.

- `twin_dir()`: a folder of checkpoints holding `reverse` and `reverse-none`: the shipped pretrained/
  when both are shipped, else two tiny twins trained once per test session (a few seconds).
- `pretrained_at(folder)`: point the engine and the app's caches at that folder for a while.
- `pretrained`: a module-scoped fixture doing that for `twin_dir()` (`pretrained = app_support.pretrained`).
- `app_test(page)`: an AppTest of the app's real pages (same url paths as app.py), `page` opened first.
- `drawn_charts(at)`: every chart of a run by its key, as figure JSON (st.plotly_chart's and the live charts').
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from explorer.checkpoints import checkpoint

TWINS = ("reverse", "reverse-none")
TINY_TWIN_MODEL = {"embed": 8, "hidden": 24, "attn_dim": 16, "cell": "gru", "bidirectional": True}


def shipped_twins() -> bool:
    """Whether pretrained/ ships both reversal twins."""
    return all((checkpoint.PRETRAINED_DIR / f"{n}{checkpoint.SUFFIX}").exists() for n in TWINS)


@functools.lru_cache(maxsize=None)
def twin_dir() -> Path:
    """Shipped pretrained/ if it has the twins, else tiny twins trained on reverse 1–8 into a temp folder."""
    if shipped_twins():
        return checkpoint.PRETRAINED_DIR
    from explorer.training.recipes import train_task
    from explorer.data.tasks import TaskSpec
    from explorer.training.train import TrainConfig
    folder = Path(tempfile.mkdtemp(prefix="explorer-twins-"))
    cfg = TrainConfig(steps=150, batch_size=64, lr=1e-2, eval_every=150, eval_samples=100)
    for name, attention in (("reverse", "dot"), ("reverse-none", "none")):
        options = {**TINY_TWIN_MODEL, "attention": attention}
        bundle, _, _ = train_task(TaskSpec("reverse", 1, 8), name, options, cfg)
        checkpoint.save(bundle, folder / name)
    return folder


def clear_caches() -> None:
    """Forget every cached model, name list and curve (they belong to one pretrained folder)."""
    from explorer.app.pages import common
    for cached in (common.shipped_model, common.shipped_model_names, common._shipped_curve):
        cached.clear()


@contextlib.contextmanager
def pretrained_at(folder: Path) -> Iterator[Path]:
    """Make `folder` the shipped-checkpoint folder for the engine, the CLI (env) and the app's caches."""
    old_dir, old_env = checkpoint.PRETRAINED_DIR, os.environ.get("EXPLORER_PRETRAINED")
    checkpoint.PRETRAINED_DIR = Path(folder)
    os.environ["EXPLORER_PRETRAINED"] = str(folder)
    clear_caches()
    try:
        yield Path(folder)
    finally:
        checkpoint.PRETRAINED_DIR = old_dir
        if old_env is None:
            os.environ.pop("EXPLORER_PRETRAINED", None)
        else:
            os.environ["EXPLORER_PRETRAINED"] = old_env
        clear_caches()


def drawn_charts(at) -> dict[str, dict]:
    """Every chart the run drew, by its key, as the figure JSON the browser gets: st.plotly_chart's and the
    live charts' (explorer/app/pages/live_chart.py: the step's charts, updated in place)."""
    from explorer.app.pages.live_chart import NAME, sent
    out = {el.proto.id.rsplit("-", 1)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    for el in at.get("bidi_component"):
        if el.proto.component_name == NAME:
            out[el.proto.id.rsplit("-", 1)[-1]] = json.loads(sent(el.proto.json)["spec"])
    return out


APP = """
import streamlit as st
from explorer.app.pages import compare, explore, learn, train
from explorer.app.pages.addresses import EXPLORE_PATH
st.set_page_config(page_title="Attention Explorer", layout="wide")
first = {first!r}
st.navigation([
    st.Page(explore.render, title="Explore", url_path=EXPLORE_PATH, default=first == "explore"),
    st.Page(train.render, title="Train", url_path="train", default=first == "train"),
    st.Page(compare.render, title="Compare", url_path="compare", default=first == "compare"),
    st.Page(learn.render, title="Learn", url_path="learn", default=first == "learn"),
]).run()
"""


def app_test(page: str, timeout: float = 240):
    """The app's pages under st.navigation (as app.py has them), with `page` as the one that opens."""
    from streamlit.testing.v1 import AppTest
    return AppTest.from_string(APP.format(first=page), default_timeout=timeout)


def show_page(at, url_pathname: str) -> None:
    """Make `at`'s next run show the st.navigation page at `url_pathname` ("explore": the default page, at
    the root); AppTest.switch_page only knows file-based pages."""
    from explorer.app.pages.addresses import EXPLORE_PATH
    paths = {EXPLORE_PATH, ""} if url_pathname == "explore" else {url_pathname}
    at._page_hash = next(h for h, info in at._registered_pages.items() if info.get("url_pathname") in paths)


def copy_of(bundle, name: str):
    """A private deep copy of a (read-only) test model under another name, as the Train page makes."""
    from explorer.checkpoints.registry import private_copy
    clone = private_copy(bundle, name)
    clone.model.eval()
    return clone


def lookup_tables(at) -> list[str]:
    """The HTML of the lookup tables the run drew (explorer/app/figures/lookup_table.py)."""
    return [h.proto.body for h in at.get("html") if "explorer-lookup" in h.proto.body]


def lookup_column(table: str, column: str) -> list[str]:
    """One column of a lookup table's HTML, its cells' text: "token", "score" or "weight"."""
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(rf'<td class="{column}">(.*?)</td>', table)]


def lookup_weights(table: str) -> list[float]:
    return [float(w) for w in lookup_column(table, "weight")]


def frame_with(at, column: str):
    """The first dataframe on the page that has this column (AppTest does not expose dataframe keys)."""
    for el in at.dataframe:
        frame = el.value
        if column in frame.columns:
            return frame
    raise AssertionError(f"no dataframe with a column {column!r}")


@pytest.fixture(scope="module")
def pretrained() -> Iterator[Path]:
    """The app's shipped folder pointed at the reversal twins for one test module."""
    with pretrained_at(twin_dir()) as folder:
        yield folder


def upload(at, key: str, name: str, data: bytes, mime: str = "text/plain"):
    """Put a file into the page's upload box `key` (its widget key changes after each file taken): the
    box's file uploader, value set, for `.run()`."""
    rounds = at.session_state[f"{key}_round"] if f"{key}_round" in at.session_state else 0
    return at.file_uploader(key=f"{key}_box{rounds}").set_value((name, data, mime))


def keyed_places(node, path: tuple[int, ...] = ()) -> dict[str, tuple[int, ...]]:
    """Where each element with an id (widgets, keyed charts and containers) is in the page."""
    found: dict[str, tuple[int, ...]] = {}
    for index, child in getattr(node, "children", {}).items():
        element_id = getattr(getattr(child, "proto", None), "id", "")
        if element_id:
            found[element_id] = (*path, index)
        found.update(keyed_places(child, (*path, index)))
    return found


def places_around_a_bad_link(page: str, param: str, value: str, problem: str) -> tuple[dict, dict, dict, list[str]]:
    """Where each element with an id is (keyed_places) without a link, on the first run of a link `?param=value`
    whose problem the page reports (a warning holding `problem`) and on the run after it; and that run's warnings."""
    plain = app_test(page).run()
    linked = app_test(page)
    linked.query_params[param] = value
    linked.run()
    assert not linked.exception, [e.value for e in linked.exception]
    assert any(problem in w.value for w in linked.warning), [w.value for w in linked.warning]
    first = keyed_places(linked.main)
    linked.run()
    return keyed_places(plain.main), first, keyed_places(linked.main), [w.value for w in linked.warning]
