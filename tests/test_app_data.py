"""The Data page (AppTest): the sample is active by default, uploads replace it, bad files never do."""
import gzip

import pandas as pd
import pytest
import streamlit as st
from app_support import open_app, open_page

from core.data import dataset_summary, load_pairs, training_problems
from lab.navigation import DATA

# Line 1 is the header; line 4 has an empty question2 and line 6 an unreadable label: 4 of 6 rows stay.
UPLOAD = (
    "question1,question2,is_duplicate\n"
    "How old are you?,What is your age?,1\n"
    "How do I learn Python?,What is the best way to learn Python?,1\n"
    "What is a black hole?,,0\n"
    "Is coffee bad for you?,How do I bake bread?,0\n"
    "Why is the sky blue?,What makes the sky blue?,maybe\n"
    "Where is Paris?,How tall is Everest?,0\n"
).encode()


def metrics(at) -> dict[str, str]:
    return {metric.label: metric.value for metric in at.metric}


def expected_metrics(pairs: pd.DataFrame) -> dict[str, str]:
    summary = dataset_summary(pairs)
    return {"Pairs": f"{summary['pairs']:,}", "Duplicates": f"{summary['duplicate_rate']:.1%}",
            "Unique questions": f"{summary['unique_questions']:,}"}


@pytest.fixture
def data_page(runs_root):
    return open_page(DATA.path)


def upload(at, name: str, data: bytes, mime: str = "text/csv"):
    at.file_uploader(key="upload").set_value((name, data, mime)).run()
    assert not at.exception, at.exception
    return at


def test_sample_is_active_by_default(data_page, sample_pairs, plotly_figures):
    at = data_page
    assert not at.exception
    pairs, _ = sample_pairs
    assert metrics(at) == expected_metrics(pairs) == {"Pairs": "479", "Duplicates": "38.0%", "Unique questions": "722"}
    pd.testing.assert_frame_equal(at.session_state.pairs, pairs)
    assert not at.error and not at.warning
    assert at.success[0].value == "No row was dropped."
    assert any(f"{st.get_option('server.maxUploadSize')} MB" in caption.value for caption in at.caption)
    assert at.button(key="use_sample").disabled  # already active

    [histogram] = plotly_figures(at)
    assert histogram["layout"]["title"]["text"] == "Question length in words"
    assert [trace["name"] for trace in histogram["data"]] == ["question1", "question2"]
    assert [sum(trace["y"]) for trace in histogram["data"]] == [479, 479]  # every question counted once per column


def test_upload_replaces_the_dataset_and_reports_dropped_rows(data_page):
    at = upload(data_page, "pairs.csv", UPLOAD)
    expected, report = load_pairs(UPLOAD)
    assert len(expected) == 4
    assert metrics(at) == expected_metrics(expected)
    pd.testing.assert_frame_equal(at.session_state.pairs, expected)
    assert at.session_state.data_name == "pairs.csv (upload)"
    assert not at.error

    reasons = at.table[0].value
    assert dict(zip(reasons["reason"], reasons["rows"])) == {"empty question": 1, "unreadable label": 1}
    examples = at.dataframe[1].value
    assert list(zip(examples["line"], examples["reason"])) == [(4, "empty question"), (6, "unreadable label")]
    assert any("kept 4 of 6 rows" in caption.value for caption in at.caption)
    assert not at.button(key="use_sample").disabled


def test_gzipped_tsv_upload(data_page):
    tsv = UPLOAD.decode().replace(",", "\t").encode()
    at = upload(data_page, "pairs.tsv.gz", gzip.compress(tsv), "application/gzip")
    assert metrics(at)["Pairs"] == "4"
    assert at.session_state.data_report.delimiter == "\t"


def test_duplicate_header_upload_shows_a_warning_naming_the_column_used(data_page):
    content = b"question1,question1,question2,is_duplicate\nFirst?,Second?,Third?,1\nA?,B?,C?,0\n"
    at = upload(data_page, "dups.csv", content)
    assert not at.error
    two_pairs = [f"Not enough to train on: {problem.message}." for problem in training_problems(
        dataset_summary(at.session_state.pairs))]  # 2 pairs: too few for a validation split (test_app_run_quality)
    assert [warning.value for warning in at.warning] == [
        'dups.csv: columns 1 "question1" and 2 "question1" both name question1; question1 is read from '
        'column 1 "question1", the other is ignored', *two_pairs
    ] and len(two_pairs) == 2
    assert at.session_state.pairs["question1"].tolist() == ["First?", "A?"]
    at.button(key="use_sample").click().run()
    assert not at.exception and not at.warning  # the warning belongs to the upload, not the page


def test_utf16_upload_loads_like_utf8(data_page):
    at = upload(data_page, "pairs.txt", b"\xff\xfe" + UPLOAD.decode().replace(",", "\t").encode("utf-16-le"))
    assert not at.error
    assert metrics(at)["Pairs"] == "4"
    assert any("encoding utf-16-le" in caption.value for caption in at.caption)


