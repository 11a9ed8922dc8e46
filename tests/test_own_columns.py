"""A file with its own column names (MRPC's ``Quality``, ``#1 String``, ``#2 String``): ``--columns`` on every
command that reads pairs, one ``error:`` line naming the file once, and the Data page's column picker. A file
without a header row: said to be one, and read by ``--names`` (or the Data page's "the first row is data")."""
import json
from pathlib import Path

import pandas as pd
import pytest
from app_support import open_page

from core.cli.main import main
from core.data import DataError, MissingColumnsError, NoHeaderRowError, load_pairs
from core.data.limits import clip
from lab.navigation import DATA

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
SAMPLE_PAIRS = 479
MRPC_COLUMNS = "question1=#1 String,question2=#2 String,is_duplicate=Quality"
TINY_LSTM = ["--model", "lstm", "--epochs", "1", "--device", "cpu",
             "--model-options", json.dumps({"hidden_size": 16, "embedding_dim": 12})]


def mrpc_like(pairs: pd.DataFrame) -> bytes:
    """``pairs`` as MRPC writes them: tab-separated, the label first, ids beside the sentences."""
    frame = pd.DataFrame({"Quality": pairs["is_duplicate"], "#1 ID": range(len(pairs)),
                          "#2 ID": range(len(pairs), 2 * len(pairs)),
                          "#1 String": pairs["question1"], "#2 String": pairs["question2"]})
    return frame.to_csv(sep="\t", index=False).encode()


@pytest.fixture(scope="module")
def mrpc_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mrpc") / "raw_test.txt"
    path.write_bytes(mrpc_like(load_pairs(SAMPLE)[0]))
    return path


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# ---- the CLI ------------------------------------------------------------------------------------------
def test_train_and_evaluate_with_columns(capsys, tmp_path, mrpc_file):
    out_dir = tmp_path / "model"
    code, out, err = run_cli(capsys, "train", "--data", mrpc_file, "--columns", MRPC_COLUMNS, "--out", out_dir,
                             *TINY_LSTM)
    assert code == 0, err
    assert json.loads(out)["status"] == "done"
    assert json.loads((out_dir / "config.json").read_text())["data"]["pairs"] == SAMPLE_PAIRS

    code, out, err = run_cli(capsys, "evaluate", "--model", out_dir, "--data", mrpc_file, "--columns", MRPC_COLUMNS)
    assert code == 0, err
    metrics = json.loads(out)
    assert metrics["n"] == SAMPLE_PAIRS
    # The same pairs as the original file, so the same metrics.
    code, out, err = run_cli(capsys, "evaluate", "--model", out_dir, "--data", SAMPLE)
    assert code == 0, err
    assert json.loads(out) == metrics


def test_score_search_and_embed_take_columns(capsys, tmp_path, mrpc_file, tiny_models):
    model = tiny_models["lstm"]
    scored = tmp_path / "scored.csv"
    code, _, err = run_cli(capsys, "score", "--model", model, "--pairs", mrpc_file, "--columns", MRPC_COLUMNS,
                           "--out", scored)
    assert code == 0, err
    written = pd.read_csv(scored, keep_default_na=False)
    assert list(written.columns[:5]) == ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    assert len(written) == SAMPLE_PAIRS

    code, out, err = run_cli(capsys, "search", "--model", model, "--corpus", mrpc_file, "--columns", MRPC_COLUMNS,
                             "-k", "2", "How do I learn Python?")
    assert code == 0, err
    assert len(out.strip().splitlines()) == 2

    code, out, err = run_cli(capsys, "embed", "--model", model, "--data", mrpc_file, "--columns", MRPC_COLUMNS,
                             "--out", tmp_path / "vectors.npy")
    assert code == 0, err
    assert json.loads(out)["n"] > SAMPLE_PAIRS  # the distinct questions of both columns


@pytest.mark.parametrize("spec, problem", [
    ("question3=#1 String", "argument --columns: unknown role 'question3'; the roles are question1, question2, "
                            "is_duplicate"),
    ("question1=#1 String,question1=#2 String", "argument --columns: question1 is given twice"),
    ("question1", "argument --columns: expected ROLE=NAME pairs"),
    ("question1=", "argument --columns: question1 has no column name"),
    ("question1=Sentence 1," + MRPC_COLUMNS.split(",", 1)[1],
     "raw_test.txt: missing column(s) for question1 (mapped to 'Sentence 1'); found columns: Quality, #1 ID, "
     "#2 ID, #1 String, #2 String"),
])
def test_a_bad_columns_spec_is_one_error_line(capsys, mrpc_file, spec, problem):
    before = mrpc_file.read_bytes()
    code, out, err = run_cli(capsys, "train", "--data", mrpc_file, "--columns", spec, *TINY_LSTM)
    assert code == 2 and out == ""
    assert problem in one_error_line(err)
    assert mrpc_file.read_bytes() == before


