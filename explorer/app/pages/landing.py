"""Links that land on their figure: a URL with a step, a what-if or a section opens scrolled to the figure it
is about, and an anchor (`#heatmap`, `#lookup`, ...) names the figure outright.

Streamlit scrolls inside its own container and knows nothing of anchors, so a small script (st.html with
JavaScript, run once per page load) finds the named element and scrolls it into view (centred when it fits
under Streamlit's top bar, else its top at the top); it keeps it there
while the charts above it draw (their heights change the layout) and stops at the user's first scroll,
key or click.
"""

from __future__ import annotations

import json

import streamlit as st

# anchor name -> the element it scrolls to (Streamlit gives a keyed element the class st-key-<key>)
# (the first that is on the page: a model without attention has no heatmap, its step panel stands in)
ANCHORS = {
    "step": [".st-key-explore_step_panel"],
    "heatmap": [".st-key-explore_heatmap", ".st-key-explore_step_panel"],
    "lookup": [".st-key-explore_lookup_block", ".st-key-explore_step_panel"],
    "what-if": [".st-key-explore_what_if_pair", ".st-key-explore_what_if"],
    "hidden": [".st-key-explore_hidden"],
    "faithfulness": [".st-key-explore_faith"],
    "curve": [".st-key-compare_fig_curve"],
    "side-by-side": [".st-key-compare_side_by_side"],
    "bottleneck": [".st-key-learn_fig_bottleneck", ".st-key-learn_section_body"],
    "section": [".st-key-learn_section_body"],
}

# Runs in the page itself (not an iframe). ANCHORS and the page's own choice come in as JSON.
_SCRIPT = """
<script>
(() => {
  const anchors = %(anchors)s, fallback = %(fallback)s;
  /* Streamlit rewrites the address (and drops its #anchor) while the page loads; the navigation entry
     keeps the address as it was opened. */
  const opened = new URL((performance.getEntriesByType("navigation")[0] || {}).name || window.location.href);
  const hash = window.location.hash || (opened.pathname === window.location.pathname ? opened.hash : "");
  const wanted = decodeURIComponent(hash.slice(1));
  const selectors = anchors[wanted] || anchors[fallback];
  if (!selectors || window.__explorerLanded === window.location.pathname + wanted + fallback) return;
  window.__explorerLanded = window.location.pathname + wanted + fallback;
  let stopped = false, lastTop = null, still = 0;
  const stop = () => { stopped = true; };
  for (const kind of ["wheel", "touchstart", "keydown", "mousedown"]) {
    window.addEventListener(kind, stop, {once: true, capture: true});
  }
  const started = Date.now();
  const tick = () => {
    if (stopped || Date.now() - started > 20000) return;
    const el = selectors.map(s => document.querySelector(s)).find(e => e);
    if (el) {
      const rect = el.getBoundingClientRect();
      const room = window.innerHeight - 64;  /* under Streamlit's top bar */
      const top = rect.height < room ? Math.max(64, 64 + (room - rect.height) / 2) : 64;
      if (Math.abs(rect.top - top) > 2) {
        el.style.scrollMarginTop = top + "px";
        el.scrollIntoView({block: "start", behavior: "instant"});
      }
      const now = Math.round(el.getBoundingClientRect().top);
      still = now === lastTop ? still + 1 : 0;
      lastTop = now;
      const drawn = !document.querySelector('[data-testid="stSkeleton"]') && Array.from(
        document.querySelectorAll('[data-testid="stPlotlyChart"], [class*="st-key-live_chart_"]'))
        .every(c => c.querySelector('.main-svg'));  /* live charts: pages/live_chart.py */
      if (drawn && still >= 8) { document.body.dataset.explorerLanded = wanted || fallback; return; }
    }
    setTimeout(tick, 150);
  };
  tick();
})();
</script>
"""


def land(fallback: str | None) -> None:
    """Scroll to the figure the address names (its anchor, else `fallback`); once per page load."""
    if fallback is not None and fallback not in ANCHORS:
        raise ValueError(f"unknown anchor {fallback!r}")
    script = _SCRIPT % {"anchors": json.dumps(ANCHORS), "fallback": json.dumps(fallback or "")}
    st.html(script, unsafe_allow_javascript=True)


def once(page: str, fallback: str | None) -> None:
    """`land(fallback)` on this session's first run of a page: later runs (a step, a new input) stay put."""
    flag = f"landing_{page}_done"
    if st.session_state.get(flag):
        return
    st.session_state[flag] = True
    land(fallback)


def explore_fallback(params: dict[str, str], what_if_keys: tuple[str, ...]) -> str | None:
    """What an Explore address is about: its what-if, its open hidden states or faithfulness section, or its
    step's heatmap."""
    if any(key in params for key in what_if_keys):
        return "what-if"
    if params.get("explore_hidden") == "true":
        return "hidden"
    if params.get("explore_faith") == "true":
        return "faithfulness"
    return "heatmap" if "step" in params else None
