"""The Explore page's address, shared by the app's navigation and every link to Explore.

Explore is the default page, so Streamlit serves it at the app's root; a default page still reserves
a pathname of its own, which no address reaches (Streamlit answers it with a "Page not found"
dialog). So the default page reserves `EXPLORE_PATH`, a name nobody types, and a hidden page at
`/explore`, the name people type and share, sends its visitor to the root with the same query string.
"""

from __future__ import annotations

from typing import Callable

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
