"""Explore's neighbour view: for one encoder state hᵢ or decoder state sₜ of the trace on screen, the k
nearest states among the model's own example pairs (a toy model's: the first 2,000 pairs its training drew),
each with a link that opens it on Explore.

The index (explorer.engine.neighbours) is built on the view's first use: the shipped models' in one
server-wide slot (one kept: a toy model's is ~25 MB and the server has a memory budget, so opening another
shipped model's view builds that one in a few seconds), a session model's in one slot of its session (its
latest version). The query lives in the URL: `nn=h3` (encoder state h₃) or `nn=s5` (decoder
state s₅), `nnk=5` neighbours. Session-state keys start with `explore_nn`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import streamlit as st

from explorer.errors import ExplorerError
from explorer.limits import url_number
from explorer.app.pages import addresses, common
from explorer.record import Trace
from explorer.app.engine_link import engine_module

if TYPE_CHECKING:
    import pandas as pd

neighbours = engine_module("explorer.engine.neighbours")

K = "explore_nn_"
MAX_K = 20


class _ShippedSlot:
    """The one shipped model's index the server keeps: the old one is let go before the next is built, and one
    build runs at a time (a toy model's index is ~25 MB and its build needs about as much again: the server has a
    memory budget)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: tuple[str, neighbours.NeighbourIndex, float] | None = None

    def get(self, name: str) -> tuple[neighbours.NeighbourIndex, float]:
        with self._lock:
            if self._kept is not None and self._kept[0] == name:
                return self._kept[1], self._kept[2]
            self._kept = None
            started = time.perf_counter()
            index = neighbours.build_index(common.shipped_model(name))
            self._kept = (name, index, time.perf_counter() - started)
            return index, self._kept[2]


@st.cache_resource(show_spinner=False)
def _shipped_slot() -> _ShippedSlot:
    return _ShippedSlot()


def index_for(name: str) -> tuple[neighbours.NeighbourIndex, float]:
    """The model's index and the seconds it took to build: shared for a shipped model, and one per session for
    a session's own model (its latest version opened here; an older one's index is let go)."""
    if common.session_models().get(name) is None and name in common.shipped_model_names():
        return _shipped_slot().get(name)
    key = common.model_key(name)
    kept = st.session_state.get(K + "index")
    if kept is not None and kept[0] == key:
        return kept[1], kept[2]
    st.session_state.pop(K + "index", None)  # the old one goes before the new one is built
    started = time.perf_counter()
    index = neighbours.build_index(common.get_model(name))
    seconds = time.perf_counter() - started
    st.session_state[K + "index"] = (key, index, seconds)
    return index, seconds


def _from_url() -> None:
    """The query in the link, once per session (or when the link changes)."""
    raw = st.query_params.get("nn")
    k = st.query_params.get("nnk")
    if (raw, k) == st.session_state.get(K + "synced"):
        return
    st.session_state[K + "synced"] = (raw, k)
    if raw:
        kind = raw[:1]
        try:
            if kind not in neighbours.KINDS:
                raise ExplorerError("not h or s")
            at = int(url_number(raw[1:], "neighbour position", 1))
        except ExplorerError:
            st.warning(f"The link's neighbour query {raw[:40]!r} is not h<i> or s<t> (e.g. nn=s3); it was ignored.",
                       icon=":material/link_off:")
        else:
            st.session_state[K + "kind"] = kind
            st.session_state[K + "at"] = at
            st.session_state[K + "open"] = True
    if k:
        try:
            st.session_state[K + "k"] = min(max(int(url_number(k, "number of neighbours")), 1), MAX_K)
        except ExplorerError as exc:
            st.warning(f"{exc}; it was ignored.", icon=":material/link_off:")


def _to_url(kind: str, at: int, k: int) -> None:
    want = {"nn": f"{kind}{at}", "nnk": str(k)}
    addresses.write_query(want, K + "url_sent")
    st.session_state[K + "synced"] = (want["nn"], want["nnk"])


