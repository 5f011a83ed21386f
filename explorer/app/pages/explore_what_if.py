"""The Explore page's "what if": softmax temperature, masked inputs, pinned attention and forced tokens, and
the original and changed decodings side by side."""

from __future__ import annotations

import streamlit as st

from explorer import equations
from explorer.app.figures import attention as fig_attention
from explorer.app.figures import steps as fig_steps
from explorer.app.pages import common
from explorer.app.pages import explore_shared as shared
from explorer.app.pages import explore_state as state
from explorer.app.pages.explore_state import TEMPERATURES, K
from explorer.record import Intervention, Trace, first_difference
from explorer.data.vocab import PAD, SOS
from explorer.app.engine_link import engine_module

views = engine_module("explorer.app.views")


def _add_pin() -> None:
    t, i = int(state.get("pin_step", 1)) - 1, state.get("pin_pos")
    if i is None:
        return
    if int(i) in state.get("masked", []):  # all the weight on an input attention may not see
        state.put("pin_refused", f"x{int(i) + 1} is masked (hidden from attention): unmask it first, or pin "
                                 "another input.")
        return
    pins = [p for p in state.get("pins", []) if p[0] != t]
    state.put("pins", sorted(pins + [(t, int(i))]))


def _add_force() -> None:
    t, token = int(state.get("force_step", 1)) - 1, state.get("force_token")
    if token is None:
        return
    forced = [f for f in state.get("forced", []) if f[0] != t]
    state.put("forced", sorted(forced + [(t, token)]))


def _temperature_demo() -> None:
    """One click to the measured temperature what-if (views.TEMPERATURE_DEMO)."""
    demo = views.TEMPERATURE_DEMO
    state.put("model", demo.model)
    state.put("input", demo.text)
    state.put("mode", "greedy")
    state.put("example", None)
    state.reset_view()
    state.put("temperature", demo.temperature)


def render(bundle, request: views.Request, tr: Trace, original: Trace) -> None:
    st.divider()
    st.subheader(":material/science: What if? Interventions")
    S = len(original.source_tokens)
    steps = max(original.steps, tr.steps)
    labels = [f"x{i + 1} = {t}" for i, t in enumerate(original.source_tokens)]
    attends = original.has_attention
    forcing = request.mode == "greedy"
    cols = st.columns(4, gap="medium")
    with cols[0]:
        st.select_slider("Softmax temperature τ", TEMPERATURES, key=K + "temperature", disabled=not attends,
                         help=f"{equations.temperature_title()}: small τ sharpens attention, large τ flattens it")
    with cols[1]:
        masked = [i for i in state.get("masked", []) if i < S]
        if masked != state.get("masked", []):
            state.put("masked", masked)
        st.multiselect("Mask input positions", list(range(S)), key=K + "masked", disabled=not attends,
                       format_func=lambda i: labels[i], help="Hidden from attention at every step")
    with cols[2]:
        _clamp(K + "pin_step", 1, steps)
        st.number_input("Pin attention at step t", 1, steps, key=K + "pin_step", disabled=not attends)
        st.selectbox("…entirely on input", list(range(S)), key=K + "pin_pos", format_func=lambda i: labels[i],
                     disabled=not attends)
        st.button("Pin", icon=":material/push_pin:", key=K + "pin", on_click=_add_pin, disabled=not attends)
        if state.get("pin_refused"):
            st.warning(state.get("pin_refused"), icon=":material/block:")
            state.put("pin_refused", None)
    with cols[3]:
        vocab = [t for t in bundle.tgt_vocab.tokens if t not in (PAD, SOS)]
        _clamp(K + "force_step", 1, steps)
        st.number_input("Force the token at step t", 1, steps, key=K + "force_step", disabled=not forcing)
        st.selectbox("…to", vocab, key=K + "force_token", disabled=not forcing)
        st.button("Force", icon=":material/front_hand:", key=K + "force", on_click=_add_force, disabled=not forcing,
                  help=None if forcing else "Only in greedy mode (other modes fix the tokens)")
    if not attends:
        st.caption("This model has no attention: only forcing tokens applies.")
    demo = views.TEMPERATURE_DEMO
    showing_demo = (request.model, request.text, request.intervention) == \
        (demo.model, demo.text, Intervention(temperature=demo.temperature))
    if showing_demo:
        st.info(f"**What to look at:** {demo.look_at}", icon=":material/visibility:")
    elif demo.model in common.model_names():
        st.button(f"Example: τ = {demo.temperature:g} on {demo.model}, “{demo.text}”", key=K + "temperature_demo",
                  icon=":material/thermostat:", on_click=_temperature_demo, type="tertiary",
                  help="A temperature that visibly changes a translation (on the toy tasks the scores differ by "
                       "tens, and no temperature changes the output)")
    active = describe(request.intervention)
    if not active:
        st.caption("No intervention: change τ, mask inputs, pin attention or force a token to see the "
                   "decoding change, side by side with the original.")
        return
    top = st.columns([8, 2], vertical_alignment="center")
    top[0].markdown("**Active:** " + " · ".join(active))
    top[1].button("Reset all", icon=":material/restart_alt:", key=K + "reset", on_click=state.clear_interventions,
                  width="stretch")
    diff = first_difference(original.output_tokens, tr.output_tokens)
    left, right = st.container(key=K + "what_if_pair").columns(2, gap="large")  # a what-if link lands here
    own = request.mode != "teacher"  # the outputs are the model's own decodings: they show their copies
    with left:
        st.markdown(f"#### Original: {shared.md(views.output_text(bundle, original, own)) or '∅'}")
        shared.chart(fig_attention.attention_heatmap(original, diff, title="Original α") if attends else
                     fig_steps.output_distribution(original, 0, title="Original ŷ₁"), "original", K + "fig_original")
    with right:
        st.markdown(f"#### Changed: {shared.md(views.output_text(bundle, tr, own)) or '∅'}")
        shared.cut_note(bundle, request, tr, caption=True)
        if request.intervention.masked:
            st.caption("Masked inputs are crossed out in grey: attention could not look at them.")
        shared.chart(fig_attention.attention_heatmap(tr, diff, title="Changed α") if attends else
                     fig_steps.output_distribution(tr, 0, title="Changed ŷ₁"), "changed", K + "fig_changed")
    if diff is None:
        st.success("The output did not change.", icon=":material/check:")
    else:
        st.warning(f"The outputs first differ at step t = {diff + 1} (outlined in red).",
                   icon=":material/compare_arrows:")


def _clamp(key: str, lo: int, hi: int) -> None:
    value = st.session_state.get(key)
    if value is None or not lo <= int(value) <= hi:
        st.session_state[key] = min(max(int(value or lo), lo), hi)


def describe(iv: Intervention) -> list[str]:
    out = []
    if iv.temperature != 1.0:
        out.append(f"temperature τ = {iv.temperature:g}")
    if iv.masked:
        out.append("masked " + ", ".join(f"x{i + 1}" for i in iv.masked))
    out += [f"step {t + 1} pinned to x{i + 1}" for t, i in iv.pins]
    out += [f"step {t + 1} forced to '{tok}'" for t, tok in iv.forced]
    return out
