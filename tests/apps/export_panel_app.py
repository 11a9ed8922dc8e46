"""A one-panel page for tests/test_app_export.py: ``lab.export_view.export_panel`` for the model whose choice
(a saved folder or "minilm") the test puts in ``st.session_state["export_test_choice"]``."""
import streamlit as st

from lab.export_view import export_panel
from lab.session import ZERO_SHOT, get_model

choice = st.session_state.get("export_test_choice", ZERO_SHOT)
export_panel(choice, get_model(choice)[1])
