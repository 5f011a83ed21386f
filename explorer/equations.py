"""The article's equations as text: one LaTeX template per step, read by Explore, Learn and figure titles.

Symbols as in DESIGN §1 and explorer/engine/model.py: x_i input tokens, h_i encoder states, s_t decoder state,
y_{t-1} previous output, q_t = Query(s_t), k_i = Key(h_i), v_i = Value(h_i), e_ti scores, α_t weights,
c_t = Σ_i α_ti v_i the context, ŷ_t = softmax(U [s_t; c_t] + b_U). Each function returns LaTeX without
the surrounding $ (Streamlit's st.latex adds none; markdown wraps it in $...$); `t` is the step's
subscript, the letter "t" or a number; `bold` writes vectors bold (Learn's style). The *_title functions
return the same equations in Unicode for Plotly titles, which do not render LaTeX. No torch here.
"""

from __future__ import annotations

CELL_NAMES = {"rnn": r"\mathrm{RNN}", "gru": r"\mathrm{GRU}", "lstm": r"\mathrm{LSTM}", "unshared": r"\mathrm{RNN}"}
ALPHA = r"\alpha"
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def vec(name: str, sub: str | int | None = None, bold: bool = False) -> str:
    """A vector symbol with an optional subscript: `s_{3}`, or `\\boldsymbol s_{t}` in bold."""
    body = rf"\boldsymbol {name}" if bold else name
    return body if sub is None else rf"{body}_{{{sub}}}"


def _prev(t: str | int) -> str:
    """The subscript of the step before t: "t-1" for the letter, the number before for a number."""
    return f"{t}-1" if isinstance(t, str) else str(t - 1)


def sub(n: int) -> str:
    """A number as Unicode subscript digits (titles and table headers): 12 -> ₁₂."""
    return str(n).translate(_SUBSCRIPTS)


# --- a sequence as samples ---------------------------------------------------------------------------

def sampling() -> str:
    """A signal f on [0, T] sampled at N points, and the samples' staircase converging to f as N grows."""
    return (r"t_i = \frac{i\,T}{N},\qquad A_i = f(t_i),\qquad "
            r"\lim_{N\to\infty}\ \max_{t\in[0,T]}\ \bigl|\,f(t) - A_{\lfloor tN/T\rfloor}\bigr| = 0")


# --- the encoder and the RNN unit ------------------------------------------------------------------

def rnn_unit(hidden: int | None = None, embed: int | None = None) -> str:
    """h_t = σ(W [h_{t-1}; x_t] + b) with σ = tanh (a vanilla RNN cell), and W's shape given H and E."""
    h, x, b = vec("h", "t", True), vec("x", "t", True), vec("b", None, True)
    text = (rf"{h} = \sigma\!\left(W\begin{{bmatrix}}{vec('h', 't-1', True)}\\ {x}\end{{bmatrix}} + {b}\right),"
            r"\qquad \sigma = \tanh")
    if hidden is None or embed is None:
        return text
    return (rf"\begin{{gathered}}{text},\\ W = [\,W_{{hh}}\;\; W_{{ih}}\,] \in \mathbb{{R}}^{{H\times(H+E)}},"
            rf"\quad H={hidden},\ E={embed}\end{{gathered}}")


def gru_unit() -> str:
    """nn.GRU's equations: reset r_t, keep z_t, candidate n_t, and the new state h_t."""
    h_prev, x = vec("h", "t-1", True), vec("x", "t", True)
    r, z, n = vec("r", "t", True), vec("z", "t", True), vec("n", "t", True)
    return (r"\begin{aligned}"
            rf"{r} &= \sigma(W_{{ir}}{x} + W_{{hr}}{h_prev} + {vec('b', 'r', True)})\\"
            rf"{z} &= \sigma(W_{{iz}}{x} + W_{{hz}}{h_prev} + {vec('b', 'z', True)})\\"
            rf"{n} &= \tanh\bigl(W_{{in}}{x} + {vec('b', 'in', True)} + {r} \odot"
            rf"(W_{{hn}}{h_prev} + {vec('b', 'hn', True)})\bigr)\\"
            rf"{vec('h', 't', True)} &= (1-{z})\odot {n} + {z} \odot {h_prev}"
            r"\end{aligned}")


