"""Compare: every saved model in the models folder with its validation metrics, as a table, a chart and a CSV."""
import streamlit as st

from lab.session import setup_page

setup_page("Compare")

from core.export import METRIC_COLUMNS, runs_table, safe_csv  # noqa: E402
from core.models import MODEL_LABELS  # noqa: E402
from core.saving import list_runs  # noqa: E402
from lab import charts  # noqa: E402

state = st.session_state

st.title("Compare models")
st.caption(f"Models folder: `{state.runs_root}` (change it on the Train page). Each model is measured on its own "
           "validation split, at the threshold that maximised accuracy there; compare models trained on the same data.")

runs, problems = list_runs(state.runs_root)
if not runs:
    st.info(f"No trained model in `{state.runs_root}` yet: train one on the Train page and it appears here.")
    st.page_link("pages/2_Train.py", label="Go to the Train page", icon=":material/model_training:")
else:
    table = runs_table(runs, MODEL_LABELS)
    number_formats = {column: st.column_config.NumberColumn(format="%.3f") for column in METRIC_COLUMNS.values()}
    number_formats["epochs run"] = st.column_config.NumberColumn(format="%d")
    number_formats["training time (s)"] = st.column_config.NumberColumn(format="%.1f")
    number_formats["pairs/s"] = st.column_config.NumberColumn(format="%.0f")
    st.dataframe(table, hide_index=True, width="stretch", column_config=number_formats)
    st.download_button("Download the table (CSV)", safe_csv(table), file_name="siamese_lab_models.csv",
                       mime="text/csv", key="download_csv", icon=":material/download:")
    st.plotly_chart(charts.compare_bars(table), width="stretch", key="compare_bars")
for problem in problems:
    st.warning(f"Not loaded: {problem}")
