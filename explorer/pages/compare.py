"""The Compare page (being built)."""

import streamlit as st


def render() -> None:
    st.title("Compare")
    st.info("This page is being built.")