def rnn_unit_input(pre: str) -> str:
    """The first component of a tanh RNN step's input with its number: (W[h_{t-1}; x_t] + b)_1 = pre."""
    return rf"(W[h_{{t-1}}; x_t] + b)_1 = {pre}"


def rnn_unit_output(pre: str, h: str) -> str:
    """The first component of a tanh RNN step's new state: h_{t,1} = tanh(pre) = h."""
    return rf"h_{{t,1}} = \tanh({pre}) = \mathbf{{{h}}}"


def gru_unit_output(h: str) -> str:
    """The first component of a GRU step's new state: h_{t,1} = (1 − z_1) n_1 + z_1 h_{t-1,1} = h."""
    return rf"h_{{t,1}} = (1 - z_1)\,n_1 + z_1\,h_{{t-1,1}} = \mathbf{{{h}}}"


def unshared_rnn() -> str:
    """The article's mistake: a W_t per position, so m (H(H+E) + H) parameters for m steps."""
    return (rf"{vec('h', 't', True)} = \sigma\!\left(W_t[{vec('h', 't-1', True)}; {vec('x', 't', True)}] + "
            rf"{vec('b', 't', True)}\right),\ t = 1..m \;\Rightarrow\; m\,\bigl(H(H+E)+H\bigr)")


def shared_rnn() -> str:
    """Shared parameters: one W and b for every step, H(H+E) + H parameters whatever the length."""
    return rf"W_t = W,\ {vec('b', 't', True)} = {vec('b', None, True)}\ \ \forall t \;\Rightarrow\; H(H+E)+H"


def encoder_summary() -> str:
    """Without attention the decoder sees the input only through the encoder's final state."""
    return rf"{vec('c', None, True)} = {vec('h', 'm', True)} \in \mathbb{{R}}^{{H}}"


# --- the decoder, step by step ---------------------------------------------------------------------

def state_update(t: str | int = "t", attention: bool = True, f: str = "f", y_prev: str | None = None,
                 bold: bool = False) -> str:
    """Step 1: s_t = f(s_{t-1}, [y_{t-1}; c_{t-1}]) (plain decoder: s_t = f(s_{t-1}, y_{t-1})); `y_prev` writes
    the fed token in place of y_{t-1}."""
    p = _prev(t)
    y = y_prev if y_prev is not None else vec("y", p, bold)
    if attention:
        return rf"{vec('s', t, bold)} = {f}\big({vec('s', p, bold)},\,[\,{y};\,{vec('c', p, bold)}\,]\big)"
    return rf"{vec('s', t, bold)} = {f}({vec('s', p, bold)},\,{y})"


def plain_decoder() -> str:
    """The plain encoder–decoder: s_0 = h_m, y_0 = <sos>, s_t = f(s_{t-1}, y_{t-1}), ŷ_t = softmax(U s_t + b_U)."""
    return (rf"{vec('s', 0, True)} = {vec('h', 'm', True)},\qquad y_0 = \langle\mathrm{{sos}}\rangle,\qquad "
            + state_update("t", attention=False, bold=True) + r",\qquad " + output("t", attention=False, bold=True))


def query(t: str | int = "t", bold: bool = False, linear: bool = False) -> str:
    """Step 2: q_t = Query(s_t) (`linear`: and its form W_Q s_t + b_Q)."""
    text = rf"{vec('q', t, bold)} = \mathrm{{Query}}({vec('s', t, bold)})"
    return text + rf" = W_Q\,{vec('s', t, bold)} + b_Q" if linear else text


def key(bold: bool = False, linear: bool = False) -> str:
    """k_i = Key(h_i) (`linear`: W_K h_i, no bias: it would cancel in the softmax)."""
    return rf"{vec('k', 'i', bold)} = " + (rf"W_K\,{vec('h', 'i', bold)}" if linear
                                          else rf"\mathrm{{Key}}({vec('h', 'i', bold)})")


def value(bold: bool = False, linear: bool = False) -> str:
    """v_i = Value(h_i) (`linear`: W_V h_i + b_V)."""
    return rf"{vec('v', 'i', bold)} = " + (rf"W_V\,{vec('h', 'i', bold)} + b_V" if linear
                                          else rf"\mathrm{{Value}}({vec('h', 'i', bold)})")


