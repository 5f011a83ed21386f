"""explorer/equations.py is the one home of the article's equations as text: every template is well-formed
LaTeX (balanced braces and environments), states the article's formula, and the pages and figures take
their equations from it instead of keeping copies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer import equations as eq

ROOT = Path(__file__).resolve().parent.parent / "explorer"

TEMPLATES = {
    "sampling": eq.sampling(),
    "rnn unit": eq.rnn_unit(), "rnn unit sized": eq.rnn_unit(8, 4), "gru unit": eq.gru_unit(),
    "rnn input": eq.rnn_unit_input("0.1234"), "rnn output": eq.rnn_unit_output("0.1234", "0.1227"),
    "gru output": eq.gru_unit_output("0.5"), "unshared": eq.unshared_rnn(), "shared": eq.shared_rnn(),
    "encoder summary": eq.encoder_summary(), "plain decoder": eq.plain_decoder(),
    "state update": eq.state_update(), "state update plain": eq.state_update(attention=False),
    "state update at 3": eq.state_update(3, True, eq.CELL_NAMES["gru"], eq.text("a_{b}")),
    "query": eq.query(3, linear=True), "key": eq.key(linear=True), "value": eq.value(linear=True),
    **{f"score {kind}": eq.score(kind, 3, 16) for kind in ("dot", "scaled_dot", "additive")},
    "score bold": eq.score("additive", bold=True), "weights": eq.weights(3), "weights tau": eq.weights(3, 0.5),
    "weights vector": eq.weights_vector(bold=True), "weight value": eq.weight_value("t", 2, "1.000", "0.5000"),
    "context": eq.context(3), "context expectation": eq.context(bold=True, expectation=True),
    "context terms": eq.context_terms([(0.5, 1), (0.25, 2)], more=True), "output": eq.output(3),
    "output plain": eq.output(3, attention=False),
    "largest weight": eq.largest_weight(3, 2, eq.text("x"), 1.5, 0.7, 2.0),
    "greedy": eq.greedy_choice(3, eq.text("<eos>"), 0.9), "forced": eq.forced_choice(3, eq.text("#"), 0.1, "forced"),
    "aligned": eq.aligned(eq.state_update(), eq.state_update(2)), "four steps": eq.four_steps(),
}


def balanced(tex: str) -> bool:
    """Braces balance (escaped \\{ and \\} aside) and every \\begin{env} has its \\end{env}, in order."""
    depth = 0
    for match in re.finditer(r"\\\\|\\[{}]|[{}]", tex):
        token = match.group()
        if token in ("{", "}"):
            depth += 1 if token == "{" else -1
            if depth < 0:
                return False
    stack = []
    for kind, env in re.findall(r"\\(begin|end)\{(\w+)\}", tex):
        if kind == "begin":
            stack.append(env)
        elif not stack or stack.pop() != env:
            return False
    return depth == 0 and not stack


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_template_is_well_formed_latex(name):
    tex = TEMPLATES[name]
    assert balanced(tex), tex
    assert "$" not in tex.replace(r"\$", ""), "templates leave math delimiters to the caller"


def test_the_check_catches_unbalanced_latex():
    assert not balanced(r"\frac{a}{b")
    assert not balanced(r"\begin{aligned} a \end{gathered}")
    assert balanced(r"\text{\{}")


def test_the_templates_state_the_articles_equations():
    assert eq.score("dot", 3) == r"e_{3i} = q_{3}\cdot k_{i}"
    assert eq.score("scaled_dot", "t", 16) == r"e_{ti} = \frac{q_{t}\cdot k_{i}}{\sqrt{16}}"
    assert r"\tanh(q_{t} + k_{i})" in eq.score("additive")  # tanh, as the article and model.py write it
    assert eq.weights(2) == r"\alpha_{2i} = \frac{\exp(e_{2i})}{\sum_j \exp(e_{2j})}"
    assert r"/\tau" in eq.weights(2, 0.5)
    assert eq.context(2) == r"c_{2} = \sum_i \alpha_{2i}\, v_i"
    assert eq.state_update(2) == r"s_{2} = f\big(s_{1},\,[\,y_{1};\,c_{1}\,]\big)"
    assert eq.output(2, attention=False) == r"\hat y_{2} = \mathrm{softmax}\big(U\,s_{2} + b_{U}\big)"
    assert eq.context_title(12) == "c₁₂ = Σᵢ α₁₂ᵢ vᵢ"
    assert eq.score_title("additive") == "e = wᵀtanh(q+k)" and eq.score_title("none") == ""


def test_a_token_is_escaped_for_latex_text():
    assert eq.text("a_{b}$") == r"\text{“a\_\{b\}\$”}"
    assert eq.text(" ") == r"\text{“␣”}"


# LaTeX of the article's equations that only explorer/equations.py may spell out
EQUATION_MARKS = (r"\sum", r"\frac", r"\alpha", r"\tanh", r"\mathrm{softmax}", r"\mathrm{Query}", r"\exp")


def _modules(*folders: str) -> list[Path]:
    found = []
    for folder in folders:
        found += sorted(p for p in ROOT.rglob("*.py") if folder in p.relative_to(ROOT).parts)
    return found


@pytest.mark.parametrize("path", _modules("pages", "figures"), ids=lambda p: p.name)
def test_pages_and_figures_take_their_equations_from_the_module(path):
    text = path.read_text(encoding="utf-8").replace("\\\\", "\\")  # "\\sum" in a plain string is \sum
    copies = [mark for mark in EQUATION_MARKS if mark in text]
    assert not copies, f"{path.name} spells out {copies}: use explorer/equations.py"


def test_the_pages_that_show_equations_import_the_module():
    for name in ("explore_panels.py", "learn.py", "explore_what_if.py"):
        path = next(p for p in _modules("pages") if p.name == name)
        assert re.search(r"^from explorer import .*\bequations\b", path.read_text(encoding="utf-8"), re.M), name
