"""The Explore page's step panel: the article's four steps at the current decoder step, with their equations
(explorer/equations.py) and the real numbers, the attention heatmap, and the hidden states.

A fragment: changing the step reruns only it, and the trace comes from the cache.
"""

from __future__ import annotations

import time

import streamlit as st

from explorer import equations
from explorer.app.figures import attention as fig_attention
from explorer.app.figures.lookup_table import lookup_html
from explorer.app.figures import steps as fig_steps
from explorer.app.figures import vectors as fig_vectors
from explorer.app.pages import explore_shared as shared
from explorer.app.pages import faithfulness_panel
from explorer.app.pages import explore_state as state
from explorer.app.pages import presenter
from explorer.app.pages.explore_state import K
from explorer.record import Trace
from explorer.app.engine_link import engine_module

views = engine_module("explorer.app.views")

PLAY_SECONDS = 1.2

# What the query–key picture means under each score function (the picture is the same PCA plane; how a
# position and a query make a score is not).
QK_SPACE_NOTES = {
    "dot": "Queries and keys live in one space. With **dot-product** scores "
           f"({equations.score_title('dot')}) a key gets weight when it lies in the direction the query (red arrow) "
           "points to, and the longer both are, the sharper the choice. ",
    "scaled_dot": "Queries and keys live in one space. With **scaled dot-product** scores "
                  f"({equations.score_title('scaled_dot')}) a key gets "
                  "weight when it lies in the direction the query (red arrow) points to; dividing by √D keeps the "
                  "scores of long vectors from making the softmax pick one key outright. ",
    "additive": f"With **additive** scores ({equations.score_title('additive')}) a key is not compared with the "
                "query by direction: "
                "the model adds the two, squashes each component with tanh and weighs the result with its learnt "
                "vector w. Keys near the query's arrow need not win; the score is read along w, which this plane "
                "does not show, so trust the lookup table's e for the ranking. ",
}
QK_SPACE_COMMON = ("Marker size and colour: αₜᵢ at this step; grey: the other steps' queries. The plane goes through "
                   "the origin and keeps the two directions of largest spread of all kᵢ and qₜ (PCA): a sketch, the "
                   "exact scores are in the lookup table.")


def render(request: views.Request, cell: str, attn_dim: int) -> None:
    """Everything that depends on the current step; reruns alone when the step changes."""
    shared.guarded(_draw, request, cell, attn_dim)


def _draw(request: views.Request, cell: str, attn_dim: int) -> None:
    started = time.perf_counter()
    shared.begin_steps()
    tr = shared.trace_for(request)  # a cache hit: the step never recomputes the trace
    T = tr.steps
    cell_click = state.heatmap_click()
    if cell_click is not None and cell_click != state.get("last_click"):  # a click AppTest made (no callback)
        state.put("last_click", cell_click)
        state.put("step", cell_click[0] + 1)
    if state.get("playing"):  # one tick of the fragment's timer
        if int(state.get("step", 1)) >= T:
            state.put("playing", False)
            st.rerun()  # a full run drops the fragment's timer
        state.put("step", int(state.get("step", 1)) + 1)
    state.put("step", min(max(int(state.get("step", 1)), 1), T))
    t = int(state.get("step"))

    with st.container(key=K + "step_panel"):  # a link with a step lands here (pages/landing.py)
        st.subheader("Step through decoding")
        _step_bar(t, T)
        step = t - 1
        facts = views.step_summary(tr, step)
        # its own row, never beside the controls: at 1024 px the chosen token wrapped onto a line alone
        previous, chosen = shared.tok(facts["previous"]), shared.tok(facts["chosen"])
        st.markdown(f"#### t = {step + 1} of {T}: **{previous}** → **{chosen}**")
        state.sync_url(request, step + 1)

        wide = tr.has_attention and len(tr.source_tokens) > 14  # a long input gets the full width
        if wide:
            where, right = st.container(), None
            first, second = st.columns(2, gap="large")
        else:
            where, right = st.columns([6, 5], gap="large")
            first = second = right
    with where:
        if tr.has_attention:
            st.markdown("**Attention αₜᵢ**: rows are output steps yₜ, columns input tokens xᵢ. "
                        "Click a cell to go to its step.")
            shared.step_chart(lambda s: fig_attention.attention_heatmap(tr, s), lambda s: "attention-heatmap",
                              K + "heatmap", request, step, on_select=state.on_heatmap_click)
            if tr.alignment is not None:
                st.caption("Green rings: the true alignment of the task. Red box: the current step.")
            if tr.has_pieces:
                _words_view(request, tr)
        else:
            st.markdown("**Decoder states sₜ** (no attention in this model)")
            shared.step_chart(lambda s: fig_vectors.decoder_states_heatmap(tr, s, title=None),
                              lambda s: "decoder-states-panel", K + "states_left", request, step)
    with first:
        _step_one(request, tr, step, cell)
    with second:
        _step_two(request, tr, step)
    _step_three(tr, step, request, attn_dim)
    _step_four(tr, step, request)
    _hidden_tabs(request, tr, step)
    shared.guarded(faithfulness_panel.render, request, step)
    panel_ms = (time.perf_counter() - started) * 1000
    state.put("panel_ms", panel_ms)
    st.container(key=K + "panel_timing").caption(
        f"Step panel drawn in {shared.format_seconds(panel_ms)} · decoding "
        f"{shared.format_seconds(state.get('compute_ms', 0.0))} (once per input, then cached)",
        help="Server-side timings: changing the step reruns only this panel and never re-decodes")
    shared.stepper(request, step, T, state.on_browser_step)


