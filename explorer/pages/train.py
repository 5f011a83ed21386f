"""The Train page (being built)."""

import streamlit as st


def render() -> None:
    st.title("Train")
    st.info("This page is being built.")
