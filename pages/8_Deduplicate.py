"""Deduplicate: group the near-duplicate questions of a corpus (the active dataset's, or an uploaded file's)."""
import streamlit as st

from core.inference.dedup import outsized_cluster_note
from core.saving.safe_csv import safe_csv
from lab import cached, dedup_view
from lab.figures import PLOTLY_CONFIG
from lab.session import enter_through_app, model_or_stop, model_picker, show_error
from lab.workspace_state import kept, start_slider_at

enter_through_app(__file__)

state = st.session_state

st.title("Deduplicate a corpus")
st.caption("Every question is encoded once; each question's nearest neighbours come from a FAISS index. "
           "Clusters are formed greedily, the question with the most neighbours above the threshold first: it "
           "becomes the representative, and its neighbours not yet clustered become the members. Every member "
           "is above the threshold to its representative (no chaining through intermediate questions), and a "
           "question belongs to one cluster at most (sentence-transformers' community detection).")

choice = model_picker()
name, texts, key = cached.pick_corpus("dedup")  # never empty: core.data refuses a file without questions

_, config = model_or_stop(choice)
rerankers = dedup_view.cross_encoder_choices()
reranker = rerankers[st.selectbox(
    "Confirm each pair with", list(rerankers), key="dedup_rerank", disabled=len(rerankers) == 1,
    help="A cross-encoder of this workspace (Train → model cross-encoder) reads both questions of each pair above "
         "the threshold and keeps those it calls duplicates at its own threshold: the slider then picks the "
         "candidates, and starts at the model's pair threshold")]
try:
    calibrated = dedup_view.starting_threshold(choice, config, state.pairs, reranked=bool(reranker))
except Exception as error:  # noqa: BLE001
    show_error(f"Could not score the labelled pairs to calibrate the threshold on: {error}")
    st.stop()
start = calibrated.threshold
start_slider_at("dedup_threshold", choice, start)  # a new start (a cross-encoder picked) moves it
# Sent with every run: a slider that was not drawn on the last run (no file uploaded yet) is new to the browser,
# which would otherwise draw it at its minimum while the clusters below are computed at this value.
state["dedup_threshold"] = state["dedup_threshold"]
low, high = dedup_view.slider_range(start)
threshold_column, size_column = st.columns([3, 1])
threshold = threshold_column.slider(
    "Threshold (cosine to the representative, strictly above)", min_value=low, max_value=high, step=0.005,
    format="%.3f", **kept("dedup_threshold"),
    help="Starts at the model's clustering threshold, set for a high precision (the caption says where it comes "
         "from): a higher threshold gives tighter clusters, a lower one lets unrelated questions share one")
threshold_column.caption(f"Starts at {start:.3f}: {calibrated.source}.")
min_size = size_column.number_input("Smallest cluster", min_value=2, max_value=1000, step=1,
                                    **kept("dedup_min_size"), persist_state="session")

graph = cached.encode_with_progress(lambda progress: dedup_view.neighbour_graph(choice, key, texts, progress=progress))
frame, capped = dedup_view.clusters(choice, cached.model_stamp(choice), key, float(threshold), int(min_size),
                                   graph, texts)
if reranker:
    candidates = dedup_view.candidate_count(graph, float(threshold))
    if candidates > dedup_view.RERANK_CAP:
        show_error(f"{candidates:,} pairs are above the threshold; the page confirms at most "
                   f"{dedup_view.RERANK_CAP:,} with a cross-encoder. Raise the threshold, or run "
                   "`python -m core dedup --rerank MODEL` on the whole corpus.")
        st.stop()
    try:
        frame, rerank_note = dedup_view.reranked_clusters(
            choice, cached.model_stamp(choice), reranker, cached.model_stamp(reranker), key, float(threshold),
            int(min_size), graph, texts)
    except Exception as error:  # noqa: BLE001 - a cross-encoder that cannot load or score is shown, not raised
        show_error(f"Could not confirm the pairs with the cross-encoder: {error}")
        st.stop()
    st.caption(rerank_note)
table = dedup_view.cluster_table(frame)

search = "exact search (FAISS flat)" if graph.kind == "flat" else "approximate search (FAISS HNSW)"
st.caption(f"{len(texts):,} questions of {name}; neighbours by {search}, {graph.k} per question at first "
           "(more where they are all above the threshold).")
st.caption(dedup_view.engine_caption())
questions_metric, clusters_metric, clustered_metric = st.columns(3)
questions_metric.metric("Questions", f"{len(texts):,}")
clusters_metric.metric("Clusters", f"{len(table):,}")
clustered_metric.metric("Questions in a cluster", f"{len(frame):,}")
for note in (capped, outsized_cluster_note(int(table["size"].max()) if len(table) else 0, len(texts), float(threshold))):
    if note:
        st.warning(note, icon=":material/warning:")
if table.empty:
    st.info("No cluster at this threshold: lower it, or lower the smallest cluster size.")
    st.stop()

st.download_button("Download the clusters (CSV)", lambda: safe_csv(frame), file_name="clusters.csv",
                   mime="text/csv", key="dedup_download", icon=":material/download:", on_click="ignore")
table_column, chart_column = st.columns([3, 2])
with table_column:
    st.dataframe(table, hide_index=True, key="dedup_clusters", height=320,
                 column_config={"cluster": st.column_config.NumberColumn(width="small"),
                                "size": st.column_config.NumberColumn(width="small"),
                                "representative": st.column_config.TextColumn(width="large")})
with chart_column:
    st.plotly_chart(dedup_view.size_histogram(frame), width="stretch", key="dedup_sizes", config=PLOTLY_CONFIG)
st.subheader(f"The {min(len(table), dedup_view.TOP_CLUSTERS)} largest clusters")
dedup_view.show_top_clusters(frame)