def _step_bar(t: int, T: int) -> None:
    """First, previous, play/pause, next, last and the step slider (presenter mode: Home, ←, space, →, End).

    In presenter mode each button also shows its key, so the slider gets a row of its own: beside it, at
    1024 px, the keys squeezed "Play" to "P" and the first/last icons to nothing."""
    if presenter.on():
        bar = st.columns([1.3, 2.2, 2.2, 2.2, 1.3], vertical_alignment="center") + [st.container()]
    else:
        bar = st.columns([1.3, 2.2, 2.2, 2.2, 1.3, 6], vertical_alignment="center")
    bar[0].button(":material/first_page:", key=K + "first", shortcut=presenter.shortcut("first"), on_click=state.step_by, args=(1 - t, T), disabled=t <= 1,
                  width="stretch", help="First step (Home in presenter mode)")
    bar[1].button("Prev", icon=":material/skip_previous:", key=K + "prev", shortcut=presenter.shortcut("prev"), on_click=state.step_by, args=(-1, T),
                  disabled=t <= 1, width="stretch", help="Previous step (← in presenter mode)")
    # One button for Space, doing what it said when pressed: while a run moves an element, the browser shows
    # its old copy beside the new until the run ends, and a Play beside a Pause took one Space as both.
    playing = bool(state.get("playing"))
    if bar[2].button("Pause" if playing else "Play", icon=":material/pause:" if playing else ":material/play_arrow:",
                     key=K + "play", shortcut=presenter.shortcut("play"), on_click=state.set_playing,
                     args=(not playing, T), width="stretch", disabled=T <= 1 and not playing,
                     help="Space in presenter mode" if playing else
                     f"Advance one step every {PLAY_SECONDS:g} s (space in presenter mode)"):
        st.rerun()  # a full run starts or drops the fragment's timer
    bar[3].button("Next", icon=":material/skip_next:", icon_position="right", key=K + "next", shortcut=presenter.shortcut("next"), on_click=state.step_by,
                  args=(1, T), disabled=t >= T, width="stretch", help="Next step (→ in presenter mode)")
    bar[4].button(":material/last_page:", key=K + "last", shortcut=presenter.shortcut("last"), on_click=state.step_by, args=(T - t, T), disabled=t >= T,
                  width="stretch", help="Last step (End in presenter mode)")
    if T > 1:
        version = int(state.get("slider_version", 0))
        if state.get(f"t{version}") != t:  # the step moved without the slider: a fresh slider showing it
            version += 1
            state.put("slider_version", version)
            state.put(f"t{version}", t)
        bar[5].slider("Step t", 1, T, key=f"{K}t{version}", on_change=state.on_slider, args=(version,),
                      disabled=bool(state.get("playing")))
    else:
        bar[5].markdown("Step **t = 1** (the only step)")