@pytest.mark.parametrize("command", ["train", "evaluate", "score", "embed", "search"])
def test_a_data_error_names_the_file_once(capsys, tmp_path, mrpc_file, tiny_models, command):
    model = tiny_models["lstm"]
    argv = {
        "train": ["train", "--data", mrpc_file, *TINY_LSTM],
        "evaluate": ["evaluate", "--model", model, "--data", mrpc_file],
        "score": ["score", "--model", model, "--pairs", mrpc_file, "--out", tmp_path / "scored.csv"],
        "embed": ["embed", "--model", model, "--data", mrpc_file, "--out", tmp_path / "vectors.npy"],
        "search": ["search", "--model", model, "--corpus", mrpc_file, "anything"],
    }[command]
    code, out, err = run_cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and out == ""
    assert line.count("raw_test.txt") == 1, line
    assert "missing column(s) for question1, question2" in line and "#1 String" in line


def test_a_parse_error_names_the_file_once(capsys, tmp_path):
    path = tmp_path / "broken.csv"
    path.write_bytes(b"question1,question2,is_duplicate\n\"never closed,b,1\n")
    code, _, err = run_cli(capsys, "train", "--data", path, *TINY_LSTM)
    line = one_error_line(err)
    assert code == 2 and line.count("broken.csv") == 1, line


def test_missing_columns_carry_the_header():
    with pytest.raises(MissingColumnsError) as caught:
        load_pairs(b"Quality\t#1 String\t#2 String\n1\ta\tb\n")
    assert caught.value.header == ["Quality", "#1 String", "#2 String"]
    pairs, report = load_pairs(b"Quality\t#1 String\t#2 String\n1\ta\tb\n",
                               columns={"question1": "#1 String", "question2": "#2 String", "is_duplicate": "Quality"})
    assert pairs.to_dict("records") == [{"question1": "a", "question2": "b", "is_duplicate": 1}]
    assert report.columns == {"question1": "#1 String", "question2": "#2 String", "is_duplicate": "Quality"}


# ---- files without a header row -----------------------------------------------------------------------
NAMES = "question1,question2,is_duplicate"


@pytest.fixture(scope="module")
def headerless_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("headerless") / "pairs.csv"
    path.write_bytes(load_pairs(SAMPLE)[0].to_csv(index=False, header=False).encode())
    return path


def test_a_first_row_of_data_is_said_to_be_no_header():
    content = b"What is love?,What is hate?,0\nHow old are you?,What is your age?,1\n"
    with pytest.raises(NoHeaderRowError) as caught:
        load_pairs(content)
    assert str(caught.value) == ("<upload>: the file has no header row; name its columns with --names "
                                 "question1,question2,is_duplicate")
    assert caught.value.header == ["What is love?", "What is hate?", "0"]
    with pytest.raises(NoHeaderRowError, match="--names column1,question1,question2,is_duplicate$"):
        load_pairs(b"7\tWhat is a, b?\tWhat is c?\t1\n")  # an id first: the label is the last value
    with pytest.raises(MissingColumnsError) as caught:  # names, not values: the usual message
        load_pairs(b"sentence_a,sentence_b,score\nA?,B?,1\n")
    assert not isinstance(caught.value, NoHeaderRowError)


def test_names_read_a_file_without_a_header_row_from_its_first_row():
    content = b"What is love?,What is hate?,0\n,Empty?,1\nHow old are you?,What is your age?,1\n"
    pairs, report = load_pairs(content, names=["question1", "question2", "is_duplicate"])
    assert pairs.to_dict("list") == {"question1": ["What is love?", "How old are you?"],
                                     "question2": ["What is hate?", "What is your age?"], "is_duplicate": [0, 1]}
    assert report.examples == [(2, "empty question")]  # no header line: data row k is line k + 1
    assert report.names == ["question1", "question2", "is_duplicate"] and report.rows_read == 3
    # other names, mapped by --columns; a tab-separated file whose questions hold commas
    pairs, report = load_pairs(b"7\tWhat is a, b?\tWhat is c?\t1\n8\tx y\tz\t0\n", names=["id", "a", "b", "label"],
                               columns={"question1": "a", "question2": "b"})
    assert (report.delimiter, pairs["question1"].tolist(), pairs["is_duplicate"].tolist()) == (
        "\t", ["What is a, b?", "x y"], [1, 0])
    with pytest.raises(DataError, match="<upload>: 2 names given for a first row of 3 fields"):
        load_pairs(content, names=["question1", "question2"])