@pytest.mark.parametrize("name, data, message", [
    ("photo.csv", bytes(range(256)) * 8, "looks like a binary file"),
    ("wrong.csv", b"title,body\nhello,world\n", "missing column"),
    ("empty.csv", b"", "empty"),
])
def test_a_bad_file_shows_an_error_and_keeps_the_previous_dataset(data_page, name, data, message):
    at = upload(data_page, "pairs.csv", UPLOAD)
    before = at.session_state.pairs.copy()
    at = upload(at, name, data)
    assert len(at.error) == 1
    assert message in at.error[0].value
    assert "The previous dataset (pairs.csv (upload)) is still active" in at.error[0].value
    pd.testing.assert_frame_equal(at.session_state.pairs, before)
    assert at.session_state.data_name == "pairs.csv (upload)"
    assert metrics(at)["Pairs"] == "4"
    at.run()  # the message stays while the bad file sits in the uploader
    assert len(at.error) == 1 and not at.exception


def test_use_the_bundled_sample_after_an_upload(data_page, sample_pairs):
    at = upload(data_page, "pairs.csv", UPLOAD)
    at.button(key="use_sample").click().run()
    assert not at.exception
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])
    assert metrics(at)["Pairs"] == "479"
    at.run()  # the file still in the uploader is not applied again
    assert metrics(at)["Pairs"] == "479"


def test_choosing_the_sample_empties_the_uploader_and_a_new_upload_still_loads(data_page):
    at = upload(data_page, "pairs.csv", UPLOAD)
    [uploader] = at.get("file_uploader")
    assert uploader.value is not None and uploader.value.name == "pairs.csv"
    at.button(key="use_sample").click().run()
    assert not at.exception
    [uploader] = at.get("file_uploader")  # the file shown there would no longer be the active dataset
    assert uploader.value is None and uploader.key != "upload"
    at.file_uploader(key=uploader.key).set_value(("again.csv", UPLOAD, "text/csv")).run()
    assert not at.exception and not at.error
    assert at.session_state.data_name == "again.csv (upload)" and metrics(at)["Pairs"] == "4"


def test_home_page_starts_on_the_sample_with_nothing_trained(runs_root):
    at = open_app()
    assert not at.exception and not at.error
    assert at.title[0].value == "Siamese Lab"
    assert any("bundled sample" in block.value and "479 question pairs" in block.value for block in at.markdown)


# A user's own file: its own column names and text labels.
OWN = (
    "q_a,q_b,same\n"
    "How old are you?,What is your age?,match\n"
    "How do I learn Python?,What is the best way to learn Python?, Match \n"
    "Is coffee bad for you?,How do I bake bread?,different\n"
    "Where is Paris?,How tall is Everest?,different\n"
    "Why is the sky blue?,What makes the sky blue?,match\n"
).encode()


def test_an_own_file_is_met_halfway_columns_then_labels_guessed_and_loaded(data_page, sample_pairs):
    at = upload(data_page, "own.csv", OWN)
    assert not at.error  # before any user action, nothing is wrong: a prompt, not an error
    [prompt] = at.info
    assert prompt.value.startswith("To read own.csv, its columns are not named as this page expects")
    picked = {role: at.selectbox(key=f"column_for_{role}").value for role in ("question1", "question2", "is_duplicate")}
    assert picked == {"question1": "q_a", "question2": "q_b", "is_duplicate": "same"}  # in the file's order

    at.button(key="load_with_columns").click().run()
    assert not at.exception and not at.error  # labels of other words are the next question, not a mistake
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])  # nothing loaded yet
    [prompt] = at.info
    assert prompt.value.startswith('To read own.csv, its label column "same" holds "match", "different" rather than '
                                   "1 and 0")
    assert "--label-map" not in prompt.value
    boxes = {box.label: box.value for box in at.selectbox if box.key.startswith("label_for_")}
    assert boxes == {'"match"': "duplicate", '"different"': "not duplicate"}  # pre-filled from the words

    at.button(key="load_with_columns").click().run()
    assert not at.exception and not at.error and not at.info
    assert at.session_state.data_name == "own.csv (upload)"
    assert at.session_state.pairs["is_duplicate"].tolist() == [1, 1, 0, 0, 1]
    assert at.session_state.pairs["question1"].tolist()[0] == "How old are you?"
    assert metrics(at)["Pairs"] == "5"


def test_a_question_column_picked_as_the_label_is_refused_in_the_pages_words(data_page):
    rows = "".join(f"Question {n}?,Other {n}?,{'match' if n % 2 else 'different'}\n" for n in range(15))
    at = upload(data_page, "own.csv", ("q_a,q_b,same\n" + rows).encode())
    at.selectbox(key="column_for_is_duplicate").set_value("q_b")
    at.selectbox(key="column_for_question2").set_value("same")
    at.button(key="load_with_columns").click().run()
    assert not at.exception
    [error] = at.error  # a user's choice that cannot be read: now an error, said as the page says it
    assert error.value.startswith('own.csv: the label column "q_b" holds more than 12 different values, such as '
                                  '"Other 0?", "Other 1?", "Other 2?": text, not labels; choose the column that holds')
    assert "--label-map" not in error.value and "is still active" in error.value
    assert at.selectbox(key="column_for_is_duplicate").value == "q_b"  # the columns are offered again
