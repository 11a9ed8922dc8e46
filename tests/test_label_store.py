"""core.saving.label_store: one label per pair in SQLite, the later answer winning, undo and corrections kept in the
history, bounded fields refused in one line, labels out and back in as a pairs CSV, the CSV of before imported."""
from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.data import DataError, load_pairs
from core.data.questions import pair_key
from core.saving.label_store import (
    LABEL_COLUMNS,
    MAX_QUESTION_CHARS,
    PAIR_COLUMNS,
    Label,
    LabelStore,
    MergeCounts,
    escape_cell,
    is_label_database,
    pair_bucket,
    read_labels_csv,
    unescape_cell,
)
from core.saving.safe_csv import is_formula

LEGACY_HEADER = "question1,question2,is_duplicate,labelled_by,labelled_at\r\n"


def rows_in(path) -> list[tuple]:
    """The ``labels`` table as SQLite holds it, read without the store: (question1, question2, is_duplicate)."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.question1, a.question2, a.is_duplicate FROM labels AS l JOIN answers AS a "
                          "ON a.id = l.answer_id ORDER BY l.answer_id").fetchall()


def answers_in(path, question1: str, question2: str) -> pd.DataFrame:
    """Every answer the ``answers`` table holds for the pair, the first first, read without the store:
    is_duplicate, labelled_at and undone_at (None if not undone)."""
    with sqlite3.connect(path) as db:
        return pd.read_sql_query("SELECT is_duplicate, labelled_at, undone_at FROM answers WHERE key1 = ? AND key2 = ? "
                                 "ORDER BY id", db, params=pair_key(question1, question2))


def test_answers_are_stored_in_order_with_who_and_when(tmp_path):
    path = tmp_path / "labels.sqlite3"
    store = LabelStore(path)
    assert len(store) == 0 and store.pairs().empty and not path.exists()  # nothing is created before an answer
    assert store.add("How old are you?", "What is your age?", 1, labelled_by="ann") is None
    assert store.add("Why?", "How?", False) is None
    assert is_label_database(path) and rows_in(path) == [("How old are you?", "What is your age?", 1),
                                                         ("Why?", "How?", 0)]
    frame = store.pairs()
    assert frame.columns.tolist() == list(LABEL_COLUMNS) and frame["is_duplicate"].tolist() == [1, 0]
    assert frame["labelled_by"].tolist() == ["ann", ""] and frame["labelled_at"][0].endswith("+00:00")
    assert len(store) == 2 and store.labelled_among([("how old are you?", "what is your age?"), ("how?", "why?"),
                                                     ("when?", "why?")]) == {("how old are you?", "what is your age?"),
                                                                             ("how?", "why?")}
    assert store.label_of("WHAT is your age?", "how old are you?") and store.label_of("Why?", "When?") is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_second_answer_to_a_pair_replaces_the_first_and_says_what_it_was(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite3")
    store.add("How old are you?", "What is your age?", 1, labelled_by="ann")
    previous = store.add("what is your  age?", " How OLD are you?", 0, labelled_by="bob")  # either order, any case
    assert previous == Label("How old are you?", "What is your age?", 1, "ann", previous.labelled_at)
    assert len(store) == 1 and store.pairs()[["question1", "is_duplicate", "labelled_by"]].values.tolist() == [
        ["what is your  age?", 0, "bob"]]
    history = answers_in(tmp_path / "labels.sqlite3", "How old are you?", "What is your age?")
    assert history["is_duplicate"].tolist() == [1, 0] and history["undone_at"].isna().all()


@pytest.mark.parametrize("question1, question2, label, message", [
    ("Why?", "why? ", 1, "itself"),
    ("a", "b", 2, "0 or 1"),
    ("a", "b", "1", "0 or 1"),
    (" ", "b", 1, "non-empty"),
])
def test_an_answer_that_cannot_be_stored_is_one_line_and_writes_nothing(tmp_path, question1, question2, label, message):
    store = LabelStore(tmp_path / "labels.sqlite3")
    store.add("kept?", "here?", 1)
    with pytest.raises(DataError, match=message) as error:
        store.add(question1, question2, label)
    assert "\n" not in str(error.value) and len(store) == 1


def test_a_question_of_a_million_characters_is_refused_in_one_line_and_the_store_still_works(tmp_path):
    path = tmp_path / "labels.sqlite3"
    store = LabelStore(path)
    store.add("before?", "it?", 0)
    for size in (1_000_000, 131_073, MAX_QUESTION_CHARS + 1):
        with pytest.raises(DataError) as error:
            store.add("x" * size, "short?", 1)
        message = str(error.value)
        assert "\n" not in message and f"{size:,} characters" in message and f"{MAX_QUESTION_CHARS:,}" in message
    longest = "y" * MAX_QUESTION_CHARS
    assert store.add(longest, "short?", 1) is None  # the limit itself is kept, whole
    assert store.add("after?", "it?", 1) is None
    assert LabelStore(path).pairs()["question1"].tolist() == ["before?", longest, "after?"]
    with sqlite3.connect(path) as db:  # the schema refuses it too, whoever writes
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            db.execute("INSERT INTO answers (key1, key2, question1, question2, is_duplicate, labelled_by, "
                       "labelled_at) VALUES ('a', 'b', ?, 'b', 1, '', 'now')", ("z" * 1_000_000,))


def test_undo_takes_back_the_last_answer_and_brings_back_the_one_it_replaced(tmp_path):
    path = tmp_path / "labels.sqlite3"
    store, other = LabelStore(path), LabelStore(path)
    for i, who in enumerate(["ann", "bob", "ann", "bob"]):
        store.add(f"q{i}", f"p{i}", i % 2, labelled_by=who)
    assert other.undo_last("ann").question1 == "q2"
    assert store.undo_last().question1 == "q3"  # the last of anyone, once ann's q2 is gone
    assert store.pairs()["question1"].tolist() == ["q0", "q1"]
    assert other.undo_last("carl") is None and LabelStore(tmp_path / "none.sqlite3").undo_last() is None
    store.add("q0", "p0", 1, labelled_by="ann")  # a correction of q0 (it was 0)
    assert store.pairs()["is_duplicate"].tolist() == [1, 1] and store.pairs()["question1"].tolist() == ["q1", "q0"]
    assert store.undo_last("ann") == Label("q0", "p0", 1, "ann", answers_in(path, "q0", "p0")["labelled_at"][1])
    assert store.label_of("q0", "p0").is_duplicate == 0  # the answer it corrected is the label again
    assert store.pairs()["question1"].tolist() == ["q0", "q1"]  # in its first place
    assert answers_in(path, "q0", "p0")["undone_at"].notna().tolist() == [False, True]  # the database keeps both
    assert store.add("q2", "p2", 1) is None  # an undone pair is new again
    assert rows_in(path) == [("q0", "p0", 0), ("q1", "p1", 1), ("q2", "p2", 1)]


def test_two_writers_answering_one_pair_differently_leave_one_row_with_the_later_answer(tmp_path):
    path = tmp_path / "labels.sqlite3"
    first_tab, second_tab = LabelStore(path), LabelStore(path)
    assert first_tab.add("Is tea healthy?", "Is drinking tea good for you?", 1, labelled_by="tab-1") is None
    replaced = second_tab.add("is drinking tea good for you?", "Is tea healthy?", 0, labelled_by="tab-2")
    assert replaced.is_duplicate == 1 and replaced.labelled_by == "tab-1"  # the later writer is told
    assert len(first_tab) == len(second_tab) == 1 and rows_in(path) == [
        ("is drinking tea good for you?", "Is tea healthy?", 0)]
    assert first_tab.label_of("Is tea healthy?", "Is drinking tea good for you?").labelled_by == "tab-2"
    assert first_tab.undo_last("tab-1") is None  # its answer is no longer the label: nothing of it to take back


def _answer_many(path, worker: int, shared: int, own: int) -> None:
    store = LabelStore(path)
    for i in range(max(shared, own)):
        if i < shared:
            store.add(f"shared {i}", f"pair {i}", worker % 2, labelled_by=f"w{worker}")
        if i < own:
            store.add(f"worker {worker} q{i}", f"answer {i}", 1, labelled_by=f"w{worker}")


def test_processes_answering_at_once_give_one_label_per_pair(tmp_path):
    path = tmp_path / "labels.sqlite3"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_answer_many, args=(path, w, 30, 20)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    pairs = LabelStore(path).pairs()
    expected = {(f"shared {i}", f"pair {i}") for i in range(30)}
    expected |= {(f"worker {w} q{i}", f"answer {i}") for w in range(4) for i in range(20)}
    assert len(pairs) == 110 and set(zip(pairs["question1"], pairs["question2"])) == expected
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM answers").fetchone()[0] == 4 * 30 + 4 * 20  # every answer kept
        for i in (0, 29):  # each shared pair's label is the answer written last
            last = db.execute("SELECT is_duplicate FROM answers WHERE question1 = ? ORDER BY id DESC LIMIT 1",
                              (f"shared {i}",)).fetchone()[0]
            assert LabelStore(path).label_of(f"shared {i}", f"pair {i}").is_duplicate == last


def test_two_tabs_giving_the_first_answers_to_a_new_store_at_the_same_moment_both_keep_theirs(tmp_path):
    lost, errors = [], []

    def answer(path, start, tab):
        start.wait()
        try:
            LabelStore(path).add(f"question of {tab}", f"answer of {tab}", 1, labelled_by=tab)
        except DataError as error:  # the schema seen half made, or the switch to WAL met the other tab's
            errors.append(str(error))

    for attempt in range(100):
        path, start = tmp_path / f"labels{attempt}.sqlite3", threading.Barrier(2)
        tabs = [threading.Thread(target=answer, args=(path, start, tab)) for tab in ("tab-1", "tab-2")]
        for tab in tabs:
            tab.start()
        for tab in tabs:
            tab.join()
        lost += [attempt] if len(LabelStore(path)) != 2 else []
    assert errors == [] and lost == []


def _answer_forever(path) -> None:
    store = LabelStore(path)
    i = 0
    while True:
        store.add(f"question number {i} " + "x" * (i % 300), f"answer {i}", i % 2, labelled_by="loop")
        i += 1


@pytest.mark.slow
def test_a_kill_at_any_moment_leaves_every_answer_whole_once(tmp_path):
    path = tmp_path / "labels.sqlite3"
    context = multiprocessing.get_context("fork")
    for delay in (0.3, 0.45, 0.6):
        writer = context.Process(target=_answer_forever, args=(path,))
        writer.start()
        time.sleep(delay)
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
        pairs = LabelStore(path).pairs()
        numbers = sorted(int(q.split()[2]) for q in pairs["question1"])
        assert len(numbers) > 0 and numbers == list(range(len(numbers)))  # whole answers, each once, none missing
        assert pairs["is_duplicate"].tolist() == [int(q.split()[2]) % 2 for q in pairs["question1"]]


def test_the_export_is_a_pairs_file_and_a_hand_edited_copy_merges_back_without_loss_or_doubles(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite3")
    texts = ["=HYPERLINK(\"http://x\")", "+1 what?", "'=1+1", "-2", "a, \"quoted\"\nline", "plain?"]
    for i, text in enumerate(texts):
        store.add(text, f"other {i}", i % 2, labelled_by="ann")
    exported = store.export_csv()
    lines = exported.decode("utf-8").split("\r\n")
    assert lines[0] == "question1,question2,is_duplicate,labelled_by,labelled_at"  # the pairs file, who and when
    assert lines[1].startswith("\"'=HYPERLINK") and lines[1].split(",")[-2] == "ann"
    pairs, report = load_pairs(exported)  # what the Data and Train pages read
    assert report.rows_kept == 6 and not any(is_formula(text) for text in pairs["question1"])
    # By hand: one label flipped, a row added, a row with only its spacing changed, and the file re-sorted.
    edited = read_labels_csv(exported)
    edited.loc[1, "is_duplicate"] = 1 - edited.loc[1, "is_duplicate"]
    edited.loc[5, "question1"] = "  PLAIN? "
    edited.loc[6] = ["A new question?", "Another one?", 1]
    assert store.merge(edited.iloc[::-1], labelled_by="bob") == MergeCounts(added=1, changed=1, unchanged=5)
    after = store.pairs()
    assert len(after) == 7 and len(store) == 7
    assert after["question1"].tolist() == [texts[0], *texts[2:], "A new question?", "+1 what?"]  # new answers last
    assert {q: y for q, y in zip(after["question1"], after["is_duplicate"])} == {
        **{text: i % 2 for i, text in enumerate(texts)}, "+1 what?": 0, "A new question?": 1}
    assert store.merge(read_labels_csv(store.export_csv())) == MergeCounts(0, 0, 7)  # a round trip changes nothing


def test_a_merge_with_one_bad_row_adds_nothing_and_names_the_row(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite3")
    store.add("kept?", "here?", 1)
    upload = (f"question1,question2,is_duplicate\r\nnew?,one?,1\r\n{'w' * 1_000_000},long?,0\r\n").encode()
    with pytest.raises(DataError, match=r"^row 2: question1 has 1,000,000 characters") as error:
        store.merge(read_labels_csv(upload))
    assert "\n" not in str(error.value) and store.pairs()["question1"].tolist() == ["kept?"]


def test_another_file_at_the_path_is_one_line_and_left_as_it_is(tmp_path):
    text = tmp_path / "text.sqlite3"
    text.write_text("question1,question2,is_duplicate\na,b,1\n", encoding="utf-8")
    for call in (lambda store: store.pairs(), lambda store: store.add("c?", "d?", 0)):
        with pytest.raises(DataError, match="not a database") as error:
            call(LabelStore(text))
        assert "\n" not in str(error.value) and str(tmp_path) not in str(error.value)  # no server path
    assert text.read_text(encoding="utf-8").startswith("question1")


def test_an_sqlite_database_of_something_else_is_refused_and_left_byte_for_byte(tmp_path):
    import hashlib

    notes, other = tmp_path / "notes.sqlite3", tmp_path / "other.sqlite3"
    with sqlite3.connect(notes) as db:
        db.execute("CREATE TABLE notes (x)")
        db.execute("INSERT INTO notes VALUES ('keep')")
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE labels (a, b)")  # a table of the lab's name, another schema
    for path in (notes, other):
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        for call in (lambda store: store.pairs(), lambda store: store.add("c?", "d?", 0)):
            with pytest.raises(DataError, match="an SQLite database of something else"):
                call(LabelStore(path))
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(path.name)) == [path.name]  # no -wal
    empty = tmp_path / "empty.sqlite3"
    empty.touch()  # an empty file is a new database: the lab's to make
    LabelStore(empty).add("a?", "b?", 1)
    assert len(LabelStore(empty)) == 1


def test_cells_a_spreadsheet_would_run_are_quoted_and_read_back_exactly():
    for text in ["=1+1", "+1 what?", "@home how?", "'=1+1", "-2", "'", "''+x", "'plain", "plain"]:
        assert unescape_cell(escape_cell(text)) == text
        assert not is_formula(escape_cell(text))
    assert escape_cell("-2") == "-2" and escape_cell("'=1+1") == "''=1+1"


def test_a_read_only_database_is_read_with_its_bytes_unchanged(tmp_path):
    import hashlib

    folder = tmp_path / "kept"
    path = folder / "labels.sqlite3"
    store = LabelStore(path)
    store.add("a?", "b?", 1, labelled_by="ann")
    store.add("c?", "d?", 0, labelled_by="bob")
    with sqlite3.connect(path) as db:  # as a backup tool leaves it: a rollback-journal file, which a write would
        db.execute("PRAGMA journal_mode = DELETE")  # turn back to WAL (its header rewritten)
    before, names = hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(folder))
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        reader = LabelStore(path)
        assert reader.pairs()[["question1", "is_duplicate"]].values.tolist() == [["a?", 1], ["c?", 0]]
        assert len(reader) == 2 and reader.recent(1, labelled_by="ann")[0].question1 == "a?"
        assert reader.labelled_among([("a?", "b?"), ("x?", "y?")]) == {("a?", "b?")}
        assert sum(reader.bucket_counts().values()) == 2 and reader.label_of("c?", "d?")
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before and sorted(os.listdir(folder)) == names
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)


def test_a_reader_beside_a_long_write_returns_the_committed_labels_without_waiting(tmp_path):
    path = tmp_path / "labels.sqlite3"
    LabelStore(path).add("committed?", "yes?", 1)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write, its rows not committed
    writer.execute("INSERT INTO answers (key1, key2, question1, question2, is_duplicate, labelled_by, labelled_at) "
                   "VALUES ('p?', 'q?', 'p?', 'q?', 1, '', 'now')")
    try:
        reader = LabelStore(path)
        assert reader.pairs()["question1"].tolist() == ["committed?"] and len(reader) == 1
        assert reader.recent(5)[0].question1 == "committed?" and sum(reader.bucket_counts().values()) == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def counted_by_hand(store: LabelStore) -> Counter:
    """(pair_bucket, is_duplicate) -> labels, from the whole table."""
    return Counter((pair_bucket(*pair_key(q1, q2)), y) for q1, q2, y in store.pairs()[list(PAIR_COLUMNS)].values)


def test_a_database_of_the_first_schema_is_read_as_it_is_and_upgraded_by_the_first_write(tmp_path):
    from core.saving import label_store
    from core.training.active_rounds import held_out_mask

    path = tmp_path / "labels.sqlite3"
    with sqlite3.connect(path) as db:  # what the lab wrote before labels carried their bucket
        db.executescript(label_store._SCHEMA_1 + "PRAGMA user_version = 1; PRAGMA journal_mode = WAL;")
        for i in range(40):
            q1, q2 = f"Question {i}?", f"other {i}?"
            db.execute("INSERT INTO answers (key1, key2, question1, question2, is_duplicate, labelled_by, labelled_at) "
                       "VALUES (?, ?, ?, ?, ?, '', 'then')", (*pair_key(q1, q2), q1, q2, i % 2))
            db.execute("INSERT INTO labels VALUES (?, ?, ?)", (*pair_key(q1, q2), i + 1))
    old = LabelStore(path)
    counts = old.bucket_counts()
    assert counts == counted_by_hand(old) and sum(counts.values()) == 40
    assert sum(n for (bucket, _), n in counts.items() if bucket < 20) == held_out_mask(old.pairs()).sum()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # the reads left it as it was
    old.add("new?", "pair?", 1)
    old.add("other 3?", "question 3?", 0)  # a correction moves its pair to the other class
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == label_store.SCHEMA_VERSION
    assert old.bucket_counts() == counted_by_hand(old) and sum(old.bucket_counts().values()) == 41
    old.undo_last()
    old.undo_last()
    assert old.bucket_counts() == counts == counted_by_hand(LabelStore(path))


def test_the_labels_between_given_questions_and_the_keys_asked_about_are_those_of_the_whole_table(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite3")
    store.merge(pd.DataFrame({"question1": [f"Q{i}?" for i in range(1000)],
                              "question2": [f"r{i}?" for i in range(1000)],
                              "is_duplicate": [int(i % 3 == 0) for i in range(1000)]}))
    store.undo_last()  # the label of Q999 / r999 taken back
    store.add("q3?", "Q4?", 0)
    within = ["q3?", "q4?", "r3?", "q998?", "r998?", "q999?", "r999?", "nowhere?", "r5?"]
    assert sorted(store.labels_between(within).values.tolist()) == [["q3?", "q4?", 0], ["q3?", "r3?", 1],
                                                                    ["q998?", "r998?", 0]]
    assert store.labels_between(within).dtypes["is_duplicate"] == "int64" and store.labels_between([]).empty
    asked = [(f"q{i}?", f"r{i}?") for i in range(990, 1010)] + [("r5?", "q5?")]
    assert store.labelled_among(asked) == {(f"q{i}?", f"r{i}?") for i in range(990, 999)}
    assert store.labelled_among([]) == set() and LabelStore(tmp_path / "none.sqlite3").labelled_among(asked) == set()


APOSTROPHE_CASES = ["'=x", "''=x", "=1+1", "+x", "-x", "@x", "'", "'x", "''", "-2", "'-2", "'@x y", "'\t=x"]


def test_a_questions_text_survives_the_export_and_the_import_exactly_and_stays_spreadsheet_safe(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite3")
    for i, text in enumerate(APOSTROPHE_CASES):
        store.add(text, f"{text} other {i}", i % 2)
    exported = store.export_csv()
    back = read_labels_csv(exported)
    assert back["question1"].tolist() == APOSTROPHE_CASES
    assert back["question2"].tolist() == [f"{text} other {i}" for i, text in enumerate(APOSTROPHE_CASES)]
    cells = [cell for row in exported.decode("utf-8").split("\r\n")[1:-1] for cell in row.split(",")[:2]]
    assert not any(is_formula(cell.strip('"')) for cell in cells)  # nothing a spreadsheet would run
    assert store.merge(back) == MergeCounts(0, 0, len(APOSTROPHE_CASES))  # the same pairs, the same labels


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("'=+-@\t x1.e")), min_size=1, max_size=8))
def test_any_text_of_quotes_and_formula_signs_comes_back_from_the_csv_exactly(text):
    assert unescape_cell(escape_cell(text)) == text and not is_formula(escape_cell(text))
    question = text + " why?"  # a text checked_answer keeps as it is (never stripped at its start, never a number)
    if question.strip() != question:
        return
    frame = pd.DataFrame({"question1": [escape_cell(question)], "question2": ["another?"], "is_duplicate": [1]})
    assert read_labels_csv(frame.to_csv(index=False).encode())["question1"].tolist() == [question]


def test_a_wal_database_in_a_folder_nobody_can_write_is_read_and_a_damaged_one_is_left_as_it_was(tmp_path):
    import hashlib
    import subprocess

    folder = tmp_path / "frozen"
    path = folder / "labels.sqlite3"
    writer = LabelStore(path)
    writer.add("a?", "b?", 1)  # each transaction's connection closed cleanly: no -wal or -shm beside it
    assert sorted(os.listdir(folder)) == ["labels.sqlite3"]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (it stops even root from making the -shm file)")
    try:
        assert LabelStore(path).pairs()["question1"].tolist() == ["a?"]
        assert sorted(os.listdir(folder)) == ["labels.sqlite3"]
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    damaged = bytearray(path.read_bytes())
    damaged[100:4096] = b"\xff" * (4096 - 100)  # the first page's tree, past the 100-byte header
    path.write_bytes(bytes(damaged))
    for call in (len, LabelStore.pairs, lambda store: store.recent(5)):
        with pytest.raises(DataError) as error:
            call(LabelStore(path))
        assert "\n" not in str(error.value)
    assert path.read_bytes() == bytes(damaged)  # a read never rewrites a header


def test_the_csv_labels_file_of_before_is_imported_once_whole(tmp_path):
    legacy = tmp_path / "corpus-12345678.csv"
    legacy_bytes = (LEGACY_HEADER + "a?,b?,1,session-1,2026-01-01T00:00:00+00:00\r\n"
                    "'=c?,d?,0,session-1,2026-01-01T00:00:01+00:00\r\n"
                    "e?,f?,1,,2026-01-01T00:00:02+00:00").encode()  # a last row typed by hand, no line end
    legacy.write_bytes(legacy_bytes)
    path = tmp_path / "corpus-12345678.sqlite3"
    store = LabelStore(path, legacy_csv=legacy)
    assert store.pairs().empty and not path.exists()  # a read writes nothing: the import is a write of its own
    store.import_legacy()
    assert store.pairs()[["question1", "question2", "is_duplicate"]].values.tolist() == [
        ["a?", "b?", 1], ["=c?", "d?", 0], ["e?", "f?", 1]]
    assert store.import_problem is None and legacy.read_bytes() == legacy_bytes  # the old file is left as it was
    store.undo_last()
    store.add("g?", "h?", 0)
    again = LabelStore(path, legacy_csv=legacy)  # a restarted server: not imported a second time
    assert again.pairs()["question1"].tolist() == ["a?", "=c?", "g?"]


def test_a_csv_of_before_that_cannot_be_read_is_reported_and_the_store_still_works(tmp_path):
    legacy = tmp_path / "old.csv"
    legacy.write_bytes(b"\x00\x01\x02 binary, not text" * 20)
    store = LabelStore(tmp_path / "old.sqlite3", legacy_csv=legacy)
    store.import_legacy()
    assert len(store) == 0 and "old.csv was not imported" in store.import_problem
    assert "\n" not in store.import_problem
    assert store.add("a?", "b?", 1) is None and len(store) == 1
