"""``score`` keeps every input column: one already called ``similarity`` or ``predicted_duplicate`` stays as the
user wrote it, and the output takes the next free ``<name>_1``, ``<name>_2``, ... with one ``note:`` line."""
import csv

from core.cli.main import main
from core.inference.scoring import OUTPUT_COLUMNS, output_names, renamed_note


def scored(source, out, capsys) -> tuple[list[dict], str]:
    """The rows ``score`` wrote for ``source`` with the TF-IDF baseline, and what it said on stderr."""
    assert main(["score", "--model", "tfidf", "--pairs", str(source), "--out", str(out), "--threshold", "0.5"]) == 0
    err = capsys.readouterr().err
    with out.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle)), err


def test_output_names_take_the_next_free_number():
    assert output_names(["question1", "question2"]) == {name: name for name in OUTPUT_COLUMNS}
    assert output_names(["question1", "similarity", "similarity_1", "predicted_duplicate"]) == {
        "similarity": "similarity_2", "predicted_duplicate": "predicted_duplicate_1"}
    assert renamed_note(output_names(["question1"])) is None


def test_names_equal_but_for_case_or_surrounding_spaces_collide():
    assert output_names(["question1", "Predicted_Duplicate", " SIMILARITY ", "similarity_1"]) == {
        "similarity": "similarity_2", "predicted_duplicate": "predicted_duplicate_1"}
    assert output_names(["Similarity_1 ", "similarity"]) == {"similarity": "similarity_2",
                                                             "predicted_duplicate": "predicted_duplicate"}


def test_score_keeps_a_column_named_so_in_another_case_or_with_spaces(tmp_path, capsys):
    """A spreadsheet's reader cannot tell ``similarity `` or ``Predicted_Duplicate`` from the scores' own columns."""
    source, out = tmp_path / "pairs.csv", tmp_path / "scored.csv"
    source.write_text("question1,question2,Predicted_Duplicate,similarity \n"
                      "How old are you?,How old are you now?,mine,mine too\n", encoding="utf-8")
    rows, err = scored(source, out, capsys)
    assert list(rows[0]) == ["question1", "question2", "Predicted_Duplicate", "similarity ", "similarity_1",
                             "predicted_duplicate_1"]
    assert rows[0]["Predicted_Duplicate"] == "mine" and rows[0]["similarity "] == "mine too"
    assert rows[0]["predicted_duplicate_1"] == "1" and float(rows[0]["similarity_1"]) > 0.5
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert notes == ["note: the scores are written as 'similarity_1' (the input's own 'similarity ' is kept) and "
                     "'predicted_duplicate_1' (the input's own 'Predicted_Duplicate' is kept)"], err


def test_score_keeps_the_users_similarity_column(tmp_path, capsys):
    source, out = tmp_path / "pairs.csv", tmp_path / "scored.csv"
    source.write_text("question1,question2,similarity,predicted_duplicate,is_duplicate\n"
                      "How old are you?,How old are you now?,my own,kept too,1\n"
                      "What is Python?,How do I cook rice?,also mine,x,0\n", encoding="utf-8")
    rows, err = scored(source, out, capsys)
    assert list(rows[0]) == ["question1", "question2", "similarity", "predicted_duplicate", "is_duplicate",
                             "similarity_1", "predicted_duplicate_1"]
    assert [row["similarity"] for row in rows] == ["my own", "also mine"]  # the input's values, untouched
    assert [row["predicted_duplicate"] for row in rows] == ["kept too", "x"]
    assert float(rows[0]["similarity_1"]) > float(rows[1]["similarity_1"])
    assert [row["predicted_duplicate_1"] for row in rows] == ["1", "0"]
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "'similarity_1'" in notes[0] and "'predicted_duplicate_1'" in notes[0]


def test_score_without_such_columns_prints_no_note(tmp_path, capsys):
    source, out = tmp_path / "pairs.csv", tmp_path / "scored.csv"
    source.write_text("question1,question2\nHow old are you?,What is your age?\n", encoding="utf-8")
    assert main(["score", "--model", "tfidf", "--pairs", str(source), "--out", str(out)]) == 0
    assert "note:" not in capsys.readouterr().err
    assert out.read_text(encoding="utf-8").splitlines()[0] == "question1,question2,similarity,predicted_duplicate"
