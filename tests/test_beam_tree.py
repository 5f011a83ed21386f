"""The beam tree: beam search's own record of every hypothesis it kept, checked against the step function
(traces of each prefix), against greedy decoding at width 1, and the figure drawn from it."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.app import views
from explorer.engine.bundle import ModelBundle
from explorer.engine.decoding import BeamRecord, beam_record, beam_search
from explorer.app.figures.beam import PRUNED_ROW, beam_tree_figure, tree_layout
from explorer.engine.lengths import output_cap
from explorer.engine.trace import trace
from explorer.data.vocab import EOS_ID

ATOL = 1e-4


def prefix_log_probs(bundle: ModelBundle, text: str, ids: tuple[int, ...]) -> np.ndarray:
    """log ŷ_t(y_t) along a teacher-forced prefix: the step function's own numbers."""
    tr = trace(bundle, text, target=views.Prepared("", (), ids, ()))
    return np.log(tr.probs[np.arange(len(ids)), list(ids)].astype(np.float64))


def next_log_probs(bundle: ModelBundle, text: str, ids: tuple[int, ...]) -> np.ndarray:
    """log ŷ over the whole vocabulary after a prefix (a trace forced on the prefix plus one token)."""
    tr = trace(bundle, text, target=views.Prepared("", (), ids + (EOS_ID,), ()))
    return np.log(tr.probs[len(ids)].astype(np.float64))


def assert_record_is_the_search(bundle: ModelBundle, text: str, width: int) -> BeamRecord:
    record = beam_record(bundle.model, bundle.prepare(text).ids, width)
    nodes = record.nodes
    assert [n.index for n in nodes] == list(range(len(nodes)))
    # every node's total is its parent's plus the step function's log-probability of its token
    for node in nodes:
        ids = record.prefix(node.index)
        assert len(ids) == node.step + 1 and ids[-1] == node.token
        assert node.finished == (node.token == EOS_ID)
        assert node.log_prob == pytest.approx(prefix_log_probs(bundle, text, ids).sum(), abs=ATOL)
        assert node.parent == -1 or nodes[node.parent].step == node.step - 1
    # the nodes kept at step t are the `width` best continuations of the unfinished nodes of step t - 1
    for t in range(record.steps):
        parents = [n for n in nodes if n.step == t - 1 and not n.finished] if t else [None]
        totals = []
        for parent in parents:
            prefix = () if parent is None else record.prefix(parent.index)
            base = 0.0 if parent is None else parent.log_prob
            lp = next_log_probs(bundle, text, prefix)
            totals += [(base + float(lp[v]), -1 if parent is None else parent.index, v) for v in range(len(lp))]
        best = sorted(totals, key=lambda x: -x[0])[:width]
        kept = [(n.parent, n.token) for n in nodes if n.step == t]
        assert sorted(kept) == sorted((p, v) for _, p, v in best)
    # the candidates are nodes of the tree, ranked as beam_search returns them
    assert list(record.candidates) == beam_search(bundle.model, bundle.prepare(text).ids, width)
    ranked = sorted((n for n in nodes if n.candidate is not None), key=lambda n: n.candidate)
    assert [record.prefix(n.index) for n in ranked] == [c.ids for c in record.candidates]
    assert [n.log_prob for n in ranked] == [c.log_prob for c in record.candidates]
    # pruned: kept once, never continued, never a candidate
    continued = {n.parent for n in nodes}
    for node in nodes:
        assert node.pruned == (node.index not in continued and node.candidate is None and not node.finished)
    return record


def test_the_tree_is_what_the_search_kept(trained_copy):
    bundle = trained_copy.bundle
    for text, width in (("3141", 3), ("271828", 4)):
        record = assert_record_is_the_search(bundle, text, width)
        assert len(record.candidates) >= 1


def test_the_tree_of_random_models_is_what_the_search_kept(random_attention_bundle):
    bundle = random_attention_bundle
    record = assert_record_is_the_search(bundle, "1234", 3)
    assert any(n.pruned for n in record.nodes), "an untrained model's beams split and drop branches"


