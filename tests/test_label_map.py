"""Roles and labels checked, not guessed: a label map for labels other than 0/1 (``--label-map``, the Data
page's label mapping), the ``labels`` alias, the unreadable-label warning, the mappings refused in one line
(a column given two roles, a label column of other values, a question column of labels), and the Data page's
validation and test files."""
from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest
from app_support import open_page

from core.cli.main import main
from core.data import DataError, LabelValuesError, load_pairs, normalise_label_map
from core.data.labels import guess_label
from core.inference.scoring import score_file
from lab.navigation import DATA

MAP = "PerfectMatch=1,Relevant=1,Irrelevant=0"
ACCEPTED = "1, 1.0, t, true, y, yes for a duplicate; 0, 0.0, f, false, n, no for not a duplicate"
HINT = "--label-map on the command line or the label mapping on the Data page"

# Relevance classes instead of 0/1; " perfectmatch " differs from "PerfectMatch" in case and spaces only.
GRADED = (
    "question1,question2,labels\n"
    "How old are you?,What is your age?,PerfectMatch\n"
    "How do I learn Python?,What is the best way to learn Python?,Relevant\n"
    "What is a black hole?,How do black holes form?,Relevant\n"
    "Is coffee bad for you?,How do I bake bread?,Irrelevant\n"
    "Where is Paris?,How tall is Everest?,Irrelevant\n"
    "Why is the sky blue?,What makes the sky blue?, perfectmatch \n"
).encode()
GRADED_LABELS = [1, 1, 1, 0, 0, 1]

# A 1-5 relatedness score where the duplicate label should be: only its two 1s read as labels.
SCORED = ("question1,question2,relatedness\n" + "".join(
    f"Question {i}?,Other question {i}?,{score}\n" for i, score in enumerate([1, 2, 3, 4, 5, 3, 4, 2, 5, 1]))).encode()

# The label column is "is_duplicate"; "flag" is another 0/1 column.
FLAGGED = (
    "question1,question2,is_duplicate,flag\n"
    "How old are you?,What is your age?,1,0\n"
    "Where is Paris?,How tall is Everest?,0,1\n"
    "Why is the sky blue?,What makes the sky blue?,1,1\n"
).encode()