def score(kind: str = "dot", t: str | int = "t", dim: str | int = "D", bold: bool = False) -> str:
    """Step 3's score e_ti for a score function: dot q·k, scaled dot q·k/√D, additive wᵀ tanh(q + k)."""
    q, k, e = vec("q", t, bold), vec("k", "i", bold), f"e_{{{t}i}}"
    if kind == "scaled_dot":
        return rf"{e} = \frac{{{q}\cdot {k}}}{{\sqrt{{{dim}}}}}"
    if kind == "additive":
        return rf"{e} = {vec('w', None, bold)}^\top \tanh({q} + {k})"
    return rf"{e} = {q}\cdot {k}"


def weights(t: str | int = "t", temperature: float = 1.0) -> str:
    """Step 3's weights α_ti = exp(e_ti / τ) / Σ_j exp(e_tj / τ) (τ written only when it is not 1)."""
    tau = "" if temperature == 1.0 else r"/\tau"
    return rf"\alpha_{{{t}i}} = \frac{{\exp(e_{{{t}i}}{tau})}}{{\sum_j \exp(e_{{{t}j}}{tau})}}"


def weights_vector(t: str | int = "t", bold: bool = False) -> str:
    """α_t = softmax(e_t)."""
    return rf"{vec(ALPHA, t, bold)} = \mathrm{{softmax}}({vec('e', t, bold)})"


def weight_value(t: str | int, i: int, e: str, a: str) -> str:
    """One weight with its numbers: α_ti = e^{e_ti} / Σ_j e^{e_tj} = a."""
    return rf"\alpha_{{{t}{i}}} = e^{{{e}}} / \sum_j e^{{e_{{{t}j}}}} = \mathbf{{{a}}}"


def context(t: str | int = "t", bold: bool = False, expectation: bool = False) -> str:
    """Step 3's context c_t = Σ_i α_ti v_i (`expectation`: = E_{i∼α_t}[v_i], the article's reading)."""
    text = rf"{vec('c', t, bold)} = \textstyle\sum_i \alpha_{{{t}i}}{vec('v', 'i', bold)}" if bold else \
        rf"{vec('c', t)} = \sum_i \alpha_{{{t}i}}\, v_i"
    if expectation:
        text += rf" = \mathbb{{E}}_{{i\sim{vec(ALPHA, t, bold)}}}[{vec('v', 'i', bold)}]"
    return text


def context_terms(terms: list[tuple[float, int]], more: bool) -> str:
    """c_t written out as its largest weighted values: terms (α_ti, i) with i from 1; `more`: + … for the rest."""
    body = " + ".join(rf"{a:.3f}\,{vec('v', i, True)}" for a, i in terms)
    return rf"{vec('c', 't', True)} = {body}" + (r" + \dots" if more else "")


def largest_weight(t: int, i: int, token: str, e: float, a: float, temperature: float = 1.0) -> str:
    """The record with the largest weight at step t, with its score and weight (`token` in LaTeX already)."""
    tau = "" if temperature == 1.0 else rf"\;(\tau = {temperature:g})"
    return (rf"\text{{largest weight: }} i = {i}\ ({token}):\quad e_{{{t},{i}}} = {e:.4f},\quad "
            rf"\alpha_{{{t},{i}}} = {a:.4f}" + tau)


def greedy_choice(t: int, token: str, p: float) -> str:
    """Step 4's greedy choice y_t = argmax_w ŷ_t(w) with its probability (`token` in LaTeX already)."""
    return rf"\begin{{gathered}}y_{{{t}}} = \arg\max_w \hat y_{{{t}}}(w) = {token}\\ p = {p:.4f}\end{{gathered}}"


def forced_choice(t: int, token: str, p: float, why: str) -> str:
    """A token given rather than chosen (teacher-forced or an intervention), with ŷ_t's probability of it."""
    return (rf"\begin{{gathered}}y_{{{t}}} = {token}\quad(\text{{{why}}})\\ "
            rf"\hat y_{{{t}}}({token}) = {p:.4f}\end{{gathered}}")