def test_a_width_one_tree_is_greedy_decoding(random_bundle, trained_copy):
    for bundle in (random_bundle, trained_copy.bundle):
        for text in ("1234", "98765"):
            ids = bundle.prepare(text).ids
            record = beam_record(bundle.model, ids, 1, output_cap(bundle, len(ids)).steps)  # the trace's cap
            greedy = trace(bundle, text)
            assert [n.token for n in record.nodes] == greedy.output_ids.tolist()
            assert [n.parent for n in record.nodes] == list(range(-1, len(record.nodes) - 1))
            logp = np.cumsum(np.log(greedy.probs[np.arange(greedy.steps), greedy.output_ids].astype(np.float64)))
            np.testing.assert_allclose([n.log_prob for n in record.nodes], logp, atol=ATOL)
            assert not any(n.pruned for n in record.nodes)
            assert [n.candidate for n in record.nodes] == [None] * (len(record.nodes) - 1) + [0]


def test_a_node_request_traces_its_prefix(trained_copy):
    bundle = trained_copy.bundle
    record = views.beam_tree(bundle, "31415", 3)
    node = next(n for n in record.nodes if n.pruned)
    tr = views.request_trace(bundle, views.Request("m", "31415", mode="beam", beam_width=3, node=node.index),
                             record=record)
    assert tuple(tr.output_ids.tolist()) == record.prefix(node.index)
    assert tr.steps == node.step + 1
    assert float(np.log(tr.probs[np.arange(tr.steps), tr.output_ids].astype(np.float64)).sum()) == \
        pytest.approx(node.log_prob, abs=ATOL)
    with pytest.raises(views.ExplorerError, match="nodes 1–"):
        views.request_trace(bundle, views.Request("m", "31415", mode="beam", beam_width=3, node=len(record.nodes)),
                            record=record)


def test_the_figure_draws_the_record(trained_copy, random_attention_bundle):
    for bundle in (trained_copy.bundle, random_attention_bundle):
        record = beam_record(bundle.model, bundle.prepare("2718").ids, 4)
        names = bundle.tgt_vocab.tokens
        fig = beam_tree_figure(record, names, selected=1).to_plotly_json()
        traces = {t["name"]: t for t in fig["data"]}
        targets = traces["nodes"]
        assert [int(c[0]) for c in targets["customdata"]] == [n.index for n in record.nodes]
        assert list(targets["x"]) == [n.step + 1 for n in record.nodes]
        assert [c[2] for c in targets["customdata"]] == [n.log_prob for n in record.nodes]
        y = tree_layout(record, PRUNED_ROW)
        assert list(targets["y"]) == [y[n.index] for n in record.nodes]
        stars = traces["candidate"]
        assert len(stars["x"]) == len(record.candidates)
        on_path = set()
        for n in record.nodes:
            if n.candidate is not None:
                i = n.index
                while i >= 0:
                    on_path.add(i)
                    i = record.nodes[i].parent
        grey = [n for n in record.nodes if n.index not in on_path]
        assert len(traces["pruned"]["x"]) == len(grey)
        parents = {n.parent for n in record.nodes}
        assert all(n.pruned for n in grey if n.index not in parents), "a grey branch ends in a pruned node"
        assert not any(n.pruned for n in record.nodes if n.index in on_path)
        # labels: token and total log-probability on the surviving branches; pruned ones only on hover
        assert all("<br>" in s for s in traces["kept"]["text"])
        assert traces["pruned"]["mode"] == "markers" and not traces["pruned"].get("text")
        hover = dict(zip((int(c[0]) for c in targets["customdata"]), targets["hovertext"]))
        assert all(hover[n.index].endswith(("pruned", "kept")) for n in grey)
        edges = sum(1 for v in traces["kept edges"]["x"] + traces["pruned edges"]["x"] if v is None)
        assert edges == len(record.nodes)
        # the selected node is ringed
        assert list(traces["selected"]["x"]) == [record.nodes[1].step + 1]


def test_the_layout_never_crosses_branches(random_attention_bundle):
    record = beam_record(random_attention_bundle.model, random_attention_bundle.prepare("55555").ids, 5)
    for y in (tree_layout(record), tree_layout(record, PRUNED_ROW)):  # pruned leaves on narrower rows too
        for t in range(record.steps):
            at_t = sorted((n for n in record.nodes if n.step == t), key=lambda n: y[n.index])
            parents = [y[n.parent] if n.parent >= 0 else 0 for n in at_t]
            assert parents == sorted(parents), "children keep their parents' order"
            assert len({y[n.index] for n in at_t}) == len(at_t), "no two nodes of a step on one row"
