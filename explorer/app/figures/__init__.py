"""Figures: pure functions from traces (and training records) to Plotly figures. No streamlit, no model."""
