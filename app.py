"""Attention Explorer: page navigation only. Run with `streamlit run app.py`."""

import os

# One torch thread per process: the app's matrices are small, and on a shared 2-core machine two
# spin-waiting OpenMP threads made every trace and curve 15-20x slower (measured). Read when torch
# is first imported, which the pages do lazily.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import streamlit as st  # noqa: E402

from explorer.pages import compare, explore, learn, train  # noqa: E402

st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")

navigation = st.navigation([
    st.Page(explore.render, title="Explore", icon="🔍", url_path="explore", default=True),
    st.Page(train.render, title="Train", icon="🏋️", url_path="train"),
    st.Page(compare.render, title="Compare", icon="⚖️", url_path="compare"),
    st.Page(learn.render, title="Learn", icon="📖", url_path="learn"),
])
navigation.run()