def write(tmp_path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


# ---- core.data: the label map ---------------------------------------------------------------------------
def test_a_label_map_reads_text_labels_ignoring_case_and_spaces():
    pairs, report = load_pairs(GRADED, label_map={"perfectmatch": 1, " RELEVANT": True, "Irrelevant ": "0"})
    assert pairs["is_duplicate"].tolist() == GRADED_LABELS
    assert pairs["question1"].tolist()[-1] == "Why is the sky blue?"
    assert report.columns["is_duplicate"] == "labels"  # the alias
    assert report.label_map == {"perfectmatch": 1, "relevant": 1, "irrelevant": 0}
    assert (report.rows_kept, report.dropped, report.warnings, report.label_values) == (6, {}, [], {})


def test_a_value_left_out_of_the_map_is_an_unreadable_label_named_in_a_warning():
    pairs, report = load_pairs(GRADED, label_map={"PerfectMatch": 1, "Irrelevant": 0})
    assert pairs["is_duplicate"].tolist() == [1, 0, 0, 1]
    assert report.dropped == {"unreadable label": 2}
    assert report.examples == [(3, "unreadable label"), (4, "unreadable label")]
    assert report.warnings == [
        '2 rows have an unreadable label in column "labels" (value "Relevant"); accepted: the label map\'s '
        f'"perfectmatch"=1, "irrelevant"=0; give such values a label with {HINT}']
    # What a mapping has to cover, most frequent first, as written.
    assert report.label_values == {"Relevant": 2, "Irrelevant": 2, "PerfectMatch": 1, "perfectmatch": 1}


def test_with_a_map_the_usual_spellings_are_values_like_any_other():
    pairs, report = load_pairs(b"q1,q2,label\nA?,B?,1\nC?,D?,5\nE?,F?,3\nG?,H?,5\n", label_map={"5": 1, "3": 0})
    assert pairs["is_duplicate"].tolist() == [1, 0, 1]
    assert report.dropped == {"unreadable label": 1}


def test_a_map_of_rules_reads_a_score_and_a_value_still_wins_over_a_rule():
    # SCORED's 1-5 relatedness: 4 and 5 are duplicates, 1-3 not; "3" listed as a value is matched before the rules
    pairs, report = load_pairs(SCORED, columns={"is_duplicate": "relatedness"}, label_map={">=4": 1, "< 4": 0})
    assert pairs["is_duplicate"].tolist() == [0, 0, 0, 1, 1, 0, 1, 0, 1, 0] and report.dropped == {}
    pairs, _ = load_pairs(SCORED, columns={"is_duplicate": "relatedness"}, label_map={"3": 1, ">4.5": 1, "<=2": 0})
    assert pairs["is_duplicate"].tolist() == [0, 0, 1, 1, 1, 0, 1, 0]  # the two 4s match nothing: dropped


def test_the_label_map_option_takes_quoted_values_with_commas_and_rules():
    from core.cli.common import label_map_spec

    assert label_map_spec('"Yes, exactly"=1, "No, not at all"=0,Maybe=0') == {
        "Yes, exactly": 1, "No, not at all": 0, "Maybe": 0}
    assert label_map_spec(">=4=1,<4=0") == {">=4": 1, "<4": 0}
    quoted = b'q1,q2,label\nA?,B?,"Yes, exactly"\nC?,D?,"No, not at all"\n'
    assert load_pairs(quoted, label_map=label_map_spec('"yes, exactly"=1,"No, not at all"=0'))[0][
        "is_duplicate"].tolist() == [1, 0]


def test_a_map_that_leaves_nothing_says_which_values_it_found():
    with pytest.raises(DataError) as caught:
        load_pairs(GRADED, label_map={"Exact": 1})
    assert str(caught.value) == (
        '<upload>: no usable rows: dropped 6 unreadable labels; 6 rows have an unreadable label in column "labels" '
        '(4 distinct values, such as "Relevant", "Irrelevant", "PerfectMatch"); accepted: the label map\'s '
        f'"exact"=1; give such values a label with {HINT}')


@pytest.mark.parametrize("label_map, message", [
    ({"Relevant": 2}, "the label map gives 'Relevant' the label 2; labels are 1 (duplicate) and 0 (not duplicate)"),
    ({"Yes": 1, " yes": 0}, "the label map gives 'yes' both 1 and 0 (values match ignoring case and spaces)"),
    ({" ": 1}, "the label map has a blank value; name each label value, e.g. Relevant=1"),
    ({}, "the label map is empty; give at least one value a label, e.g. Relevant=1"),
])
def test_a_bad_label_map_is_one_data_error(label_map, message):
    with pytest.raises(DataError) as caught:
        normalise_label_map(label_map)
    assert str(caught.value) == message
    with pytest.raises(DataError, match="the label map"):
        load_pairs(GRADED, label_map=label_map)


def test_labels_is_an_alias_of_the_label_column_after_label():
    pairs, report = load_pairs(b"q1,q2,labels\nA?,B?,yes\nC?,D?,no\n")
    assert pairs["is_duplicate"].tolist() == [1, 0] and report.columns["is_duplicate"] == "labels"
    _, both = load_pairs(b"q1,q2,labels,label\nA?,B?,0,1\n")
    assert both.columns["is_duplicate"] == "label"


def test_unreadable_labels_without_a_map_are_named_with_the_spellings_accepted():
    content = b"q1,q2,label\nA?,B?,1\nC?,D?,maybe\nE?,F?,0\nG?,H?,1\nI?,J?,maybe\nK?,L?,\n"
    pairs, report = load_pairs(content)
    assert pairs["is_duplicate"].tolist() == [1, 0, 1]
    assert report.warnings == [
        f'3 rows have an unreadable label in column "label" (values "maybe", (empty)); accepted: {ACCEPTED}; '
        f"give such values a label with {HINT}"]
    assert report.label_values == {"1": 2, "maybe": 2, "0": 1, "": 1}


# ---- core.data: the mappings refused -----------------------------------------------------------------------
def one_line_error(content: bytes, error=DataError, **options) -> DataError:
    with pytest.raises(error) as caught:
        load_pairs(content, **options)
    assert "\n" not in str(caught.value)
    return caught.value


def test_one_column_given_two_roles_is_refused():
    error = one_line_error(FLAGGED, columns={"question1": "question2"})
    assert str(error) == ('<upload>: column 2 "question2" is given two roles, question1 and question2 (values such '
                          'as "What is your age?", "How tall is Everest?", "What makes the sky blue?"); each role '
                          "needs a column of its own")
    # Resolved so: question1 named onto the column the label is found in by its name.
    error = one_line_error(b"q1,q2,label\nA?,B?,1\nC?,D?,0\n", columns={"question1": "label"})
    assert str(error).startswith('<upload>: column 3 "label" is given two roles, question1 and is_duplicate '
                                 '(values such as "1", "0")')


def test_a_label_column_of_other_values_is_refused_with_its_values():
    error = one_line_error(SCORED, LabelValuesError, columns={"is_duplicate": "relatedness"})
    assert str(error) == (
        '<upload>: the is_duplicate column "relatedness" does not hold duplicate labels: 8 of 10 rows have another '
        f'value (4 distinct values, such as "2", "3", "4"); accepted: {ACCEPTED}; give each value a label with '
        f"{HINT}, or choose another column")
    assert error.column == "relatedness"
    assert error.values == ["1", "2", "3", "4", "5"]  # all its values: a mapping covers the readable ones too
    assert error.columns == {"question1": "question1", "question2": "question2", "is_duplicate": "relatedness"}
    # The same file with a map for the scores: what the user says, no refusal.
    pairs, _ = load_pairs(SCORED, columns={"is_duplicate": "relatedness"}, label_map={"5": 1, "4": 1, "1": 0, "2": 0})
    assert pairs["is_duplicate"].tolist() == [0, 0, 1, 1, 1, 0, 1, 0]  # the two 3s dropped


def test_text_classes_are_refused_without_a_map():
    error = one_line_error(GRADED, LabelValuesError)
    assert "6 of 6 rows have another value" in str(error)
    assert error.values == ["Relevant", "Irrelevant", "PerfectMatch", "perfectmatch"]


def test_a_minority_of_unreadable_labels_is_only_dropped():
    # Two unreadable of five rows with both questions: loaded, the two dropped and named.
    pairs, report = load_pairs(b"q1,q2,label\nA?,B?,1\nC?,D?,2\nE?,F?,0\nG?,H?,3\nI?,J?,1\n")
    assert len(pairs) == 3 and report.dropped == {"unreadable label": 2}
    assert 'values "2", "3"' in report.warnings[0]


def test_a_question_on_a_column_of_labels_is_refused():
    error = one_line_error(FLAGGED, columns={"question1": "is_duplicate", "is_duplicate": "flag"})
    assert str(error) == ('<upload>: the question1 column "is_duplicate" holds labels, not questions (values such as '
                          '"1", "0"); give question1 the column of the first question')
    error = one_line_error(FLAGGED, columns={"question2": "flag"})
    assert 'the question2 column "flag" holds labels' in str(error) and "second question" in str(error)


# ---- score_file reads with the same map and refusals --------------------------------------------------------
class LengthModel:
    """Scores a pair by how alike the two questions' lengths are: known scores without a network."""

    def score_pairs(self, first, second):
        return [1.0 - abs(len(a) - len(b)) / max(len(a), len(b)) for a, b in zip(first, second)]


def test_score_file_honours_the_label_map(tmp_path):
    source = write(tmp_path, "graded.csv", GRADED)
    report = score_file(LengthModel(), source, tmp_path / "scored.csv", 0.5, label_map={"PerfectMatch": 1,
                                                                                         "Irrelevant": 0})
    assert (report.rows, report.scored, report.labelled, report.metrics["n"]) == (6, 6, 4, 4)
    assert report.warnings and 'value "Relevant"' in report.warnings[0]
    written = pd.read_csv(tmp_path / "scored.csv")
    assert written["labels"].tolist() == ["PerfectMatch", "Relevant", "Relevant", "Irrelevant", "Irrelevant",
                                          " perfectmatch "]  # written back as they were


def test_score_file_refuses_a_label_column_of_other_values_and_writes_nothing(tmp_path):
    source = write(tmp_path, "graded.csv", GRADED)
    with pytest.raises(LabelValuesError):
        score_file(LengthModel(), source, tmp_path / "scored.csv", 0.5)
    assert not (tmp_path / "scored.csv").exists()


# ---- the command line ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lstm_folder(tiny_lstm):
    return tiny_lstm


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


PROGRESS_BAR = re.compile(r"^\s*(\x1b\[A)*\s*\w+: \d+\S* \[")  # tqdm's lines (score draws its steps' bars)


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip() and not PROGRESS_BAR.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_evaluate_and_score_take_a_label_map(capsys, tmp_path, lstm_folder):
    graded = write(tmp_path, "graded.csv", GRADED)
    code, out, err = run_cli(capsys, "evaluate", "--model", lstm_folder, "--data", graded, "--label-map", MAP)
    assert code == 0 and err == "", err
    assert json.loads(out)["n"] == 6

    code, out, err = run_cli(capsys, "evaluate", "--model", lstm_folder, "--data", graded,
                             "--label-map", "PerfectMatch=1,Irrelevant=0")
    assert code == 0 and json.loads(out)["n"] == 4
    assert "data: kept 4 of 6 rows; dropped 2 unreadable label" in err
    assert 'data: warning: 2 rows have an unreadable label in column "labels" (value "Relevant")' in err

    code, out, err = run_cli(capsys, "score", "--model", lstm_folder, "--pairs", graded, "--label-map", MAP,
                             "--out", tmp_path / "scored.csv")
    assert code == 0, err
    assert json.loads(out)["n"] == 6


@pytest.mark.parametrize("content, flags, problem", [
    (FLAGGED, ["--columns", "question1=question2"],
     'column 2 "question2" is given two roles, question1 and question2 (values such as "What is your age?"'),
    (SCORED, ["--columns", "is_duplicate=relatedness"],
     'the is_duplicate column "relatedness" does not hold duplicate labels: 8 of 10 rows have another value'),
    (FLAGGED, ["--columns", "question1=is_duplicate,is_duplicate=flag"],
     'the question1 column "is_duplicate" holds labels, not questions (values such as "1", "0")'),
    (GRADED, ["--label-map", "PerfectMatch=2"],
     "argument --label-map: the label map gives 'PerfectMatch' the label '2'; labels are 1 (duplicate) and 0"),
    (GRADED, ["--label-map", "PerfectMatch=1,perfectmatch=0"],
     "argument --label-map: the label map gives 'perfectmatch' both 1 and 0 (values match ignoring case and spaces)"),
    (GRADED, ["--label-map", "PerfectMatch=1,PerfectMatch=0"],  # the same spelling twice, not merged away
     "argument --label-map: the label map gives 'PerfectMatch' both 1 and 0 (values match ignoring case and spaces)"),
    (GRADED, ["--label-map", "PerfectMatch"], "argument --label-map: expected VALUE=1 or VALUE=0 pairs"),
])
@pytest.mark.parametrize("command", ["evaluate", "score", "train"])
def test_a_refused_mapping_is_one_error_line(capsys, tmp_path, lstm_folder, content, flags, problem, command):
    data = write(tmp_path, "pairs.csv", content)
    argv = {"evaluate": ["evaluate", "--model", lstm_folder, "--data", data],
            "score": ["score", "--model", lstm_folder, "--pairs", data, "--out", tmp_path / "scored.csv"],
            "train": ["train", "--data", data, "--out", tmp_path / "model", "--epochs", "1", "--device", "cpu"]}[command]
    code, out, err = run_cli(capsys, *argv, *flags)
    assert code == 2 and out == ""
    assert problem in one_error_line(err)
    assert not (tmp_path / "scored.csv").exists() and not (tmp_path / "model").exists()


# ---- the Data page -----------------------------------------------------------------------------------------
VAL = b"q1,q2,labels\nHow far is the Moon?,What is the distance to the Moon?,Relevant\nWho wrote Hamlet?,Who painted the Mona Lisa?,Irrelevant\n"
TEST = b"q1,q2,labels\nWhat is DNA?,What does DNA stand for?,PerfectMatch\nIs tea healthy?,How do cars work?,Irrelevant\nHow do I sleep better?,How can I improve my sleep?,Relevant\n"


def upload(at, key: str, name: str, data: bytes):
    at.file_uploader(key=key).set_value((name, data, "text/csv")).run()
    assert not at.exception, at.exception
    return at


def map_labels(at, meanings: dict[str, str]):
    for box in at.selectbox:
        if box.key and box.key.startswith("label_for_"):
            box.set_value(meanings[box.label.strip('"')])
    at.button(key="load_with_columns").click().run()
    assert not at.exception, at.exception
    return at


def test_the_data_page_maps_text_labels_and_keeps_the_choice(runs_root, sample_pairs):
    at = upload(open_page(DATA.path), "upload", "graded.csv", GRADED.replace(b" perfectmatch ", b"PerfectMatch"))
    assert not at.error  # nothing is wrong yet: the page asks, in its own words
    [prompt] = at.info
    assert prompt.value.startswith('To read graded.csv, its label column "labels" holds "PerfectMatch", "Relevant", '
                                   '"Irrelevant" rather than 1 and 0: say what each value means')
    assert "Until then the active dataset stays bundled sample (assets/sample_pairs.csv)." in prompt.value
    assert "--label-map" not in prompt.value
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])
    boxes = {box.label: box.value for box in at.selectbox if box.key.startswith("label_for_")}
    assert boxes == {'"Relevant"': None, '"Irrelevant"': None, '"PerfectMatch"': None}  # no word to guess from

    # Loading with a value unanswered asks for it, and loads nothing.
    at.button(key="load_with_columns").click().run()
    assert not at.error and at.session_state.data_name != "graded.csv (upload)"
    [notice] = at.warning
    assert notice.value == 'Say what "PerfectMatch", "Relevant", "Irrelevant" mean first (or drop their rows).'

    at = map_labels(at, {"Relevant": "duplicate", "Irrelevant": "not duplicate", "PerfectMatch": "duplicate"})
    assert not at.error
    assert at.session_state.data_name == "graded.csv (upload)"
    assert at.session_state.pairs["is_duplicate"].tolist() == GRADED_LABELS
    assert at.session_state.label_choices["graded.csv"] == {"Relevant": 1, "Irrelevant": 0, "PerfectMatch": 1}
    assert not [box for box in at.selectbox if box.key.startswith("label_for_")]  # the picker is done

    # The choice stays for the session: the sample, then a file of the same name, loads with it at once.
    at.button(key="use_sample").click().run()
    [uploader] = at.get("file_uploader")
    at = upload(at, uploader.key, "graded.csv", GRADED.replace(b" perfectmatch ", b"Irrelevant"))
    assert not at.error and at.session_state.data_name == "graded.csv (upload)"
    assert at.session_state.pairs["is_duplicate"].tolist() == [1, 1, 1, 0, 0, 0]


