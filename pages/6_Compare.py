"""Compare: every saved model, zero-shot MiniLM and a TF-IDF baseline, scored on the same pairs of the
active dataset, as a sortable table, a chart and a CSV; each model's training details on demand."""
import streamlit as st

from core.inference.honest_pairs import (
    COMPARE_COLUMNS, METRICS, ROC_AUC_INTERVAL, TFIDF_FIT, VERSUS_ZERO_SHOT, comparison_table, sort_table,
)
from core.models import MODEL_LABELS
from core.saving import list_runs
from core.saving.safe_csv import safe_csv
from lab.runs_table import NUMBER_FORMATS, runs_table
from lab import cached, compare_view, workspace_state
from lab.figures import PLOTLY_CONFIG
from lab.navigation import TRAIN
from lab.session import enter_through_app, warn_not_models

enter_through_app(__file__)

state = st.session_state
SORT_CHOICES = [*METRICS.values(), "threshold", "model"]
SHOWN_COLUMNS = ["model", "kind", *METRICS.values(), ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT, "threshold"]

st.title("Compare models")
st.caption("Every saved model of the models folder, beside two references that need no training (zero-shot "
           "MiniLM and the TF-IDF cosine of the two questions), scored on **one common set of pairs that none of "
           "the compared models trained on**: the test file when one is loaded on the Data page, else the "
           "validation file, else the pairs of the active dataset that every compared model held out (matched "
           "by their questions, in either order).")

runs, problems = list_runs(state.runs_root)
if not runs:
    st.info("No trained model in this workspace yet: train one on the Train page to see it beside the "
            "two references below.")
    workspace_state.page_link(TRAIN, label="Go to the Train page")
names = [run["name"] for run in runs]
picked = st.multiselect("Saved models to compare", names, default=names, key="compare_models",
                        help="Each model trained on the active dataset limits the common pairs to the pairs its "
                             "training held out; leave one out to compare the others on more pairs.")
chosen = [run for run in runs if run["name"] in picked]

pairs = state.pairs
key = cached.active_data_key(pairs)
with st.spinner("Finding the pairs no compared model trained on…"):
    common = compare_view.common(key, chosen, pairs)
if common.pairs.empty:  # no figure rather than one measured on training pairs
    st.warning(f"Nothing is scored: {common.description}.")
    st.stop()
st.markdown(f"**Scored on {common.description}.**")
if common.pairs["is_duplicate"].nunique() < 2:
    st.warning("These pairs hold only one class: ROC AUC and average precision are undefined (blank).")

bar = st.progress(0.0, text="Scoring the models on the common pairs (once per model and dataset)…")
rows, failures = compare_view.score_rows(chosen, common, bar=bar)
bar.empty()
table = comparison_table(rows)

sort_column, order_column, _ = st.columns([2, 1, 3], vertical_alignment="bottom")
sort_by = sort_column.selectbox("Sort by", SORT_CHOICES, index=0, key="compare_sort")
ascending = order_column.toggle("Ascending", value=False, key="compare_ascending")
shown = sort_table(table, sort_by, ascending)

number = st.column_config.NumberColumn
# Where each threshold comes from is in the caption and the CSV; the model column stays pinned when the rest scrolls.
st.dataframe(shown, hide_index=True, width="stretch", key="compare_table", column_order=SHOWN_COLUMNS,
             column_config={
                 "model": st.column_config.TextColumn(width=300, pinned=True),
                 "kind": st.column_config.TextColumn(width=180),
                 ROC_AUC_INTERVAL: st.column_config.TextColumn(width=110, help="95 % bootstrap interval over these "
                                                                                "pairs: a narrower one needs more"),
                 VERSUS_ZERO_SHOT: st.column_config.TextColumn(width=300, help="Paired bootstrap on these same pairs: "
                                                                                "the ROC AUC difference, then its 95 % "
                                                                                "interval; better only when the whole "
                                                                                "interval is above zero"),
                 **{column: number(format="%.3f", width=95) for column in METRICS.values()},
                 "threshold": number(format="%.3f", width=80, help="Accuracy and F1 are measured at this threshold "
                                                                    "(duplicate when the score is above it)."),
             })
st.caption(f"{len(common.pairs):,} pairs ({common.duplicates:,} duplicates): {common.description}. "
           f"{compare_view.thresholds_note(table)} TF-IDF is fitted on {TFIDF_FIT}.")
st.download_button("Download the table (CSV)", safe_csv(shown[COMPARE_COLUMNS]), file_name="siamese_lab_comparison.csv",
                   mime="text/csv", key="download_csv", icon=":material/download:")
st.download_button(f"Download the {len(common.pairs):,} pairs scored (CSV)", safe_csv(common.pairs),
                   file_name="siamese_lab_compared_pairs.csv", mime="text/csv", key="download_pairs",
                   icon=":material/download:", help="The pairs every row above was measured on: check them against "
                                                    "your training data.")
st.plotly_chart(compare_view.metric_bars(shown, common.label), width="stretch", key="compare_bars",
                config=PLOTLY_CONFIG)

if chosen:
    with st.expander("Training details of the saved models (each on its own validation split)"):
        details = runs_table(chosen, MODEL_LABELS)
        st.dataframe(details, hide_index=True, width="stretch", key="details_table",
                     column_config={column: number(format=shown) for column, shown in NUMBER_FORMATS.items()})
        st.caption("These validation metrics were measured at training time, each model on its own validation "
                   "split (possibly of another dataset): they are not comparable across models. The table above is.")
        st.download_button("Download the training details (CSV)", safe_csv(details), key="download_details",
                           file_name="siamese_lab_models.csv", mime="text/csv", icon=":material/download:")
for message in failures:
    st.warning(message)
warn_not_models(problems)
