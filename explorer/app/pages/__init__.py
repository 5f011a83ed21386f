"""Streamlit pages: UI only (widgets, layout, messages). Tensor math lives in the library modules."""