def test_a_dropped_value_can_be_mapped_after_the_load(runs_root):
    # Mostly 0/1, with one "maybe": loaded, the row dropped, and a mapping offered for every value.
    content = b"q1,q2,label\nA?,B?,1\nC?,D?,0\nE?,F?,maybe\nG?,H?,1\n"
    at = upload(open_page(DATA.path), "upload", "pairs.csv", content)
    assert len(at.session_state.pairs) == 3 and not at.error
    [label_warning] = [warning.value for warning in at.warning if '"maybe"' in warning.value]
    assert label_warning == ('pairs.csv: 1 row was dropped: their label is neither 1 nor 0 (the column holds "1", '
                             '"0", "maybe"); to keep them, say what each value means in this page\'s label mapping.')
    assert not any("--label-map" in element.value for element in [*at.warning, *at.info, *at.markdown])
    boxes = {box.label: box.value for box in at.selectbox if box.key.startswith("label_for_")}
    assert boxes == {'"1"': "duplicate", '"0"': "not duplicate", '"maybe"': None}
    at = map_labels(at, {"1": "duplicate", "0": "not duplicate", "maybe": "not duplicate"})
    assert at.session_state.pairs["is_duplicate"].tolist() == [1, 0, 0, 1]


def test_two_roles_picked_are_refused_and_the_previous_dataset_stays(runs_root, sample_pairs):
    at = upload(open_page(DATA.path), "upload", "own.csv", b"left,right,verdict\nA?,B?,1\nC?,D?,0\n")
    for role, column in (("question1", "left"), ("question2", "left"), ("is_duplicate", "verdict")):
        at.selectbox(key=f"column_for_{role}").set_value(column)
    at.button(key="load_with_columns").click().run()
    assert not at.exception
    assert len(at.error) == 1 and 'column 1 "left" is given two roles, question1 and question2' in at.error[0].value
    assert "is still active" in at.error[0].value
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])