def _clear_url() -> None:
    addresses.write_query({}, K + "url_sent", ("nn", "nnk"))
    st.session_state[K + "synced"] = (None, None)


def render(model: str, tr: Trace, step: int) -> None:
    """The expander with the query controls and the neighbours table; drawn only while open."""
    _from_url()
    section = st.expander("Nearest examples: which of the model's own examples have the closest hᵢ or sₜ",
                          icon=":material/hub:", expanded=bool(st.session_state.get(K + "open")),
                          key=K + "section", on_change="rerun")
    shown = section.open if section.open is not None else bool(st.session_state.get(K + "open"))
    st.session_state[K + "open"] = shown  # AppTest tracks no open state: there the URL or the state opens it
    if not shown:
        _clear_url()
        return
    with section:
        _panel(model, tr, step)


def _panel(model: str, tr: Trace, step: int) -> None:
    st.session_state.setdefault(K + "kind", "s")
    st.session_state.setdefault(K + "k", 5)
    st.session_state.setdefault(K + "at", step)
    cols = st.columns([4, 2, 3], vertical_alignment="bottom")
    kind = cols[0].segmented_control("State", list(neighbours.KINDS), key=K + "kind",
                                     format_func=neighbours.KINDS.get) or "s"
    limit = len(tr.source_tokens) if kind == "h" else tr.steps
    at = min(max(int(st.session_state.get(K + "at") or 1), 1), limit)
    st.session_state[K + "at"] = at
    label = "Input position i" if kind == "h" else "Decoder step t"
    cols[1].number_input(label, 1, limit, key=K + "at")
    cols[2].slider("Neighbours k", 1, MAX_K, key=K + "k")
    k = int(st.session_state[K + "k"])
    _to_url(kind, at, k)
    try:
        with st.spinner("Finding the states of the model's examples…"):
            index, seconds = index_for(model)
    except ExplorerError as exc:
        st.info(str(exc), icon=":material/info:")
        return
    vector = tr.encoder_states[at - 1] if kind == "h" else tr.decoder_states[at - 1]
    started = time.perf_counter()
    found = neighbours.nearest(index, kind, vector, k)
    search_ms = (time.perf_counter() - started) * 1000
    what = (f"h{_sub(at)} (x{_sub(at)} = '{tr.source_tokens[at - 1]}')" if kind == "h"
            else f"s{_sub(at)} (the state that chose '{tr.output_tokens[at - 1]}')")
    st.markdown(f"The {k} states nearest to **{what}** of this trace, among every "
                f"{neighbours.KINDS[kind].split()[0]} state of {index.origin}.")
    st.dataframe(neighbours_frame(model, found, kind), hide_index=True, width="stretch", key=K + "table",
                 column_config={"distance": st.column_config.NumberColumn("distance ‖·‖₂", format="%.4f"),
                                "open": st.column_config.LinkColumn("open on Explore", display_text="open")})
    rows = len(index.encoder if kind == "h" else index.decoder)
    st.caption(f"Exact Euclidean distance over {rows:,} states of {len(index.pairs):,} pairs "
               f"({index.nbytes / 1e6:.1f} MB, built in {seconds:.2f} s); this search {search_ms:.2f} ms. Decoder "
               "states are teacher-forced on each example's target, as Explore's teacher-forced mode shows them: "
               "the link opens that very state.")


def neighbours_frame(model: str, found: list[neighbours.Neighbour], kind: str) -> pd.DataFrame:
    """One row per neighbour: the example, the position or step (1-based), its token, distance and link."""
    rows = []
    for rank, n in enumerate(found, start=1):
        rows.append({"rank": rank, "input": n.pair.source, "target": n.pair.target,
                     ("position i" if kind == "h" else "step t"): n.position + 1, "token": n.token,
                     "distance": n.distance, "open": "?" + urlencode(neighbours.explore_query(model, n, kind))})
    import pandas as pd  # here: a first view draws no table (pandas: 0.3 s of a cold start)

    return pd.DataFrame(rows)


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(n: int) -> str:
    return str(n).translate(_SUBSCRIPTS)
