"""Translation end to end: train on a TSV, translate through the CLI (one line out per line in), BLEU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.checkpoints import checkpoint
from explorer.training.evaluation import evaluate_tsv, translate_one
from explorer.data.vocab import EOS_ID, PAD_ID, SOS_ID, UNK_ID

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

NUMBERS_EN = ["one", "two", "three", "four", "five", "six"]
NUMBERS_FR = ["un", "deux", "trois", "quatre", "cinq", "six"]
COLOURS_EN = ["red", "green", "blue"]
COLOURS_FR = ["rouges", "vertes", "bleues"]


def tiny_corpus() -> list[tuple[str, str]]:
    """Adjective-noun reordering in miniature: "the red car" -> "la voiture rouge"."""
    pairs = []
    for en_c, fr_c in zip(COLOURS_EN, COLOURS_FR):
        for en_n, fr_n in zip(NUMBERS_EN, NUMBERS_FR):
            pairs.append((f"{en_n} {en_c} cars.", f"{fr_n} voitures {fr_c}."))
    return pairs


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("translation")
    data = folder / "tiny.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in tiny_corpus()), encoding="utf-8")
    out = folder / "tiny"
    result = run_cli("train", "--data", str(data), "--tgt-lang", "fr", "--out", str(out), "--min-freq", "1",
                     "--valid-fraction", "0", "--steps", "400", "--batch-size", "32", "--embed", "16",
                     "--hidden", "48", "--attn-dim", "24", "--dropout", "0", "--eval-every", "100",
                     "--lr", "0.01", "--quiet")
    assert result.returncode == 0, result.stderr
    return out.with_suffix(".safetensors")


def test_tiny_model_learns_the_fixture_corpus(tiny_model: Path) -> None:
    bundle = checkpoint.load(tiny_model)
    assert bundle.languages == ("en", "fr")
    right = sum(translate_one(bundle, s).text == t for s, t in tiny_corpus())
    assert right >= 0.9 * len(tiny_corpus())


def test_translate_reads_stdin_and_writes_one_line_per_line(tiny_model: Path) -> None:
    lines = ["two blue cars.", "", "three red cars.", "x" * 5000, "   ", "six green cars."]
    result = run_cli("translate", "--checkpoint", str(tiny_model), stdin="\n".join(lines) + "\n")
    assert result.returncode == 0
    out = result.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[0] == "deux voitures bleues."
    assert out[2] == "trois voitures rouges."
    assert out[5] == "six voitures vertes."
    assert out[1] == out[3] == out[4] == ""
    errors = result.stderr.strip().splitlines()
    assert [e.split(":")[0] for e in errors] == ["line 2", "line 4", "line 5"]
    assert "Traceback" not in result.stderr


def test_a_word_the_corpus_never_had_is_spelt_in_pieces_never_unk(tiny_model: Path) -> None:
    bundle = checkpoint.load(tiny_model)
    for text in ("two purple cars.", "Zwölf Boxkämpfer jagen Viktor 🍕 😀 über den großen Sylter Deich.",
                 "我有一辆红色的车。", "<pad> <eos> <0x41>"):
        prepared = bundle.prepare(text)
        assert prepared.unknown == () and UNK_ID not in prepared.ids, text
        assert {PAD_ID, SOS_ID, EOS_ID}.isdisjoint(prepared.ids), text  # typed specials are only text
    result = run_cli("translate", "--checkpoint", str(tiny_model), "--input", "two purple cars.")
    assert result.returncode == 0 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 1


def test_output_is_detokenised_text_with_punctuation_attached(tiny_model: Path) -> None:
    bundle = checkpoint.load(tiny_model)
    text = translate_one(bundle, "Two red cars.").text
    assert text == text.strip() and not text.endswith(" .") and "▁" not in text
    assert bundle.detokenize_target(bundle.tokenize_target("Deux voitures rouges.")) == "Deux voitures rouges."


def test_translate_with_beam_search_agrees_on_easy_input(tiny_model: Path) -> None:
    result = run_cli("translate", "--checkpoint", str(tiny_model), "--input", "four red cars.", "--beam", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "quatre voitures rouges."


def test_eval_on_a_tsv_reports_bleu(tiny_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "eval.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in tiny_corpus()), encoding="utf-8")
    result = run_cli("eval", "--checkpoint", str(tiny_model), "--data", str(data), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"n", "exact_match", "token_accuracy", "bleu", "chrf", "bleu_signature", "chrf_signature"} <= set(report)
    assert report["n"] == len(tiny_corpus())
    assert report["bleu"] > 80 and report["chrf"] > 80
    assert "case:mixed" in report["bleu_signature"] and "tok:13a" in report["bleu_signature"]


def test_eval_on_a_malformed_tsv_is_one_line(tiny_model: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"\x00\x01\x02 binary")
    result = run_cli("eval", "--checkpoint", str(tiny_model), "--data", str(bad), "--json")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


SHIPPED = {"eng-fra": ("eng-fra", 45.5), "eng-cmn": ("eng-cmn", 39.0), "eng-fra-none": ("eng-fra", 28.0)}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_translation_model_on_its_held_out_split(name: str) -> None:
    """The shipped model against the held-out split of the shared data it was trained beside."""
    folder, floor = SHIPPED[name]
    data = SHARED_DATA / folder / "pairs.tsv"
    if not data.exists() or name not in checkpoint.pretrained_names():
        pytest.skip(f"needs ../shared/data/{folder} and pretrained/{name}")
    bundle = checkpoint.load(name)
    report = evaluate_tsv(bundle, str(data), samples=400, split="valid")
    assert report["n"] >= 350
    assert report["bleu"] >= floor - 8  # 400 sentences: a noisy slice of the full split (README has the full figure)


@pytest.mark.parametrize("name, text, pairs", [
    ("eng-fra", "I have a red car.", {"voiture": "car", "rouge": "red"}),  # the adjective follows the noun in French
    ("eng-fra", "He bought a big house.", {"maison": "house"}),
    ("eng-fra", "How can we use variable input lengths?",  # "Comment" looks at "we" (0.36) as much as at "How" (0.28)
     {"utiliser": "use", "longueurs": "lengths", "variables": "variable"}),
    ("eng-cmn", "I have a red car.", {"车": "car", "红": "red", "有": "have"}),
    ("eng-cmn", "How can we use variable input lengths?",
     {"怎": "How", "使": "use", "可": "variable", "输": "input", "长": "lengths"}),
])
def test_the_shipped_models_attend_to_the_word_they_translate(name: str, text: str, pairs: dict[str, str]) -> None:
    """Readable maps: each of these output words has its largest (words view) weight on its English source
    word (a model whose attention collapses onto the final "." fails this; the first eng-fra did)."""
    from explorer.engine.trace import trace
    tr = trace(checkpoint.load(name), text)
    outputs, inputs = tr.word_labels()
    weights = tr.word_weights()
    for word, source in pairs.items():
        row = next((k for k, w in enumerate(outputs) if word in w), None)
        assert row is not None, f"{word!r} not in {outputs}"
        assert source in inputs[int(weights[row].argmax())], (word, inputs, weights[row])


@pytest.mark.parametrize("name", ["eng-fra", "eng-cmn"])
def test_the_articles_sentence_translates_without_unk(name: str) -> None:
    bundle = checkpoint.load(name)
    done = translate_one(bundle, "How can we use variable input lengths?")
    text, unknown = done.text, done.unknown
    assert not unknown and "<unk>" not in text and text.strip()


@pytest.mark.parametrize("name", ["eng-fra", "eng-cmn"])
def test_the_articles_sentence_leads_the_shipped_models_examples(name: str) -> None:
    """Explore offers the article's sentence first for the shipped translation models, then their own held-out
    sentences; a model of one's own data keeps only its own (tests/test_own_data.py)."""
    from explorer.app import views
    bundle = checkpoint.load(name)
    own = views.own_examples(bundle)
    assert own and views.ARTICLE_SENTENCE not in own  # without the article flag it would not be offered
    shown = views.example_inputs(bundle, article=True)
    assert shown[0] == views.ARTICLE_SENTENCE and shown[1:] == own[:views.EXAMPLES_SHOWN - 1]
    assert views.example_inputs(bundle) == own[:views.EXAMPLES_SHOWN]