def held_out_uploader(at, title: str):
    [uploader] = [box for box in at.get("file_uploader") if box.label == f"{title} pairs"]
    return uploader.key


def test_validation_and_test_files_are_read_like_the_dataset_and_let_go_with_it(runs_root):
    at = upload(open_page(DATA.path), "upload", "graded.csv", GRADED)
    at = map_labels(at, {"Relevant": "duplicate", "Irrelevant": "not duplicate", "PerfectMatch": "duplicate",
                         "perfectmatch": "duplicate"})
    assert at.session_state.data_name == "graded.csv (upload)"
    assert len(at.get("file_uploader")) == 1  # the extra uploaders wait behind the toggle
    at.toggle(key="held_out_files_on").set_value(True).run()

    at = upload(at, held_out_uploader(at, "Validation"), "val.csv", VAL)
    at = upload(at, held_out_uploader(at, "Test"), "test.csv", TEST)
    assert not at.error
    captions = [caption.value for caption in at.caption]
    assert "Validation: **2 pairs** from val.csv (50.0% duplicates)" in captions
    assert "Test: **3 pairs** from test.csv (66.7% duplicates)" in captions
    files = at.session_state.held_out_files
    assert files["val"][0]["is_duplicate"].tolist() == [1, 0] and files["val"][1] == "val.csv"
    assert files["test"][0]["question1"].tolist() == ["What is DNA?", "Is tea healthy?", "How do I sleep better?"]

    # A file the dataset's label map cannot read is refused; the test file already given stays.
    at = upload(at, held_out_uploader(at, "Test"), "bad.csv", b"q1,q2,labels\nA?,B?,Maybe\nC?,D?,Unsure\n")
    assert len(at.error) == 1 and "bad.csv: no usable rows" in at.error[0].value
    assert "The previous test file (test.csv) is kept" in at.error[0].value
    assert at.session_state.held_out_files["test"][1] == "test.csv"

    at.button(key="use_sample").click().run()  # a new active dataset: its held-out files are not these
    assert not at.exception and at.session_state.held_out_files == {}
    assert not [caption for caption in at.caption if "pairs** from" in caption.value]


