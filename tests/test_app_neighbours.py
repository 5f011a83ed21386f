"""Explore's nearest-examples view under AppTest: the neighbours of the trace's own hᵢ / sₜ, checked against an
index built outside the page and against the states their links open; the URL keeps the query."""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import pytest

from explorer.checkpoints import checkpoint

from explorer.engine import neighbours
from explorer.engine.trace import trace

from test_app_explore import errors, ok, open_app, query


def table(at):
    (frame,) = [d.value for d in at.dataframe if "distance" in d.value.columns]
    return frame


@pytest.fixture(scope="module")
def copy_index(models_dir):
    bundle = checkpoint.load(models_dir / "copy.safetensors", name="copy")
    return bundle, neighbours.build_index(bundle)


def test_the_decoder_state_neighbours_are_the_nearest_and_their_links_open_them(models_dir, copy_index):
    bundle, index = copy_index
    at = open_app(models_dir, model="copy", input="31415926", nn="s3", nnk="4")
    assert not errors(at)
    frame = table(at)
    assert len(frame) == 4
    query_state = trace(bundle, "31415926").decoder_states[2]
    expected = neighbours.nearest(index, "s", query_state, 4)
    np.testing.assert_allclose(frame["distance"], [n.distance for n in expected], rtol=1e-5)
    all_distances = np.linalg.norm(index.decoder - query_state, axis=1)
    assert frame["distance"].iloc[-1] <= np.sort(all_distances)[3] + 1e-5, "nothing nearer was left out"
    assert list(frame["distance"]) == sorted(frame["distance"])
    for _, row in frame.iterrows():
        params = dict(parse_qsl(row["open"].lstrip("?")))
        assert params["model"] == "copy" and params["mode"] == "teacher" and params["input"] == row["input"]
        assert int(params["step"]) == row["step t"]
        opened = trace(bundle, params["input"], target=params["target"])
        state = opened.decoder_states[int(params["step"]) - 1]
        assert np.linalg.norm(state - query_state) == pytest.approx(row["distance"], rel=1e-4, abs=1e-5)
    # the link of the nearest opens on Explore, teacher-forced at that step
    params = dict(parse_qsl(frame["open"].iloc[0].lstrip("?")))
    there = open_app(models_dir, **params)
    assert there.session_state["explore_mode"] == "teacher"
    assert there.session_state["explore_step"] == int(params["step"])
    assert not errors(there)


def test_encoder_states_and_the_url_keeps_the_query(models_dir, copy_index):
    bundle, index = copy_index
    at = open_app(models_dir, model="copy", input="31415926", nn="s2")
    at.segmented_control(key="explore_nn_kind").set_value("h")
    ok(at)
    at.number_input(key="explore_nn_at").set_value(4)
    ok(at)
    at.slider(key="explore_nn_k").set_value(6)
    ok(at)
    assert query(at)["nn"] == "h4" and query(at)["nnk"] == "6"
    frame = table(at)
    expected = neighbours.nearest(index, "h", trace(bundle, "31415926").encoder_states[3], 6)
    np.testing.assert_allclose(frame["distance"], [n.distance for n in expected], rtol=1e-5)
    assert list(frame["position i"]) == [n.position + 1 for n in expected]
    assert list(frame["token"]) == [n.pair.source_tokens[n.position] for n in expected]
    again = open_app(models_dir, **query(at))
    np.testing.assert_allclose(table(again)["distance"], frame["distance"])


def test_a_closed_view_builds_nothing_and_bad_queries_are_messages(models_dir):
    at = open_app(models_dir, model="copy", input="31415926")
    assert not [d for d in at.dataframe if "distance" in d.value.columns]
    assert "nn" not in query(at)
    bad = open_app(models_dir, model="copy", input="31415926", nn="q7")
    assert any("neighbour query" in w.value for w in bad.warning)
    far = open_app(models_dir, model="copy", input="314", nn="h40")
    assert query(far)["nn"] == "h3", "a position past the input is clamped to its end"
    fra = open_app(models_dir, model="tiny-fra", input="I am cold.", nn="s1")
    assert any("keeps no example pairs" in i.value for i in fra.info)
    assert not errors(fra)


def test_translation_pairs_kept_in_the_checkpoint_are_searched(models_dir):
    bundle = checkpoint.load(models_dir / "tiny-fra.safetensors", name="tiny-fra")
    bundle.training["examples"] = [["Go.", "Va !"], ["Hi.", "Salut !"]]  # short: the test model decodes 12 pieces
    index = neighbours.build_index(bundle)
    assert [p.source for p in index.pairs] == ["Go.", "Hi."]
    origin = neighbours.sample_pairs(bundle)[1]
    assert "validation pairs kept in the checkpoint" in origin and "not its training pairs" in origin
    found = neighbours.nearest(index, "h", index.encoder[0], 1)
    assert found[0].distance == pytest.approx(0.0, abs=1e-6)


def test_a_count_of_examples_in_the_training_record_is_not_a_list_of_pairs(models_dir):
    bundle = checkpoint.load(models_dir / "tiny-fra.safetensors", name="tiny-fra")
    bundle.training["examples"] = 512000  # what `explorer train` records: how many examples it saw
    with pytest.raises(neighbours.ExplorerError, match="keeps no example pairs"):
        neighbours.build_index(bundle)
