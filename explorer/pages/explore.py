"""The Explore page (being built)."""

import streamlit as st


def render() -> None:
    st.title("Explore")
    st.info("This page is being built.")