# ---- the Data page's first guess --------------------------------------------------------------------------------
@pytest.mark.parametrize("value, label", [
    ("1", 1), ("yes", 1), ("TRUE", 1), (" match ", 1), ("Duplicate", 1), ("same", 1), ("Similar", 1),
    ("paraphrase", 1), (1, 1), (1.0, 1), ("1.0", 1),
    ("0", 0), ("no", 0), ("False", 0), ("different", 0), ("not_duplicate", 0), ("Not Duplicate", 0),
    ("not-duplicate", 0), (" DIFFERENT\t", 0), ("mismatch", 0), (0, 0),
    ("Relevant", None), ("maybe", None), ("2", None), ("", None), ("matchless", None), (5, None),
])
def test_the_guess_reads_the_usual_words_and_asks_for_the_rest(value, label):
    assert guess_label(value) == label


def test_reading_never_guesses():
    """The guess only pre-fills the page: a file of match/different is still refused without a label map."""
    content = b"question1,question2,is_duplicate\nA?,B?,match\nC?,D?,different\nE?,F?,match\n"
    with pytest.raises(LabelValuesError) as refused:
        load_pairs(io.BytesIO(content))
    assert refused.value.values == ["match", "different"]
    pairs, _ = load_pairs(io.BytesIO(content), label_map={value: guess_label(value) for value in refused.value.values})
    assert pairs["is_duplicate"].tolist() == [1, 0, 1]
