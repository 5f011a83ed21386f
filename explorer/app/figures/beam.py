"""The beam tree read off a BeamRecord: every hypothesis the search kept, where the beams split, which
prefixes were pruned and which ended as candidates.

Columns are decoding steps (1-based, like the page), each node a kept token with its prefix's total
log-probability; edges join a node to the prefix it extends. Pruned branches are grey, finished
candidates are stars labelled with their rank, the selected node is ringed in red. An invisible scatter
of large squares covers the nodes so a click anywhere near one selects it (customdata = node index).

Readable at width 5 on a 1024-pixel screen: pruned branches are grey dots without labels (hover names them)
on narrower rows, and the page gives each step a column as wide as its longest label (`min_width`),
scrolling sideways where the steps do not fit.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from explorer.record import BeamNode, BeamRecord
from explorer.app.figures.style import ACCENT, FONT_SIZE, TRUTH, set_layout, styled

KEPT = "#1f77b4"
PRUNED = "#b0b0b0"
ROW_PX = 58  # vertical room per leaf of a surviving branch: a two-line label and its node
PRUNED_ROW = 0.6  # a pruned leaf's share of that (it has no label)
MAX_HEIGHT = 2400


def tree_layout(record: BeamRecord, pruned_row: float = 1.0) -> dict[int, float]:
    """A y position for every node: leaves in depth-first order, a parent at its children's mean, so branches
    never cross (tidy-tree layout). A leaf of a surviving branch takes a row, a pruned leaf `pruned_row`."""
    children: dict[int, list[int]] = {}
    for node in record.nodes:
        children.setdefault(node.parent, []).append(node.index)
    alive = _on_path(record)
    y: dict[int, float] = {}
    next_leaf = 0.0
    previous_alive = True

    def place(index: int) -> float:
        nonlocal next_leaf, previous_alive
        kids = children.get(index, [])
        if not kids:
            here = index in alive
            if y:  # the gap above a leaf: a full row when either neighbour carries a label
                next_leaf += 1.0 if here or previous_alive else pruned_row
            y[index] = next_leaf
            previous_alive = here
            return y[index]
        ys = [place(k) for k in kids]
        y[index] = sum(ys) / len(ys)
        return y[index]

    for root in children.get(-1, []):
        place(root)
    return y


def _on_path(record: BeamRecord) -> set[int]:
    """Nodes on the way to some returned candidate (the branches that survived)."""
    keep: set[int] = set()
    for node in record.nodes:
        if node.candidate is not None:
            index = node.index
            while index >= 0 and index not in keep:
                keep.add(index)
                index = record.nodes[index].parent
    return keep


def _label(token: str) -> str:
    return "␣" if token == " " else token


def beam_tree_figure(record: BeamRecord, token_names: Sequence[str], selected: int | None = None,
                     title: str | None = None) -> go.Figure:
    """The tree: x = step t, y = tidy layout; `token_names[id]` names each token id."""
    y = tree_layout(record, PRUNED_ROW)
    alive = _on_path(record)
    root_y = sum(y[n.index] for n in record.nodes if n.parent == -1) / max(1, len(record.children(-1)))
    fig = go.Figure()
    for grey in (True, False):  # grey edges first, so the surviving branches draw on top
        xs: list[float | None] = []
        ys: list[float | None] = []
        for node in record.nodes:
            if (node.index not in alive) != grey:
                continue
            px, py = (0, root_y) if node.parent == -1 else (node.step, y[node.parent])
            xs += [px, node.step + 1, None]
            ys += [py, y[node.index], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line={"color": PRUNED if grey else KEPT, "width": 1.5 if grey else 2.5},
                                 name="pruned edges" if grey else "kept edges"))
    fig.add_trace(go.Scatter(x=[0], y=[root_y], mode="markers+text", text=["<sos>"], textposition="middle left",
                             marker={"size": 12, "color": "#444"}, hoverinfo="skip", showlegend=False, name="start"))
    groups = (("kept", lambda n: n.index in alive and n.candidate is None, KEPT, "circle"),
              ("pruned", lambda n: n.index not in alive, PRUNED, "circle"),
              ("candidate", lambda n: n.candidate is not None, TRUTH, "star"))
    for name, member, colour, symbol in groups:
        chosen = [n for n in record.nodes if member(n)]
        labelled = colour != PRUNED  # a pruned node's token and log P are in its hover text
        fig.add_trace(go.Scatter(
            x=[n.step + 1 for n in chosen], y=[y[n.index] for n in chosen],
            mode="markers+text" if labelled else "markers", name=name,
            text=[_node_text(n, token_names) for n in chosen] if labelled else None,
            textposition="middle right" if symbol == "star" else "top center",
            textfont={"size": FONT_SIZE - 2, "color": "#333"},
            marker={"size": 16 if symbol == "star" else 11 if labelled else 8, "color": colour, "symbol": symbol,
                    "line": {"width": 1, "color": "white"}},
            hoverinfo="skip", showlegend=bool(chosen)))
    if selected is not None and 0 <= selected < len(record.nodes):
        node = record.nodes[selected]
        fig.add_trace(go.Scatter(x=[node.step + 1], y=[y[selected]], mode="markers", name="selected",
                                 marker={"size": 26, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": ACCENT}},
                                 hoverinfo="skip", showlegend=False))
    nodes = list(record.nodes)
    fig.add_trace(go.Scatter(  # the click targets: invisible squares over every node, carrying its index
        x=[n.step + 1 for n in nodes], y=[y[n.index] for n in nodes], mode="markers", name="nodes",
        customdata=[[n.index, n.step + 1, n.log_prob] for n in nodes],
        hovertext=[_hover(n, record, token_names) for n in nodes], hovertemplate="%{hovertext}<extra></extra>",
        marker={"symbol": "square", "size": 30, "opacity": 0}, showlegend=False))
    leaves = max(1.0, max(y.values(), default=0.0) + 1)
    set_layout(fig, xaxis={"title": {"text": "step t"}, "dtick": 1, "range": [-1.2, record.steps + 1.2],
                           "zeroline": False},
               yaxis={"visible": False, "range": [leaves - 0.5, -1.0]}, clickmode="event+select", dragmode=False)
    styled(fig, title, height=int(min(MAX_HEIGHT, 160 + ROW_PX * leaves)))
    return set_layout(fig, legend={"xanchor": "left", "x": 0.0})


def min_width(record: BeamRecord, token_names: Sequence[str], font_px: float) -> int:
    """The width in pixels at which no two labels of neighbouring steps run into each other: every step's
    column as wide as its longest label (a wide CJK glyph counts twice), plus the margins and the stars'
    labels past the last step."""
    alive = _on_path(record)
    widest = 4.0
    for node in record.nodes:
        if node.index in alive:
            token = _label(token_names[node.token])
            widest = max(widest, sum(2 if ord(c) >= 0x2e80 else 1 for c in token), 5.0)  # "-12.34"
    column = widest * 0.58 * font_px + 14
    return int(80 + column * (record.steps + 2) + 90)


def _node_text(node: BeamNode, token_names: Sequence[str]) -> str:
    rank = f" #{node.candidate + 1}" if node.candidate is not None else ""
    return f"{_label(token_names[node.token])}{rank}<br>{node.log_prob:.2f}"


def _hover(node: BeamNode, record: BeamRecord, token_names: Sequence[str]) -> str:
    prefix = " ".join(_label(token_names[i]) for i in record.prefix(node.index))
    status = ("finished: candidate #%d" % (node.candidate + 1) if node.finished and node.candidate is not None
              else "candidate #%d (capped)" % (node.candidate + 1) if node.candidate is not None
              else "pruned" if node.pruned else "kept")
    return (f"step {node.step + 1}: {_label(token_names[node.token])}<br>prefix: {prefix}"
            f"<br>log P = {node.log_prob:.4f}<br>{status}")
