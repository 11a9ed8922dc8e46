"""The Deduplicate page's caches, tables and figure: the k-NN graph is built once per model and questions
(``lab.cached.built_once``), so a threshold move only clusters it again."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.inference import dedup, dedup_graph, search
from core.inference.calibration import Calibrated, can_calibrate, clustering_threshold, pair_threshold
from lab import cached
from lab.session import get_model, model_choices

NO_RERANK = "none: the bi-encoder's threshold decides"
RERANK_CAP = 5_000  # candidate pairs the page has a cross-encoder read; more is `python -m core dedup --rerank`'s work

TOP_CLUSTERS = 10  # clusters shown one by one (expanders); the table and the CSV hold them all
SIMILARITY_FORMAT = {"similarity_to_representative": st.column_config.NumberColumn("similarity", format="%.4f")}


def starting_threshold(choice: str, config: dict, pairs: pd.DataFrame | None, reranked: bool = False) -> Calibrated:
    """The slider's start: the model's ``clustering_threshold``, or with a cross-encoder confirming (``reranked``) its
    ``pair_threshold``, as ``dedup --rerank`` does; zero-shot MiniLM's calibrated on the labelled pairs the Verdict
    page calibrates it on (``lab.cached.held_out_scores`` without the test file)."""
    rule = pair_threshold if reranked else clustering_threshold
    if (config.get("zero_shot") and pairs is not None and "is_duplicate" in pairs
            and can_calibrate(pairs["is_duplicate"])):
        measured = cached.held_out_scores(choice, pairs, test=False)
        return rule(config, measured.labels, measured.scores)
    return rule(config)


def neighbour_graph(choice: str, key: str, texts: Sequence[str],
                    progress: Callable[[int, int], None] | None = None) -> dedup_graph.NeighbourGraph:
    """The ``NeighbourGraph`` of ``texts`` (whose key is ``key``) under a model, encoded once."""
    def build(model) -> dedup_graph.NeighbourGraph:
        vectors, queries = search.corpus_vectors(list(texts), model, progress=progress).for_clustering()
        return dedup_graph.NeighbourGraph(vectors, queries=queries)

    return cached.built_once("dedup", choice, key, build)


@st.cache_data(show_spinner="Clustering…", max_entries=32)
def clusters(choice: str, stamp: float, key: str, threshold: float, min_size: int,
             _graph: dedup_graph.NeighbourGraph, _texts: Sequence[str]) -> tuple[pd.DataFrame, str | None]:
    """``core.inference.dedup.clusters_frame`` of the graph clustered at (threshold, min_size), and the note for
    questions whose neighbourhood was too large to list whole (None when there are none)."""
    frame = dedup.clusters_frame(_graph.cluster(threshold, min_size), _texts)
    return frame, dedup_graph.capped_note(_graph.capped, _graph.max_neighbourhood, threshold)


def cross_encoder_choices() -> dict[str, str]:
    """label -> choice of the models that can confirm candidate pairs (the cross-encoders), after "none"."""
    from core.models.registry import scores_pairs_only

    return {NO_RERANK: "", **{label: choice for label, choice in model_choices().items() if scores_pairs_only(choice)}}


def candidate_count(graph: dedup_graph.NeighbourGraph, threshold: float) -> int:
    """How many distinct pairs are above ``threshold`` in ``graph``: what a cross-encoder would read."""
    first, second, _ = graph.pairs_above(threshold)
    return int((first < second).sum())


@st.cache_data(show_spinner="Confirming the candidate pairs with the cross-encoder…", max_entries=16)
def reranked_clusters(choice: str, stamp: float, reranker: str, reranker_stamp: float, key: str, threshold: float,
                      min_size: int, _graph: dedup_graph.NeighbourGraph, _texts: Sequence[str]) -> tuple[pd.DataFrame, str]:
    """The clusters when the cross-encoder ``reranker`` confirms each pair above the bi-encoder's ``threshold``
    (``core.inference.dedup.confirmed_clusters`` at its clustering threshold), and the caption saying so."""
    model, config = get_model(reranker)
    decide = clustering_threshold(config)
    first, second, scores = dedup.candidate_scores(_graph, _texts, threshold, model)
    clusters = dedup.confirmed_clusters(len(_texts), first, second, scores, decide.threshold, min_size)
    confirmed = int((scores > decide.threshold).sum())
    return dedup.clusters_frame(clusters, _texts), (
        f"The cross-encoder confirmed {confirmed:,} of the {len(scores):,} candidate pairs above the cosine threshold "
        f"(its threshold {decide.threshold:.3f}: {decide.source}); a member's similarity is its pair's score.")


def engine_caption() -> str:
    """Which engine clustered (the local one: the page never starts Ray), and the Ray command where Ray is installed."""
    import importlib.util

    return "Engine: local (encoded and searched in this process)." + (
        " For a corpus bigger than this machine, `python -m core dedup --engine ray` runs the same clustering on a "
        "Ray cluster (`--ray-address` for an existing one)." if importlib.util.find_spec("ray") is not None else "")


def slider_range(default: float) -> tuple[float, float]:
    """The threshold slider's bounds: up to 1, down to 0.5 or a little under the calibrated threshold."""
    low = min(0.5, np.floor((default - 0.1) * 100) / 100)
    return float(max(-1.0, low)), 1.0


def cluster_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cluster: id, size, representative."""
    return (frame.drop_duplicates("cluster_id")[["cluster_id", "cluster_size", "representative"]]
            .rename(columns={"cluster_id": "cluster", "cluster_size": "size"}).reset_index(drop=True))


def show_top_clusters(frame: pd.DataFrame, count: int = TOP_CLUSTERS) -> None:
    """An expander per cluster of the ``count`` largest: its members and their similarity."""
    for cluster_id, members in frame.groupby("cluster_id", sort=True):
        if cluster_id > count:
            break
        title = f"Cluster {cluster_id} · {len(members)} questions · {members['representative'].iloc[0][:90]}"
        with st.expander(title, expanded=cluster_id == 1):
            st.dataframe(members[["question", "similarity_to_representative"]], hide_index=True,
                         key=f"dedup_members_{cluster_id}", column_config=SIMILARITY_FORMAT)


def size_histogram(frame: pd.DataFrame) -> go.Figure:
    """Bars: how many clusters have each size."""
    sizes, counts = np.unique(cluster_table(frame)["size"].to_numpy(), return_counts=True)
    figure = go.Figure(go.Bar(x=sizes, y=counts, marker_color="#4c78a8",
                              hovertemplate="%{y} clusters of %{x} questions<extra></extra>"))
    figure.update_layout(title="Cluster sizes", xaxis_title="questions in the cluster", yaxis_title="clusters",
                         height=320, margin=dict(l=10, r=10, t=40, b=10), bargap=0.15)
    figure.update_xaxes(dtick=1 if len(sizes) and sizes.max() <= 20 else None)
    return figure