def test_every_command_that_reads_pairs_takes_names(capsys, tmp_path, headerless_file, tiny_models):
    model, names = tiny_models["lstm"], ["--names", NAMES]
    code, out, err = run_cli(capsys, "evaluate", "--model", model, "--data", headerless_file)
    assert code == 2 and one_error_line(err) == (
        "error: pairs.csv: the file has no header row; name its columns with --names question1,question2,is_duplicate")
    code, out, err = run_cli(capsys, "evaluate", "--model", model, "--data", headerless_file, *names)
    assert code == 0, err
    metrics = json.loads(out)
    code, out, err = run_cli(capsys, "evaluate", "--model", model, "--data", SAMPLE)
    assert json.loads(out) == metrics and metrics["n"] == SAMPLE_PAIRS  # the same pairs, the same figures
    code, _, err = run_cli(capsys, "score", "--model", model, "--pairs", headerless_file, *names,
                           "--out", tmp_path / "scored.csv")
    assert code == 0, err
    written = pd.read_csv(tmp_path / "scored.csv", keep_default_na=False)
    assert list(written.columns[:3]) == NAMES.split(",") and len(written) == SAMPLE_PAIRS
    code, out, err = run_cli(capsys, "calibrate", "--model", model, "--data", headerless_file, *names,
                             "--out", tmp_path / "calibrated")
    assert code == 0, err


def test_train_reads_data_and_validation_files_by_names(capsys, tmp_path):
    pairs = load_pairs(SAMPLE)[0]
    train, val = tmp_path / "train.csv", tmp_path / "dev.tsv"
    train.write_bytes(pairs.iloc[:400].to_csv(index=False, header=False).encode())
    val.write_bytes(pairs.iloc[400:].to_csv(index=False, header=False, sep="\t").encode())
    code, out, err = run_cli(capsys, "train", "--data", train, "--val", val, "--names", NAMES,
                             "--out", tmp_path / "model", *TINY_LSTM)
    assert code == 0, err
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert (config["data"]["train_pairs"], config["data"]["val_pairs"]) == (400, SAMPLE_PAIRS - 400)
    # the split it really made: the validation file given, nothing held out of --data
    assert (config["run"]["val_fraction"], config["run"]["split_by"], config["data"]["val_name"]) == (0, "none",
                                                                                                      "dev.tsv")


@pytest.mark.parametrize("spec, problem", [
    ("question1,,is_duplicate", "expected column names separated by commas"),
    ("a,b,a", "a is given twice"),
])
def test_a_bad_names_spec_is_one_error_line(capsys, headerless_file, spec, problem):
    code, out, err = run_cli(capsys, "train", "--data", headerless_file, "--names", spec, *TINY_LSTM)
    assert code == 2 and out == "" and problem in one_error_line(err)


