"""The app's addresses: Explore's, shared by the navigation and every link to it, and how a page writes its
view into the query string (`write_query`).

Explore is the default page, so Streamlit serves it at the app's root; a default page still reserves
a pathname of its own, which no address reaches (Streamlit answers it with a "Page not found"
dialog). So the default page reserves `EXPLORE_PATH`, a name nobody types, and a hidden page at
`/explore`, the name people type and share, sends its visitor to the root with the same query string.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import streamlit as st

EXPLORE_PATH = "explore-root"  # the default page's reserved pathname: links find the page by it
EXPLORE_ALIAS = "explore"  # the address that sends its visitor to the root


def explore_page(render: Callable[[], None]) -> st.Page:
    """The Explore page (the default page, at the root), drawn by `render`: links and switches to it
    find it by its pathname, whatever callable they pass."""
    return st.Page(render, title="Explore", icon=":material/search:", url_path=EXPLORE_PATH, default=True)


def explore_target() -> st.Page:
    """Explore as a link or a switch names it. Streamlit finds the page by its pathname and runs the one the
    app's navigation registered (app.py), so the callable here is never run: helpers below the page link
    to it without importing it (the page imports them)."""
    return explore_page(_registered_by_the_app)


def _registered_by_the_app() -> None:
    """Stands in for Explore's render in links: the navigation's page is the one that runs."""


def explore_alias(explore: st.Page) -> st.Page:
    """The hidden page at `/explore`: it switches to `explore` with the visitor's query string."""
    def to_root() -> None:
        st.switch_page(explore, query_params=st.query_params.to_dict())
    return st.Page(to_root, title="Explore", url_path=EXPLORE_ALIAS, visibility="hidden")


def write_query(want: Mapping[str, str], memory: str, drop: Iterable[str] = ()) -> None:
    """Put `want` into the address and take the `drop` keys it lacks out; `memory` is the session key that
    holds what was sent.

    The browser sends its copy of the address with each run, and after fast presses that copy can predate the
    answer to the previous run: a value is sent when it differs from the copy or from what was last sent, and
    a key taken out since is taken out again, or that late answer would become the address."""
    sent = st.session_state.get(memory) or {}
    for key, value in want.items():
        if st.query_params.get(key) != value or sent.get(key) != value:
            st.query_params[key] = value
    again = False
    for key in drop:
        if key in want:
            continue
        if key in st.query_params:
            del st.query_params[key]
        elif key in sent:
            again = True
    if again and want:  # one more message, without the keys the late answer may bring back
        key, value = next(iter(want.items()))
        st.query_params[key] = value
    st.session_state[memory] = dict(want)
