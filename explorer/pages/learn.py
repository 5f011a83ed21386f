"""The Learn page (being built)."""

import streamlit as st


def render() -> None:
    st.title("Learn")
    st.info("This page is being built.")