# ---- the Data page ------------------------------------------------------------------------------------
def test_the_data_page_asks_for_the_columns_and_keeps_the_choice(runs_root, sample_pairs):
    at = open_page(DATA.path)
    content = mrpc_like(sample_pairs[0])
    at.file_uploader(key="upload").set_value(("raw_test.txt", content, "text/plain")).run()
    assert not at.exception
    assert not at.error  # nothing is wrong yet: the page asks
    [prompt] = at.info
    assert prompt.value.startswith("To read raw_test.txt, its columns are not named as this page expects")
    assert prompt.value.endswith("Until then the active dataset stays bundled sample (assets/sample_pairs.csv).")
    assert at.session_state.data_name != "raw_test.txt (upload)"  # the previous dataset stays until a choice

    options = at.selectbox(key="column_for_question1").options
    assert options == ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    at.selectbox(key="column_for_question1").set_value("#1 String")
    at.selectbox(key="column_for_question2").set_value("#2 String")
    at.selectbox(key="column_for_is_duplicate").set_value("Quality")
    at.button(key="load_with_columns").click().run()
    assert not at.exception and not at.error
    assert at.session_state.data_name == "raw_test.txt (upload)"
    assert len(at.session_state.pairs) == SAMPLE_PAIRS
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])
    assert {metric.label: metric.value for metric in at.metric}["Pairs"] == f"{SAMPLE_PAIRS:,}"
    assert not [box for box in at.selectbox if box.key == "column_for_question1"]  # the picker is done
    assert at.session_state.column_choices["raw_test.txt"] == {
        "question1": "#1 String", "question2": "#2 String", "is_duplicate": "Quality"}

    # The choice stays for the session: the sample, then the same file again, loads at once.
    at.button(key="use_sample").click().run()
    assert len(at.session_state.pairs) == SAMPLE_PAIRS and at.session_state.data_name != "raw_test.txt (upload)"
    [uploader] = at.file_uploader  # its key changes when the sample is chosen (the uploader is cleared)
    uploader.set_value(("raw_test.txt", content + b"1\t0\t1\tA?\tB?\n", "text/plain")).run()
    assert not at.exception and not at.error
    assert at.session_state.data_name == "raw_test.txt (upload)"
    assert len(at.session_state.pairs) == SAMPLE_PAIRS + 1


def test_the_data_page_reads_a_file_without_a_header_row(runs_root, sample_pairs):
    at = open_page(DATA.path)
    content = sample_pairs[0].to_csv(index=False, header=False).encode()
    at.file_uploader(key="upload").set_value(("pairs.csv", content, "text/csv")).run()
    assert not at.exception and not at.error
    [prompt] = at.info
    assert prompt.value.startswith("To read pairs.csv, it has no header row: its first row is data (")
    assert at.checkbox(key="first_row_is_data").value  # found, and said
    first = sample_pairs[0].iloc[0]
    assert at.selectbox(key="column_for_question1_of_data").options == [
        f"question1: {clip(first['question1'])}", f"question2: {clip(first['question2'])}",
        f"is_duplicate: {first['is_duplicate']}"]
    at.button(key="load_with_columns").click().run()
    assert not at.exception and not at.error
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])  # the first row kept as data
    assert at.session_state.data_report.names == ["question1", "question2", "is_duplicate"]
    assert any("no header row: its first row is data" in caption.value for caption in at.caption)

    # a validation file read like the dataset: without a header row too, or with its own header
    at.toggle(key="held_out_files_on").set_value(True).run()
    for rows, header in ((slice(0, 5), False), (slice(5, 8), True)):
        [uploader] = [box for box in at.get("file_uploader") if box.label == "Validation pairs"]
        held_out = sample_pairs[0].iloc[rows].to_csv(index=False, header=header).encode()
        at.file_uploader(key=uploader.key).set_value((f"val{rows.start}.csv", held_out, "text/csv")).run()
        assert not at.exception and not at.error
        pd.testing.assert_frame_equal(at.session_state.held_out_files["val"][0],
                                      sample_pairs[0].iloc[rows].reset_index(drop=True))
    again = open_page(DATA.path)  # a new session of the workspace reads the kept upload by its names
    assert not again.exception and again.session_state.data_report.names == ["question1", "question2", "is_duplicate"]
    pd.testing.assert_frame_equal(again.session_state.pairs, sample_pairs[0])


def test_the_data_page_reads_a_first_row_it_took_for_names_as_data(runs_root):
    at = open_page(DATA.path)
    content = b"apple pie,banana,cherry\nWhat is a pie?,What is a tart?,1\nHow old?,What age?,0\n"
    at.file_uploader(key="upload").set_value(("fruit.csv", content, "text/csv")).run()
    assert not at.exception and not at.error
    assert not at.checkbox(key="first_row_is_data").value  # names, to all appearances
    at.checkbox(key="first_row_is_data").check().run()
    assert at.selectbox(key="column_for_question1_of_data").options == [
        "question1: apple pie", "question2: banana", "column3: cherry"]  # named from the first row's values
    at.selectbox(key="column_for_is_duplicate_of_data").set_value("column3")
    at.button(key="load_with_columns").click().run()
    assert not at.exception and not at.error
    assert at.session_state.pairs["question1"].tolist() == ["What is a pie?", "How old?"]  # "cherry": no label
    assert at.session_state.data_report.dropped == {"unreadable label": 1}
