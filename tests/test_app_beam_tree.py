"""Explore's beam tree under AppTest: it draws the search's own record, a clicked node makes the step panel
trace its prefix, "Force this prefix" becomes the force intervention, and the URL keeps the node."""

from __future__ import annotations

import numpy as np

from explorer.checkpoints import checkpoint

from explorer.app import views
from explorer.app.figures.beam import beam_tree_figure

from test_app_explore import decode, errors, figure, metric, ok, open_app, query, state

WIDTH = "4"


def record_for(models_dir, text: str = "31415926", width: int = 4):
    return views.beam_tree(checkpoint.load(models_dir / "copy.safetensors", name="copy"), text, width)


def click(at, index: int) -> None:
    spec = figure(at, "explore_beam_tree")
    (targets,) = [t for t in spec["data"] if t.get("name") == "nodes"]
    custom = decode(targets["customdata"])
    point = {"curve_number": len(spec["data"]) - 1, "point_number": index, "point_index": index,
             "x": float(decode(targets["x"])[index]), "y": float(decode(targets["y"])[index]),
             "customdata": custom[index].tolist()}
    at.session_state["explore_beam_tree"] = {"selection": {"points": [point], "point_indices": [index], "box": [],
                                                           "lasso": []}}
    ok(at)


def test_the_tree_is_the_search_record(models_dir):
    at = open_app(models_dir, model="copy", input="31415926", mode="beam", width=WIDTH)
    assert not errors(at)
    record = record_for(models_dir)
    spec = figure(at, "explore_beam_tree")
    (targets,) = [t for t in spec["data"] if t.get("name") == "nodes"]
    custom = decode(targets["customdata"])
    assert custom[:, 0].astype(int).tolist() == [n.index for n in record.nodes]
    np.testing.assert_allclose(custom[:, 2], [n.log_prob for n in record.nodes], rtol=1e-6)
    expected = beam_tree_figure(record, checkpoint.load(models_dir / "copy.safetensors").tgt_vocab.tokens)
    assert [t.name for t in expected.data] == [t.get("name") for t in spec["data"]]
    # the candidate table reads the same record
    (table,) = [d.value for d in at.dataframe if "log P" in d.value.columns]
    np.testing.assert_allclose(table["log P"], [c.log_prob for c in record.candidates], rtol=1e-6)


def test_clicking_a_node_traces_its_prefix_and_the_url_keeps_it(models_dir):
    at = open_app(models_dir, model="copy", input="31415926", mode="beam", width=WIDTH)
    record = record_for(models_dir)
    node = next(n for n in record.nodes if n.pruned and n.step >= 1)
    click(at, node.index)
    assert state(at, "node") == node.index
    assert state(at, "step") == node.step + 1
    assert query(at)["node"] == str(node.index + 1)
    assert metric(at, "Beam tree node")
    assert metric(at, "Steps") == str(node.step + 1)
    heat = figure(at, "explore_heatmap")
    assert decode(heat["data"][0]["z"]).shape[0] == node.step + 1, "the heatmap is the prefix's"
    assert any("Node " + str(node.index + 1) in m.value for m in at.markdown)
    # a fresh session from the link opens the same node
    again = open_app(models_dir, **query(at))
    assert state(again, "node") == node.index
    assert metric(again, "Steps") == str(node.step + 1)
    # back to the candidates
    again.button(key="explore_node_clear").click()
    ok(again)
    assert state(again, "node") is None
    assert "node" not in query(again)


def test_force_this_prefix_is_the_force_intervention(models_dir):
    at = open_app(models_dir, model="copy", input="31415926", mode="beam", width=WIDTH)
    record = record_for(models_dir)
    node = next(n for n in record.nodes if n.pruned and n.step >= 1)
    click(at, node.index)
    at.button(key="explore_force_prefix").click()
    ok(at)
    bundle = checkpoint.load(models_dir / "copy.safetensors")
    tokens = bundle.tgt_vocab.decode(record.prefix(node.index))
    assert state(at, "mode") == "greedy"
    assert state(at, "forced") == list(enumerate(tokens))
    assert query(at)["force"] == " ".join(f"{t + 1}:{tok}" for t, tok in enumerate(tokens))
    shown = metric(at, "Output")
    assert shown.startswith("".join(tokens)), "greedy decoding goes on from the forced prefix"
    assert not errors(at)


def test_a_node_past_the_tree_is_a_warning(models_dir):
    at = open_app(models_dir, model="copy", input="31415926", mode="beam", width=WIDTH, node="999")
    assert any("no node 999" in w.value for w in at.warning)
    assert state(at, "node") is None
    assert metric(at, "Beam candidate #1")
    bad = open_app(models_dir, model="copy", input="31415926", mode="beam", width=WIDTH, node="x")
    assert any("beam node" in w.value for w in bad.warning)
