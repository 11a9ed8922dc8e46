"""The Deduplicate page: clusters of the active dataset's questions; moving the threshold re-clusters the
cached neighbour graph without encoding anything again."""
from __future__ import annotations

import pytest
import streamlit as st
from app_support import open_page

import core.inference.dedup
from core.models import load_model
from lab.navigation import DEDUPLICATE


@pytest.fixture
def encode_calls(monkeypatch) -> list[int]:
    """Counts core.inference.dedup.encode_corpus calls (the page's only way to encode), with the caches emptied."""
    calls: list[int] = []
    real = core.inference.dedup.encode_corpus

    def counting(model, texts, *args, **kwargs):
        calls.append(len(texts))
        return real(model, texts, *args, **kwargs)

    monkeypatch.setattr(core.inference.dedup, "encode_corpus", counting)
    st.cache_data.clear()
    st.cache_resource.clear()
    return calls


def test_threshold_moves_recluster_without_encoding_again(runs_with_models, encode_calls, plotly_figures):
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    assert not at.exception, at.exception
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    _, config = load_model(folders["lstm"])
    calibrated = config["thresholds"]["accuracy"]
    assert at.slider(key="dedup_threshold").value == pytest.approx(round(calibrated, 3))
    encoded = len(encode_calls)
    assert encoded >= 1 and encode_calls[-1] > 500  # the sample's distinct questions

    def shown() -> tuple[int, int]:  # the cluster table is the first dataframe, each expander's members follow
        table = at.dataframe[0].value
        return len(table), int(table["size"].sum())

    first = shown()
    assert first[0] >= 1
    sizes = at.dataframe[0].value["size"]
    assert sizes.is_monotonic_decreasing and (sizes >= 2).all()
    assert at.expander and at.expander[0].label.startswith("Cluster 1 · ")
    members = at.dataframe[1].value
    assert len(members) == sizes.iloc[0]
    assert (members["similarity_to_representative"].iloc[1:] > round(calibrated, 3) - 1e-9).all()
    [figure] = plotly_figures(at)
    assert sum(figure["data"][0]["y"]) == first[0]  # the histogram counts every cluster
    assert at.get("download_button")

    at.slider(key="dedup_threshold").set_value(0.995).run()
    assert not at.exception and not at.error
    tighter = shown() if at.dataframe else (0, 0)
    at.slider(key="dedup_threshold").set_value(at.slider(key="dedup_threshold").min).run()
    looser = shown()
    assert tighter[1] <= first[1] <= looser[1] and tighter != looser
    at.number_input(key="dedup_min_size").set_value(3).run()
    assert (at.dataframe[0].value["size"] >= 3).all()
    assert len(encode_calls) == encoded  # three re-clusterings, no encoding


def test_another_model_starts_at_its_own_threshold(runs_with_models, encode_calls):
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    for name in ("lstm", "dual-transformer"):
        at.selectbox(key="active_model").set_value(str(folders[name])).run()
        assert not at.exception and not at.error, (at.exception, at.error)
        _, config = load_model(folders[name])
        assert at.slider(key="dedup_threshold").value == pytest.approx(round(config["thresholds"]["accuracy"], 3))
    assert len(encode_calls) == 2  # one encoding per model


def test_upload_without_a_file_asks_for_one(runs_with_models, encode_calls):
    at = open_page(DEDUPLICATE.path, timeout=120)
    encoded = len(encode_calls)
    at.radio(key="dedup_source").set_value("An uploaded file").run()
    assert not at.exception and not at.error
    assert any("Upload a file" in info.value for info in at.info)
    assert not at.dataframe and len(encode_calls) == encoded


def test_uploaded_questions_are_read_like_the_command_reads_them():
    from core.data import DataError
    from lab import dedup_view

    texts, report, key = dedup_view.uploaded_questions("q.txt", b"How?\n\nWhy?\nHow?\n")
    assert texts == ["How?", "Why?", "How?"] and report.dropped == {"empty question": 1}
    assert key.startswith("upload:") and key != dedup_view.uploaded_questions("q.txt", b"How?\n")[2]
    with pytest.raises(DataError):
        dedup_view.uploaded_questions("q.txt", b"")


def test_after_an_upload_the_slider_shows_the_threshold_the_clusters_were_computed_at(
        runs_with_models, encode_calls, monkeypatch):
    from lab import dedup_view

    computed: list[float] = []
    real = dedup_view.clusters

    def recording(choice, stamp, key, threshold, *args):
        computed.append(threshold)
        return real(choice, stamp, key, threshold, *args)

    monkeypatch.setattr(dedup_view, "clusters", recording)
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    at.radio(key="dedup_source").set_value("An uploaded file").run()  # no file yet: the page stops early
    questions = "\n".join(f"How do I learn topic number {i}?" for i in range(30)).encode()
    at.file_uploader(key="dedup_upload").set_value(("questions.txt", questions, "text/plain")).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    slider = at.slider(key="dedup_threshold")
    # What the browser draws: the value the page sends, or else the slider's default (AppTest's .value reads
    # the session state instead, which held the right number while the browser showed the default, 0.500).
    sent = slider.proto.value if slider.proto.set_value else slider.proto.default
    assert computed and list(sent) == pytest.approx([computed[-1]])
    assert slider.value == pytest.approx(computed[-1])
    _, config = load_model(folders["lstm"])
    assert slider.value == pytest.approx(round(config["thresholds"]["accuracy"], 3))
    assert slider.min <= slider.value <= slider.max