def aligned(*lines: str) -> str:
    """Equations one under another, aligned at each line's first " = "."""
    return r"\begin{aligned} " + r" \\ ".join(line.replace(" = ", " &= ", 1) for line in lines) + r" \end{aligned}"


def text(token: str) -> str:
    """A token as LaTeX text in quotes (“a”), its special characters escaped and a space shown as ␣."""
    out = []
    for ch in token:
        if ch in "#$%&_{}":
            out.append("\\" + ch)
        elif ch == "\\":
            out.append(r"\textbackslash{}")
        elif ch == "~":
            out.append(r"\textasciitilde{}")
        elif ch == "^":
            out.append(r"\textasciicircum{}")
        elif ch == " ":
            out.append("␣")
        else:
            out.append(ch)
    return r"\text{“" + "".join(out) + r"”}"


def output(t: str | int = "t", attention: bool = True, bold: bool = False) -> str:
    """Step 4: ŷ_t = softmax(U [s_t; c_t] + b_U) (plain decoder: softmax(U s_t + b_U))."""
    y_hat = rf"\hat{{\boldsymbol y}}_{{{t}}}" if bold else rf"\hat y_{{{t}}}"
    inside = rf"U\,[\,{vec('s', t, bold)};\,{vec('c', t, bold)}\,]" if attention else rf"U\,{vec('s', t, bold)}"
    return rf"{y_hat} = \mathrm{{softmax}}\big({inside} + {vec('b', 'U', bold)}\big)"


def four_steps() -> str:
    """The article's four steps at output step t, numbered, in one aligned block (bold vectors)."""
    return (r"\begin{aligned}"
            rf"&1.\ \ {state_update('t', bold=True)},\quad {vec('c', 0, True)} = \boldsymbol 0\\"
            rf"&2.\ \ {query('t', bold=True)},\quad {key(bold=True)},\quad {value(bold=True)}\\"
            rf"&3.\ \ {score('dot', 't', bold=True)},\quad {weights_vector('t', bold=True)},"
            rf"\quad {context('t', bold=True, expectation=True)}\\"
            rf"&4.\ \ {output('t', bold=True)}"
            r"\end{aligned}")


# --- Unicode, for figure titles (Plotly renders no LaTeX) -------------------------------------------

def weights_title(t: int) -> str:
    """α₃ (the weights of step 3)."""
    return f"α{sub(t)}"


def context_title(t: int) -> str:
    """c₃ = Σᵢ α₃ᵢ vᵢ."""
    return f"c{sub(t)} = Σᵢ α{sub(t)}ᵢ vᵢ"


def output_title(t: int) -> str:
    """ŷ₃ (the output distribution of step 3)."""
    return f"ŷ{sub(t)}"


SCORE_TITLES = {"dot": "e = q·k", "scaled_dot": "e = q·k/√D", "additive": "e = wᵀtanh(q+k)"}


def score_title(kind: str) -> str:
    """A score function's formula in Unicode (e = q·k, ...); "" for none."""
    return SCORE_TITLES.get(kind, "")


def temperature_title() -> str:
    """α = softmax(e / τ): the weights under a softmax temperature τ."""
    return "α = softmax(e / τ)"


def query_title(t: int) -> str:
    """q₃."""
    return f"q{sub(t)}"


def state_update_title(t: int, f: str, y_prev: str, attention: bool = True) -> str:
    """s₃ = GRU(s₂, [“a”; c₂]) (plain decoder: s₃ = GRU(s₂, “a”))."""
    p = sub(t - 1)
    return f"s{sub(t)} = {f}(s{p}, [“{y_prev}”; c{p}])" if attention else f"s{sub(t)} = {f}(s{p}, “{y_prev}”)"


def query_line(t: int) -> str:
    """q₃ = W_Q s₃ + b_Q."""
    return f"q{sub(t)} = W_Q s{sub(t)} + b_Q"


def output_line(t: int, attention: bool = True) -> str:
    """ŷ₃ = softmax(U [s₃; c₃] + b_U) (plain decoder: softmax(U s₃ + b_U))."""
    inside = f"U [s{sub(t)}; c{sub(t)}]" if attention else f"U s{sub(t)}"
    return f"ŷ{sub(t)} = softmax({inside} + b_U)"
