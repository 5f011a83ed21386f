"""`python -m explorer faithfulness` and `trace --attributions`: the JSON contract, the text, progress, and bad
input refused like every other command (exit 2, one line on stderr). In-process through the same `main()`."""

from __future__ import annotations

import json

import pytest

from explorer.__main__ import main
from explorer.checkpoints import checkpoint
from explorer.faithfulness import COUNTERFACTUALS, METHODS

SHIPPED = set(checkpoint.pretrained_names())
needs = lambda *names: pytest.mark.skipif(not set(names) <= SHIPPED,  # noqa: E731
                                         reason=f"needs the shipped {', '.join(names)}")


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_refused(rc: int, out: str, err: str, message: str) -> None:
    assert rc == 2, (rc, err)
    assert out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


@needs("reverse")
def test_json_has_methods_counterfactuals_steps_and_speed(capsys):
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "reverse", "--samples", "3", "--json", "--seed", "4")
    assert rc == 0, err
    report = json.loads(out)
    assert set(report["methods"]) == set(METHODS)
    for method in METHODS:
        assert 0.0 <= report["methods"][method]["top1_agreement"] <= 1.0
        assert -1.0 <= report["methods"][method]["kendall_tau"] <= 1.0
    for kind in COUNTERFACTUALS:
        assert 0.0 <= report["counterfactual"][f"{kind}_flip_rate"] <= 1.0
    assert report["steps"] >= 3 and report["sentences"] == 3 and report["seconds_per_sentence"] > 0
    assert report["truth"]["alpha"] >= 0.9
    assert "sentences" in err, "progress on stderr"


@needs("reverse")
def test_one_input_prints_every_step(capsys):
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "reverse", "--input", "3141", "--ig-steps", "8")
    assert rc == 0, err
    assert out.startswith("input : 3 1 4 1\noutput: 1 4 1 3 <eos>")
    assert all(f"step {t:>2}:" in out for t in range(1, 6))
    assert "agreement with α" in out and "Kendall τ" in out and "adversarial" in out
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "reverse", "--input", "3141", "--ig-steps", "8",
                       "--json")
    data = json.loads(out)
    assert len(data["attributions"]["erasure"]) == 5 and len(data["attributions"]["erasure"][0]) == 4
    assert data["integrated_gradients"]["steps"] == 8


@needs("reverse-none")
def test_the_no_attention_twin_says_there_is_no_alpha(capsys):
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "reverse-none", "--samples", "2", "--json", "--quiet")
    assert rc == 0, err
    report = json.loads(out)
    assert set(report["methods"]) == {"grad_x_input", "integrated_gradients"}
    assert report["methods"]["grad_x_input"]["top1_agreement"] is None
    assert report["counterfactual"]["adversarial_flip_rate"] is None
    assert "no α" in report["note"]
    rc, out, _ = run(capsys, "faithfulness", "--checkpoint", "reverse-none", "--input", "12", "--ig-steps", "4")
    assert rc == 0 and "no attention" in out


@needs("reverse")
def test_sources_from_a_file(capsys, tmp_path):
    data = tmp_path / "pairs.tsv"
    data.write_text("12\t21\n345\t543\n9\t9\n", encoding="utf-8")
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "reverse", "--data", str(data), "--limit", "2",
                       "--json", "--quiet", "--ig-steps", "4")
    assert rc == 0, err
    assert json.loads(out)["sentences"] == 2


@needs("reverse")
def test_trace_with_attributions(capsys):
    rc, out, err = run(capsys, "trace", "--checkpoint", "reverse", "--input", "271", "--json", "--attributions")
    assert rc == 0, err
    data = json.loads(out)
    assert set(data["faithfulness"]["attributions"]) == set(METHODS)
    assert data["output_tokens"] == ["1", "7", "2", "<eos>"]
    rc, out, err = run(capsys, "trace", "--checkpoint", "reverse", "--input", "271", "--attributions")
    assert rc == 0 and "gradient × input" in out
    rc, out, err = run(capsys, "trace", "--checkpoint", "reverse", "--input", "271", "--mask", "1", "--attributions")
    assert_refused(rc, out, err, "--attributions explain the model as trained")


@pytest.mark.parametrize("args, message", [
    (["--samples", "0"], "samples"),
    (["--input", "  "], "--input is empty"),
    (["--input", "12", "--epsilon", "1.5"], "--epsilon"),
    (["--input", "12", "--ig-steps", "1"], "--ig-steps"),
    (["--input", "12", "--limit", "3"], "--limit is for --data"),
    (["--input", "12", "--split", "valid"], "--split is for --data"),
    (["--data", "/no/such/file.tsv"], "no such file"),
    (["--input", "12a"], "unknown symbol"),
    (["--input", "12", "--threads", "0"], "--threads"),
])
def test_bad_input_is_one_line(capsys, args, message):
    if "reverse" not in SHIPPED:
        pytest.skip("needs the shipped reverse")
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "reverse", *args)
    assert_refused(rc, out, err, message)


def test_a_missing_checkpoint_and_a_missing_input_are_one_line(capsys):
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "no-such-model", "--input", "1")
    assert_refused(rc, out, err, "no-such-model")
    with pytest.raises(SystemExit) as stop:
        main(["faithfulness", "--checkpoint", "reverse"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.count("\n") >= 1


@needs("eng-fra")
def test_a_translation_model_needs_a_file_or_an_input(capsys):
    rc, out, err = run(capsys, "faithfulness", "--checkpoint", "eng-fra", "--samples", "3")
    assert_refused(rc, out, err, "translation model")
