"""Explore's beam tree (beam mode): where the beams split, which prefixes were pruned, which finished.

Clicking a node makes the step panel below trace that node's prefix (teacher-forced on it) at the node's
step, so its attention and the four steps show; "Force this prefix" switches to greedy decoding with the
prefix's tokens forced (the what-if intervention), so the model continues from there. The selected node
lives in the URL (`node=N`, 1-based). Session-state keys start with `explore_`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from explorer.record import BeamRecord
from explorer.app.figures.beam import beam_tree_figure, min_width
from explorer.app.figures.style import FONT_SIZE, PRESENTER_FONT_SIZE, plotly_config
from explorer.app.pages import common, presenter
from explorer.app.engine_link import engine_module

views = engine_module("explorer.app.views")

K = "explore_"
CHART = K + "beam_tree"


def record(request: views.Request) -> BeamRecord:
    """The beam search's own record, once per (model version, input, width): the candidate table, the tree and
    a node's trace all read it."""
    key = ("explore-beam-record", common.model_key(request.model), request.text, request.beam_width)
    return common.cached(key, lambda: views.beam_tree(common.get_model(request.model), request.text,
                                                      request.beam_width))


def selected_node(request: views.Request) -> int | None:
    """The chosen node if it exists in this search's tree (a stale one, e.g. from a link, is dropped)."""
    node = st.session_state.get(K + "node")
    if node is None or request.mode != "beam":
        return None
    try:
        if 0 <= int(node) < len(record(request).nodes):
            return int(node)
    except Exception:  # a bad input: the page reports it elsewhere
        return None
    st.session_state[K + "node"] = None
    st.warning(f"The beam tree has no node {int(node) + 1}; showing the candidates instead.",
               icon=":material/link_off:")
    return None


def _clicked(event: Any) -> int | None:
    for _, data in common.selected_points(event):
        if data and data[0] is not None:
            return int(data[0])
    return None


def _select(index: int, rec: BeamRecord) -> None:
    st.session_state[K + "node"] = index
    st.session_state[K + "step"] = rec.nodes[index].step + 1
    st.session_state[K + "playing"] = False


def _on_click(rec: BeamRecord) -> None:
    index = _clicked(st.session_state.get(CHART))
    if index is not None and 0 <= index < len(rec.nodes):
        st.session_state[K + "node_click"] = index
        _select(index, rec)


def _clear() -> None:
    st.session_state[K + "node"] = None


def _force(tokens: list[str]) -> None:
    """Greedy decoding with every token of the prefix forced: the model goes on from the node."""
    st.session_state[K + "mode"] = "greedy"
    st.session_state[K + "forced"] = list(enumerate(tokens))
    st.session_state[K + "node"] = None
    st.session_state[K + "step"] = len(tokens)
    st.session_state[K + "playing"] = False


def render(bundle, request: views.Request) -> None:
    """The tree, the selected node's facts and its actions."""
    rec = record(request)
    click = _clicked(st.session_state.get(CHART))
    if click is not None and click != st.session_state.get(K + "node_click") and 0 <= click < len(rec.nodes):
        st.session_state[K + "node_click"] = click  # a selection AppTest made (no callback runs there)
        _select(click, rec)
        st.rerun()
    node = request.node
    st.subheader("Beam tree")
    st.caption(f"Every hypothesis the search kept (width {rec.width}): a token and its prefix's total log P. "
               "Grey branches were pruned, green stars are the finished candidates (#rank). "
               "Click a node to step through its prefix below.")
    names = bundle.tgt_vocab.tokens
    fig = beam_tree_figure(rec, names, selected=node, title=None)
    # Each step gets a column as wide as its longest label; where the steps do not fit, the tree scrolls sideways.
    label_px = (FONT_SIZE - 2) * (PRESENTER_FONT_SIZE / FONT_SIZE if presenter.on() else 1)
    st.html(f"<style>.st-key-{K}beam_scroll {{ overflow-x: auto; }} .st-key-{K}beam_scroll "
            f".st-key-{CHART} {{ min-width: {min_width(rec, names, label_px)}px; }}</style>")
    with st.container(key=K + "beam_scroll"):
        common.chart(st, fig, key=CHART, on_select=lambda: _on_click(rec), selection_mode="points",
                     config=plotly_config("beam-tree"))
    if node is None:
        st.caption(f"{len(rec.nodes)} nodes over {rec.steps} steps, "
                   f"{sum(n.pruned for n in rec.nodes)} pruned, {len(rec.candidates)} candidates.")
        return
    chosen = rec.nodes[node]
    tokens = list(bundle.tgt_vocab.decode(rec.prefix(node)))
    shown = " ".join("␣" if t == " " else t for t in tokens)
    status = (f"candidate #{chosen.candidate + 1}" if chosen.candidate is not None
              else "pruned" if chosen.pruned else "kept and continued")
    cols = st.columns([6, 2, 2], vertical_alignment="center")
    cols[0].markdown(f"**Node {node + 1}**, step t = {chosen.step + 1}: prefix `{shown}` · "
                     f"log P = {chosen.log_prob:.4f} · {status}. The step panel below traces this prefix.")
    cols[1].button("Force this prefix", icon=":material/front_hand:", key=K + "force_prefix", on_click=_force,
                   args=(tokens,), width="stretch",
                   help="Greedy decoding with these tokens forced (a what-if): see how the model goes on")
    cols[2].button("Back to candidates", icon=":material/close:", key=K + "node_clear", on_click=_clear,
                   width="stretch")
