"""Explore's nearest-examples view under AppTest: the neighbours of the trace's own hᵢ / sₜ, checked against an
index built outside the page and against the states their links open; the URL keeps the query."""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import pytest

from explorer.checkpoints import checkpoint

from explorer.engine import neighbours
from explorer.engine.trace import trace

from streamlit.testing.v1 import AppTest

from test_app_explore import TIMEOUT, errors, ok, open_app, query


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
        # the index keeps float16 copies: its distance is off by at most how far the copy is from the state
        rounding = np.linalg.norm(state - state.astype(np.float16).astype(np.float32))
        assert abs(np.linalg.norm(state - query_state) - row["distance"]) <= rounding + 1e-5
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
    assert origin.startswith("the 2 held-out pairs (from its validation split) its checkpoint carries, not its "
                             "training pairs: the sentence pairs it was trained on do not ship with the app")
    found = neighbours.nearest(index, "h", index.encoder[0], 1)
    assert found[0].distance == pytest.approx(0.0, abs=1e-6)


def test_a_count_of_examples_in_the_training_record_is_not_a_list_of_pairs(models_dir):
    bundle = checkpoint.load(models_dir / "tiny-fra.safetensors", name="tiny-fra")
    bundle.training["examples"] = 512000  # what `explorer train` records: how many examples it saw
    with pytest.raises(neighbours.ExplorerError, match="keeps no example pairs"):
        neighbours.build_index(bundle)


@pytest.mark.parametrize("curriculum", [0, 6])
def test_a_toy_models_training_pairs_are_regenerated_as_its_training_drew_them(curriculum):
    """tasks.training_examples replays the trainer's own draws (its generator from the seed, its batch size, its
    curriculum): the same pairs, in order, as Trainer.next_batch gives step by step."""
    from explorer.data.tasks import TaskSpec, training_examples
    from explorer.training.data import TaskData
    from explorer.training.train import TrainConfig, Trainer, new_task_bundle
    spec = TaskSpec("reverse", min_len=1, max_len=9)
    cfg = TrainConfig(steps=20, batch_size=7, lr=1e-2, eval_every=10, eval_samples=10, seed=3,
                      curriculum=curriculum)
    bundle, task = new_task_bundle(spec, "replayed", seed=cfg.seed, embed=6, hidden=8, attn_dim=5)
    trainer = Trainer(bundle, TaskData(task, bundle.src_vocab, bundle.tgt_vocab, cfg.eval_samples, cfg.seed), cfg,
                      device="cpu")
    drawn = []
    for step in range(6):
        trainer.step = step
        drawn += [(p.src, p.tgt) for p in trainer.next_batch()]
    replayed = training_examples(task, cfg.seed, cfg.batch_size, len(drawn), curriculum, cfg.steps)
    assert [(tuple(bundle.src_vocab.encode(e.source)), tuple(bundle.tgt_vocab.encode(e.target)))
            for e in replayed] == drawn


def test_a_toy_models_index_holds_the_pairs_its_training_drew(models_dir):
    """A copy model whose training record has its seed and batch size: the index holds the first TRAINING_PAIRS
    pairs that training drew (thousands of pairs, tens of thousands of states), the origin the page prints says
    so, the states are float16 copies of the states a trace recomputes; a record without them falls back to a
    seeded sample and says that instead."""
    from explorer.data.tasks import training_examples
    bundle = checkpoint.load(models_dir / "copy.safetensors", name="copy")
    assert "seeded sample" in neighbours.sample_pairs(bundle)[1]
    bundle.training.update(seed=5, batch_size=16)
    pairs, origin = neighbours.sample_pairs(bundle)
    first = training_examples(bundle.task_obj, 5, 16, 20)
    assert [p[0] for p in pairs[:20]] == ["".join(e.source) for e in first]
    assert len(pairs) == neighbours.TRAINING_PAIRS == 2000
    assert "first 2,000 pairs its training drew" in origin and "training seed 5 and batch size 16" in origin
    index = neighbours.build_index(bundle)
    assert index.encoder.dtype == index.decoder.dtype == np.float16
    assert index.origin == origin and len(index.pairs) == neighbours.TRAINING_PAIRS
    assert len(index.decoder) == sum(len(p.target_tokens) + 1 for p in index.pairs) > 10_000  # <eos> steps too
    query_state = trace(bundle, "31415926").decoder_states[2]
    for n in neighbours.nearest(index, "s", query_state, 3):
        owner = index.pairs.index(n.pair)
        (row,) = np.flatnonzero((index.decoder_owner == owner) & (index.decoder_step == n.position))
        recomputed = trace(bundle, n.pair.source, target=n.pair.target).decoder_states[n.position]
        np.testing.assert_allclose(index.decoder[row].astype(np.float32), recomputed, rtol=2e-3, atol=2e-3)
        assert n.distance == pytest.approx(float(np.linalg.norm(index.decoder[row].astype(np.float64)
                                                                - query_state)), abs=1e-6)
        assert n.token == (n.pair.target_tokens + ("<eos>",))[n.position]


FRA_PAIRS = (("Go.", "Va !"), ("Hi.", "Salut !"), ("Who are you?", "Qui êtes-vous ?"))


def test_a_translation_model_trained_in_the_app_searches_its_own_training_pairs(models_dir):
    """A translation model trained in this session on the user's file keeps those pairs (bundle.trained_on, never
    saved): its index holds them and the page says so (not the held-out pairs it also carries); the index is
    kept in the session's one slot, for that version of the model."""
    from explorer.checkpoints.registry import SessionModels
    from explorer.engine.bundle import TrainingSample
    mine = checkpoint.load(models_dir / "tiny-fra.safetensors", name="my-fra")
    mine.trained_on = TrainingSample(FRA_PAIRS, 1234, "my-pairs.tsv")
    mine.examples = (("The man is here.", "L'homme est ici."),)  # carried: not what is searched here
    assert checkpoint.from_bytes(checkpoint.to_bytes(mine), "again").trained_on is None, "never saved"
    models = SessionModels()
    models.put(mine)
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.session_state["models"] = models
    at.query_params.update(model="my-fra", input="Hi.", nn="s1")
    ok(at)
    assert not errors(at)
    said = " ".join(m.value for m in at.markdown)
    assert "among every decoder state of 3 of the 1,234 pairs it trained on (the first of the training split of " \
           "my-pairs.tsv, trained in this app)" in said
    assert set(table(at)["input"]) <= {s for s, _ in FRA_PAIRS}
    key, index, _ = at.session_state["explore_nn_index"]  # the session's one slot, for this version
    assert key == ("my-fra", models.version("my-fra")) and [p.source for p in index.pairs] == [s for s, _ in FRA_PAIRS]


def test_the_server_keeps_one_shipped_index_and_lets_the_old_one_go_before_the_next_build(models_dir, monkeypatch):
    """A toy model's index is ~25 MB: the server keeps one shipped model's, drops it before building another's
    (never two in memory at once but while one is in use) and builds a kept one only once."""
    from explorer.app.pages import neighbours_panel
    slot = neighbours_panel._ShippedSlot()
    kept_while_building = []

    def build(bundle, pairs=None):
        kept_while_building.append(slot._kept)
        return neighbours.build_index(bundle, pairs)
    monkeypatch.setattr(neighbours_panel, "neighbours", type("Engine", (), {"build_index": staticmethod(build)}))
    first, _ = slot.get("copy")
    assert slot.get("copy")[0] is first
    second, _ = slot.get("dates")
    assert kept_while_building == [None, None] and slot._kept[:2] == ("dates", second)
