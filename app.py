"""Attention Explorer: page navigation only. Run with `streamlit run app.py`."""

import streamlit as st

from explorer.pages import compare, explore, learn, train

st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")

navigation = st.navigation([
    st.Page(explore.render, title="Explore", icon="🔍", url_path="explore", default=True),
    st.Page(train.render, title="Train", icon="🏋️", url_path="train"),
    st.Page(compare.render, title="Compare", icon="⚖️", url_path="compare"),
    st.Page(learn.render, title="Learn", icon="📖", url_path="learn"),
])
navigation.run()