def _words_view(request: views.Request, tr: Trace) -> None:
    """For subword models: the same α regrouped into words, in a section that opens."""
    st.caption("Tokens are the model's subword pieces; ▁ marks a piece that begins a word.")
    with st.expander("Words view: which word looked at which", expanded=False):
        st.caption(fig_attention.WORDS_NOTE)
        shared.chart(lambda: fig_attention.word_attention_heatmap(tr), "word-attention", K + "words",
                     cache=(request, None))


def _step_one(request: views.Request, tr: Trace, step: int, cell: str) -> None:
    t = step + 1
    f = equations.CELL_NAMES.get(cell, "f")
    st.markdown("##### ① Update the decoder state")
    y_prev = equations.text(tr.previous_tokens[step])
    st.latex(equations.aligned(equations.state_update("t", tr.has_attention),
                               equations.state_update(t, tr.has_attention, f=f, y_prev=y_prev)))
    notes = []
    if step == 0:
        notes.append("s₀ comes from the encoder's final state")
        if tr.has_attention:
            notes.append("c₀ = 0")
    st.caption("; ".join(notes) + ("." if notes else "") + " Hover a cell for its exact value.")
    shared.step_chart(lambda s: fig_vectors.state_update_figure(tr, s), lambda s: f"step{s + 1}-state-update",
                      K + "fig_state", request, step)


def _step_two(request: views.Request, tr: Trace, step: int) -> None:
    if not tr.has_attention:
        return
    t = step + 1
    st.markdown("##### ② Ask a question: the query")
    st.latex(equations.aligned(equations.query(t, linear=True),
                               equations.key(linear=True) + r", \quad " + equations.value(linear=True)))
    shared.step_chart(lambda s: fig_vectors.query_figure(tr, s), lambda s: f"step{s + 1}-query", K + "fig_query",
                      request, step)


def _step_three(tr: Trace, step: int, request: views.Request, attn_dim: int) -> None:
    if not tr.has_attention:
        return
    t = step + 1
    iv = request.intervention
    facts = views.step_summary(tr, step)
    st.markdown("##### ③ Look it up: scores, weights and the context (a soft database lookup)")
    eq = st.columns(3)
    eq[0].latex(equations.score(tr.attention, t, attn_dim))
    eq[1].latex(equations.weights(t, iv.temperature))
    eq[2].latex(equations.context(t))
    st.latex(equations.largest_weight(t, int(facts["argmax"]) + 1, equations.text(facts["argmax_token"]),
                                      facts["argmax_score"], facts["argmax_weight"], iv.temperature))
    notes = []
    if any(p[0] == step for p in iv.pins):
        pos = dict(iv.pins)[step]
        notes.append(f"attention at this step is **pinned** to x{pos + 1} by an intervention")
    if iv.masked:
        notes.append("masked inputs (hidden from attention): " + ", ".join(f"x{i + 1}" for i in iv.masked))
    if notes:
        st.info("; ".join(notes), icon=":material/science:")
    # The table has the full width (beside the weights chart its last column was cut at 1024 px).
    with st.container(key=K + "lookup_block"):
        peak_k = float(abs(tr.keys).max()) if tr.keys.size else 1.0
        peak_v = float(abs(tr.values).max()) if tr.values.size else 1.0
        st.html(lookup_html(views.lookup_table(tr, step), t, peak_k, peak_v))
        st.caption("One record per input position: the query is matched against every key kᵢ, the "
                   "weights αₜᵢ pick how much of each value vᵢ goes into cₜ. Exact vectors: the K, V, Q tab.")
    cols = st.columns([2, 3], gap="large")
    with cols[0]:
        shared.step_chart(lambda s: fig_attention.weights_bar(tr, s, title=f"{equations.weights_title(s + 1)} over "
                                                                          "the inputs"),
                          lambda s: f"step{s + 1}-weights", K + "fig_weights", request, step)
    with cols[1]:
        # the title alone (the rest in a caption): at 1024 px a longer title was cut
        shared.step_chart(lambda s: fig_attention.context_sum(tr, s, title=equations.context_title(s + 1)),
                          lambda s: f"step{s + 1}-context", K + "fig_context", request, step)
        st.caption("Each row a weighted value αₜᵢ·vᵢ, the last row their sum cₜ.")


