"""The Deduplicate page: clusters of the active dataset's questions; moving the threshold re-clusters the
cached neighbour graph without encoding anything again."""
from __future__ import annotations

import pytest
import streamlit as st
from app_support import open_page

import core.inference.search
from core.data import load_pairs
from core.inference.calibration import clustering_threshold
from core.models import ZERO_SHOT, load_model
from core.models.registry import zero_shot_config
from lab.navigation import DATA, DEDUPLICATE
from lab.session import SAMPLE_PATH

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def _empty_caches() -> None:
    """Streamlit's caches emptied once for this module: each test's models are fresh copies (their own cache
    keys), and the page's first render on zero-shot MiniLM encodes the sample once for all the tests."""
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def encode_calls(_empty_caches, monkeypatch) -> list[int]:
    """Counts core.inference.search.corpus_vectors calls (the page's only way to encode)."""
    calls: list[int] = []
    real = core.inference.search.corpus_vectors

    def counting(texts, *args, **kwargs):
        calls.append(len(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(core.inference.search, "corpus_vectors", counting)
    return calls


def test_threshold_moves_recluster_without_encoding_again(runs_with_models, encode_calls, plotly_figures):
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    assert not at.exception, at.exception
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    _, config = load_model(folders["lstm"])
    calibrated = clustering_threshold(config).threshold
    assert at.slider(key="dedup_threshold").value == pytest.approx(round(calibrated, 3))
    assert any(c.value == f"Starts at {calibrated:.3f}: {clustering_threshold(config).source}." for c in at.caption)
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
    encoded = len(encode_calls)  # the default model's encoding, if any
    for name in ("lstm", "dual-transformer"):
        at.selectbox(key="active_model").set_value(str(folders[name])).run()
        assert not at.exception and not at.error, (at.exception, at.error)
        _, config = load_model(folders[name])
        assert at.slider(key="dedup_threshold").value == pytest.approx(round(clustering_threshold(config).threshold, 3))
    assert len(encode_calls) == encoded + 2  # one encoding per model


def test_upload_without_a_file_asks_for_one(runs_with_models, encode_calls):
    at = open_page(DEDUPLICATE.path, timeout=120)
    encoded = len(encode_calls)
    at.radio(key="dedup_source").set_value("An uploaded file").run()
    assert not at.exception and not at.error
    assert any("Upload a file" in info.value for info in at.info)
    assert not at.dataframe and len(encode_calls) == encoded


def test_uploaded_questions_are_read_like_the_command_reads_them():
    from core.data import DataError
    from lab import cached

    texts, report, key = cached.uploaded_questions("q.txt", b"How?\n\nWhy?\nHow?\n")
    assert texts == ["How?", "Why?", "How?"] and report.dropped == {"empty question": 1}
    assert key.startswith("upload:") and key != cached.uploaded_questions("q.txt", b"How?\n")[2]
    with pytest.raises(DataError):
        cached.uploaded_questions("q.txt", b"")


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
    assert slider.value == pytest.approx(round(clustering_threshold(config).threshold, 3))
    assert slider.min <= slider.value <= slider.max


def upload(at, name: str, questions: list[str]) -> None:
    at.radio(key="dedup_source").set_value("An uploaded file").run()
    at.file_uploader(key="dedup_upload").set_value((name, "\n".join(questions).encode(), "text/plain")).run()
    assert not at.exception and not at.error, (at.exception, at.error)


def test_an_outsized_cluster_is_warned_of(runs_with_models, encode_calls):
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    upload(at, "topics.txt", [f"How do I learn topic number {i}?" for i in range(30)])
    at.slider(key="dedup_threshold").set_value(at.slider(key="dedup_threshold").min).run()
    largest = int(at.dataframe[0].value["size"].max())
    assert largest >= 20  # these questions differ by one number: at the lowest threshold they are one cluster
    [warning] = [w.value for w in at.warning if "are in one cluster" in w.value]
    assert warning.startswith(f"{largest} of the 30 questions ({largest / 30:.0%}) are in one cluster at the threshold")
    assert "Raise the threshold" in warning
    # 12 such questions are one cluster too, but too few to be a finding (core.inference.dedup.OUTSIZED_MIN_SIZE)
    upload(at, "few.txt", [f"How do I learn topic number {i}?" for i in range(12)])
    assert int(at.dataframe[0].value["size"].max()) == 12
    assert not [w for w in at.warning if "are in one cluster" in w.value]


def test_the_uploaded_corpus_survives_a_visit_to_another_page(runs_with_models, encode_calls):
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    upload(at, "topics.txt", [f"How do I learn topic number {i}?" for i in range(30)])
    table = at.dataframe[0].value
    encoded = len(encode_calls)

    at.switch_page(DATA.path).run()
    assert not at.exception
    at.switch_page(DEDUPLICATE.path).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.file_uploader(key="dedup_upload").value is None  # Streamlit forgot the file; the page did not
    assert not any("Upload a file" in info.value for info in at.info)
    assert any(c.value.startswith("Questions of **topics.txt**, uploaded earlier") for c in at.caption)
    assert at.dataframe[0].value.equals(table) and len(encode_calls) == encoded  # the same clusters, not encoded again

    # Another file replaces it; removing the file from the uploader forgets it.
    upload(at, "other.txt", [f"Why is the sky colour number {i}?" for i in range(5)])
    assert any("5 questions of other.txt" in c.value for c in at.caption)
    at.file_uploader(key="dedup_upload").set_value(None).run()
    assert any("Upload a file" in info.value for info in at.info)


def test_zero_shot_minilm_starts_at_a_threshold_calibrated_on_the_labelled_pairs(runs_root, encode_calls):
    from lab.session import get_model

    pairs = load_pairs(SAMPLE_PATH)[0].iloc[:60].reset_index(drop=True)  # 22 duplicates
    at = open_page(DEDUPLICATE.path, timeout=180, pairs=pairs, data_name="sixty.csv")
    at.selectbox(key="active_model").set_value(ZERO_SHOT).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    model, config = get_model(ZERO_SHOT)
    scores = model.score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist())
    expected = clustering_threshold(config, pairs["is_duplicate"].to_numpy(), scores)
    assert expected.source == "precision 90% on 60 of your labelled pairs"
    assert expected.threshold != clustering_threshold(zero_shot_config()).threshold
    assert at.slider(key="dedup_threshold").value == pytest.approx(round(expected.threshold, 3))
    assert any(c.value == f"Starts at {expected.threshold:.3f}: {expected.source}." for c in at.caption)


def test_a_moved_threshold_is_shown_again_in_a_new_session(runs_with_models, encode_calls):
    _, folders = runs_with_models
    at = open_page(DEDUPLICATE.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    start = at.slider(key="dedup_threshold").value
    moved = round(start + 0.015, 3)
    at.slider(key="dedup_threshold").set_value(moved).run()
    assert not at.exception, at.exception
    again = open_page(DEDUPLICATE.path, timeout=120)  # a reload: the same workspace, a new session
    assert not again.exception and not again.error, (again.exception, again.error)
    assert again.slider(key="dedup_threshold").value == pytest.approx(moved)
    again.selectbox(key="active_model").set_value(ZERO_SHOT).run()  # another model starts at its own
    assert again.slider(key="dedup_threshold").value != pytest.approx(moved)
