"""Data: choose the active dataset (bundled sample or an upload) and see its counts, lengths and dropped rows."""
import pandas as pd
import streamlit as st

from core.data import dataset_summary, training_problems
from lab import data_view, figures
from lab.session import SAMPLE_NAME, enter_through_app, renewed_key, show_error

enter_through_app(__file__)

PREVIEW_ROWS = 200
state = st.session_state


@st.cache_data(show_spinner=False, max_entries=4)
def summary_of(pairs: pd.DataFrame) -> tuple:
    return dataset_summary(pairs), figures.length_histogram(pairs)


st.title("Data")
st.write("Question pairs in the Quora format: `question1`, `question2`, `is_duplicate` (0/1). "
         "The active dataset is used by every page; the bundled sample is active until you upload a file.")

upload_column, sample_column = st.columns([3, 1], vertical_alignment="center")
with upload_column:
    uploaded = st.file_uploader("Upload question pairs (CSV or TSV, plain or gzip)", type=["csv", "tsv", "txt", "gz"],
                                key=renewed_key("upload"), on_change=data_view.apply_upload)
    st.caption(f"Upload limit: {st.get_option('server.maxUploadSize')} MB per file (a .gz file: that much once "
               "decompressed). Column aliases such as "
               "`q1`/`q2`/`label` or `sentence1`/`sentence2`/`labels` are recognised (for other names you pick the "
               "columns, for labels other than 0/1 what they mean); the delimiter, the text encoding and a file "
               "without a header row are detected.")
with sample_column:
    st.button("Use the bundled sample", key="use_sample", on_click=data_view.use_sample,
              disabled=state.data_name == SAMPLE_NAME,
              help="479 question pairs written for this project (assets/sample_pairs.csv)")

failure = state.get("data_upload_error")
if failure and (failure[0] is None or uploaded is not None and failure[0] == uploaded.file_id):  # None: the kept one
    show_error(failure[1])
if uploaded is not None:
    data_view.picker(uploaded.file_id)
data_view.held_out_files()

pairs, report = state.pairs, state.data_report
summary, histogram = summary_of(pairs)

st.subheader(f"Active dataset: {state.data_name}")
for warning in report.warnings:
    st.warning(f"{report.source}: {data_view.in_page_words(report, warning)}")
for problem in training_problems(summary):  # too small or one class: said now, not when training fails
    st.warning(f"Not enough to train on: {problem.message}.")
pairs_metric, duplicates_metric, unique_metric = st.columns(3)
pairs_metric.metric("Pairs", f"{summary['pairs']:,}")
duplicates_metric.metric("Duplicates", f"{summary['duplicate_rate']:.1%}",
                         help=f"{summary['duplicates']:,} of the pairs are labelled duplicates")
unique_metric.metric("Unique questions", f"{summary['unique_questions']:,}",
                     help="Distinct question texts across both columns (case and spacing ignored)")

preview_column, chart_column = st.columns([3, 2])
with preview_column:
    st.dataframe(pairs.head(PREVIEW_ROWS), width="stretch", height=380, column_config={
        "question1": st.column_config.TextColumn(width="medium"), "question2": st.column_config.TextColumn(width="medium"),
        "is_duplicate": st.column_config.NumberColumn("is_duplicate", width="small")})
    st.caption(f"The first {min(PREVIEW_ROWS, len(pairs)):,} of {len(pairs):,} pairs.")
with chart_column:
    st.plotly_chart(histogram, width="stretch")

st.subheader("Rows dropped while loading")
st.caption(f"{report.source}: {report.summary()}. Delimiter {report.delimiter!r}, encoding {report.encoding}, columns "
           + ", ".join(f"{role} ← `{column}`" for role, column in report.columns.items())
           + ("; no header row: its first row is data, its columns named " + ", ".join(report.names) if report.names
              else "") + ".")
if report.dropped:
    reasons_column, examples_column = st.columns(2)
    with reasons_column:
        st.table(pd.DataFrame({"reason": list(report.dropped), "rows": list(report.dropped.values())}))
    with examples_column:
        st.dataframe(pd.DataFrame(report.examples, columns=["line", "reason"]), hide_index=True, width="stretch")
        first = "the first row" if report.names else "the header"
        st.caption(f"The first {len(report.examples)} dropped rows, by line number in the file ({first} is line 1).")
else:
    st.success("No row was dropped.")
