"""The Streamlit app: pages, pure Plotly figures, the views they read, lessons and the server launcher."""
