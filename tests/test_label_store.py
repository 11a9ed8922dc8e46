"""core.saving.label_store: labels appended whole, never doubled, undone atomically, read back as pairs."""
from __future__ import annotations

import csv
import io
import multiprocessing
import os
import signal
import time

import pytest

from core.data import DataError, load_pairs
from core.saving.label_store import (
    LABEL_COLUMNS,
    LabelStore,
    escape_cell,
    unescape_cell,
)
from core.saving.safe_csv import FORMULA_STARTS, is_formula

HEADER = "question1,question2,is_duplicate,labelled_by,labelled_at\r\n"


def rows_of(path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


def test_add_writes_the_header_once_and_one_row_per_label(tmp_path):
    path = tmp_path / "labels.csv"
    store = LabelStore(path)
    assert len(store) == 0 and not path.exists()  # nothing is created before the first label
    assert store.add("How old are you?", "What is your age?", 1, labelled_by="ann")
    assert store.add("Why?", "How?", False)
    assert path.read_bytes().decode("utf-8").startswith(HEADER)
    rows = rows_of(path)
    assert rows[0] == list(LABEL_COLUMNS) and len(rows) == 3
    assert rows[1][:4] == ["How old are you?", "What is your age?", "1", "ann"] and rows[2][:4] == ["Why?", "How?", "0", ""]
    assert rows[1][4].endswith("+00:00")  # when, in UTC
    frame = store.pairs()
    assert frame.columns.tolist() == list(LABEL_COLUMNS) and frame["is_duplicate"].tolist() == [1, 0]
    assert len(store) == 2 and store.keys() == {("how old are you?", "what is your age?"), ("how?", "why?")}


def test_a_pair_already_labelled_is_not_added_again(tmp_path):
    store = LabelStore(tmp_path / "labels.csv")
    assert store.add("How old are you?", "What is your age?", 1)
    assert not store.add("what is your  age?", " How OLD are you?", 0)  # either order, any case or spacing
    other = LabelStore(tmp_path / "labels.csv")  # a second tab: sees the first's label
    assert not other.add("How old are you?", "What is your age?", 0)
    assert ("WHAT is your age?", "how old are you?") in other
    assert len(rows_of(tmp_path / "labels.csv")) == 2
    with pytest.raises(ValueError, match="itself"):
        store.add("Why?", "why? ", 1)
    with pytest.raises(ValueError, match="0 or 1"):
        store.add("a", "b", 2)
    with pytest.raises(ValueError, match="non-empty"):
        store.add(" ", "b", 1)


def test_undo_removes_the_last_label_or_the_last_of_one_labeller(tmp_path):
    path = tmp_path / "labels.csv"
    store, other = LabelStore(path), LabelStore(path)
    for i, who in enumerate(["ann", "bob", "ann", "bob"]):
        assert store.add(f"q{i}", f"p{i}", i % 2, labelled_by=who)
    assert other.undo_last("ann")["question1"] == "q2"
    assert store.undo_last()["question1"] == "q3"  # the last of anyone, once ann's q2 is gone
    assert store.pairs()["question1"].tolist() == ["q0", "q1"]
    assert other.undo_last("carl") is None
    assert store.add("q2", "p2", 1)  # an undone pair may be labelled again
    assert [row[0] for row in rows_of(path)] == ["question1", "q0", "q1", "q2"]
    assert not [name for name in os.listdir(tmp_path) if "siamese-tmp" in name]
    assert LabelStore(tmp_path / "none.csv").undo_last() is None


def test_a_store_sees_another_rewrite_the_file_even_when_its_inode_and_size_come_back(tmp_path):
    path = tmp_path / "labels.csv"
    mine, theirs = LabelStore(path), LabelStore(path)
    for i in range(3):
        mine.add(f"q{i}", f"p{i}", 1)
    assert len(mine) == 3
    theirs.undo_last()
    theirs.undo_last()
    theirs.add("q8", "p8", 1)  # as long as the row it replaces; a rewrite may reuse the freed inode
    theirs.add("q9", "p9", 1)
    assert mine.pairs()["question1"].tolist() == ["q0", "q8", "q9"]
    assert mine.add("q1", "p1", 0)  # undone, so new again


def test_undo_returns_the_label_it_removed(tmp_path):
    store = LabelStore(tmp_path / "labels.csv")
    store.add("a?", "b?", 1, labelled_by="ann")
    removed = store.undo_last()
    assert removed["question1"] == "a?" and removed["question2"] == "b?" and removed["is_duplicate"] == 1
    assert removed["labelled_by"] == "ann" and len(store) == 0 and rows_of(tmp_path / "labels.csv") == [list(LABEL_COLUMNS)]


def test_text_is_formula_safe_and_read_back_exactly(tmp_path):
    path = tmp_path / "labels.csv"
    store = LabelStore(path)
    texts = ["=HYPERLINK(\"http://x\")", "+1 what?", "@home how?", "'=1+1", "-2", "a, \"quoted\"\nline"]
    for i, text in enumerate(texts):
        assert store.add(text, f"other {i}", 1, labelled_by="=cmd|' /C calc'!A0")
    for row in rows_of(path)[1:]:
        assert not is_formula(row[0]) and not row[3].startswith(FORMULA_STARTS)
    assert LabelStore(path).pairs()["question1"].tolist() == texts
    assert set(LabelStore(path).pairs()["labelled_by"]) == {"=cmd|' /C calc'!A0"}
    assert rows_of(path)[4][0] == "''=1+1" and rows_of(path)[5][0] == "-2"  # a plain number stays a number
    for text in texts + ["'", "''+x", "'plain", "plain"]:
        assert unescape_cell(escape_cell(text)) == text


def test_core_data_reads_a_labels_file_as_pairs(tmp_path):
    path = tmp_path / "labels.csv"
    store = LabelStore(path)
    store.add("How old are you?", "What is your age?", 1, labelled_by="ann")
    store.add("Why?", "How?", 0)
    pairs, report = load_pairs(path)
    assert pairs.values.tolist() == [["How old are you?", "What is your age?", 1], ["Why?", "How?", 0]]
    assert report.rows_kept == 2


def test_a_plain_pairs_file_is_accepted_and_grows_by_three_columns(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("question1,question2,is_duplicate\na?,b?,1\nc?,d?,false", encoding="utf-8")  # no final line end
    store = LabelStore(path)
    assert len(store) == 2 and store.pairs()["is_duplicate"].tolist() == [1, 0]
    assert store.pairs()["labelled_by"].tolist() == ["", ""]
    assert store.add("e?", "f?", 1, labelled_by="ann")
    assert rows_of(path) == [["question1", "question2", "is_duplicate"], ["a?", "b?", "1"], ["c?", "d?", "false"],
                             ["e?", "f?", "1"]]
    assert len(load_pairs(path)[0]) == 3


@pytest.mark.parametrize("header", ["q1,q2,label\n", "question1,question2,is_duplicate,note\n", "question\n"])
def test_a_file_with_other_columns_is_one_error_naming_it(tmp_path, header):
    path = tmp_path / "mine.csv"
    path.write_text(header + "a,b,1\n", encoding="utf-8")
    with pytest.raises(DataError) as error:
        LabelStore(path).add("x", "y", 1)
    message = str(error.value)
    assert str(path) in message and "not a labels file" in message and "\n" not in message
    assert path.read_text(encoding="utf-8") == header + "a,b,1\n"  # untouched


def test_a_row_cut_short_by_a_crash_is_dropped_by_the_next_add(tmp_path):
    path = tmp_path / "labels.csv"
    store = LabelStore(path)
    store.add("a?", "b?", 1)
    whole = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'c?,"d')  # a power cut in the middle of a row
    reader = LabelStore(path)
    assert len(reader) == 1  # the torn row is not a label
    assert reader.add("c?", "d?", 0)
    assert path.read_bytes().startswith(whole) and [r[0] for r in rows_of(path)] == ["question1", "a?", "c?"]


def _add_many(path, worker: int, shared: int, own: int) -> None:
    store = LabelStore(path)
    for i in range(max(shared, own)):
        if i < shared:
            store.add(f"shared {i}", f"pair {i}", i % 2, labelled_by=f"w{worker}")
        if i < own:
            store.add(f"worker {worker} q{i}", f"answer {i}", 1, labelled_by=f"w{worker}")


def test_processes_appending_at_once_give_every_label_once(tmp_path):
    path = tmp_path / "labels.csv"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_many, args=(path, w, 30, 20)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    pairs, report = load_pairs(path)
    assert report.rows_kept == report.rows_read == 30 + 4 * 20
    expected = {(f"shared {i}", f"pair {i}") for i in range(30)}
    expected |= {(f"worker {w} q{i}", f"answer {i}") for w in range(4) for i in range(20)}
    assert set(zip(pairs["question1"], pairs["question2"])) == expected
    assert len(LabelStore(path)) == 110


def _add_forever(path) -> None:
    store = LabelStore(path)
    i = 0
    while True:
        store.add(f"question number {i} " + "x" * (i % 300), f"answer {i}", i % 2, labelled_by="loop")
        i += 1


def test_a_kill_at_any_moment_leaves_only_whole_rows(tmp_path):
    path = tmp_path / "labels.csv"
    context = multiprocessing.get_context("fork")
    for delay in (0.3, 0.45, 0.6):
        writer = context.Process(target=_add_forever, args=(path,))
        writer.start()
        time.sleep(delay)
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
        data = path.read_bytes()
        assert data.endswith(b"\r\n")
        pairs, report = load_pairs(path)
        assert report.rows_kept == report.rows_read == len(LabelStore(path)) > 0
        numbers = sorted(int(q.split()[2]) for q in pairs["question1"])
        assert numbers == list(range(len(numbers)))  # whole rows, each once, none missing before the last