def _step_four(tr: Trace, step: int, request: views.Request) -> None:
    t = step + 1
    facts = views.step_summary(tr, step)
    st.markdown("##### ④ Predict the next token")
    cols = st.columns([5, 6], gap="large")
    with cols[0]:
        st.latex(equations.output(t, tr.has_attention))
        chosen = equations.text(str(facts["chosen"]))
        best_token, best_p = tr.top_k(step, 1)[0]
        forced_here = any(f[0] == step for f in request.intervention.forced) and not tr.teacher_forced
        if tr.teacher_forced or forced_here:
            why = "teacher-forced" if tr.teacher_forced else "forced by an intervention"
            st.latex(equations.forced_choice(t, chosen, facts["p"], why))
            if best_token != facts["chosen"]:
                st.caption(f"The model's own choice here would be **{shared.tok(best_token)}** (p = {best_p:.4f}).")
        else:
            st.latex(equations.greedy_choice(t, chosen, facts["p"]))
        if facts["chosen"] == "<eos>":
            st.caption("<eos>: the model ends its output here.")
    with cols[1]:
        shared.step_chart(lambda s: fig_steps.output_distribution(
                              tr, s, k=8, title=f"{equations.output_title(s + 1)}: the 8 most probable tokens"),
                          lambda s: f"step{s + 1}-output", K + "fig_output", request, step)


def _hidden_tabs(request: views.Request, tr: Trace, step: int) -> None:
    names = ["Hidden states hᵢ, sₜ"] + (["Query–key space", "K, V, Q"] if tr.has_attention else [])
    # Closed until opened, and drawn only when open: its two charts were a quarter of the browser's work on
    # the first view (cold start 6.8 -> 6.4 s, measured). Open or closed is in the URL (explore_hidden=true),
    # so a shared link opens it too.
    section = st.expander("Hidden states and projections: " + ", ".join(names), icon=":material/grid_on:",
                          key=f"{K}hidden", on_change="rerun", bind="query-params")
    if section.open is False:
        return
    with section:
        _hidden_tab_charts(request, tr, step, names)


def _hidden_tab_charts(request: views.Request, tr: Trace, step: int, names: list[str]) -> None:
    # Tabs that know which one is open, so only its charts are drawn: fewer charts per step change.
    tabs = st.tabs(names, key=f"{K}tabs{len(names)}", on_change="rerun")
    shown = [tab.open is not False for tab in tabs]  # None (not tracked, e.g. in tests): draw them all
    if shown[0]:
        with tabs[0]:
            cols = st.columns(2, gap="large")
            with cols[0]:
                shared.chart(lambda: fig_vectors.encoder_states_heatmap(tr), "encoder-states", K + "fig_h",
                             cache=(request, None))
            with cols[1]:
                shared.step_chart(lambda s: fig_vectors.decoder_states_heatmap(tr, s), lambda s: "decoder-states",
                                  K + "fig_s", request, step)
    if not tr.has_attention:
        return
    if shown[1]:
        with tabs[1]:
            cols = st.columns([3, 2], gap="large")
            with cols[0]:
                shared.step_chart(lambda s: fig_vectors.query_key_space(
                                      tr, s, title=f"{equations.query_title(s + 1)} among the keys (PCA of kᵢ and qₜ)"),
                                  lambda s: f"step{s + 1}-query-key-space", K + "fig_qk", request, step)
            cols[1].markdown(QK_SPACE_NOTES.get(tr.attention, QK_SPACE_NOTES["dot"]) + QK_SPACE_COMMON)
    if shown[2]:
        with tabs[2]:
            cols = st.columns(3, gap="medium")
            with cols[0]:
                shared.chart(lambda: fig_vectors.keys_heatmap(tr), "keys", K + "fig_k", cache=(request, None))
            with cols[1]:
                shared.chart(lambda: fig_vectors.values_heatmap(tr), "values", K + "fig_v", cache=(request, None))
            with cols[2]:
                shared.step_chart(lambda s: fig_vectors.queries_heatmap(tr, s), lambda s: "queries", K + "fig_q",
                                  request, step)
