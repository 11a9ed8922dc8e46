"""Every read is bounded, and one reader serves pairs everywhere (issue 22, items 6, 7 and 9).

A gzip bomb is counted as it inflates and refused at the limit (core.data.limits), never held; a 1 GB file of
NULs costs one block; 100,000 columns are refused from the header; fields and lines are capped; every error
is one short line. ``score`` reads through ``load_pairs``' own reader (core.data.reading), so the two
accept and refuse the same files. The memory cases run in a subprocess under RLIMIT_AS with a timeout.
"""
from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.data import DataError, limits, load_pairs, load_questions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
HEADER = b"question1,question2,is_duplicate\n"
ROW = b"How do I learn Python quickly?,What is the best way to learn Python?,1\n"
SMALL_LIMIT = 1 << 20  # the cap the in-process tests lower SIAMESE_LAB_MAX_INPUT_BYTES to
AS_LIMIT = 1 << 30  # RLIMIT_AS of the subprocess tests that use core.data only (pandas alone maps ~360 MB)
AS_LIMIT_TORCH = 3 << 29  # 1.5 GiB for the CLI: importing torch maps ~840 MB before anything is read


def repeated_gzip(content: bytes, expanded: int, header: bytes = b"") -> bytes:
    """A gzip file of ``header`` then ``content`` repeated to more than ``expanded`` bytes: one compressed
    member repeated (multi-member gzip), so a bomb of gigabytes is built in milliseconds."""
    member = gzip.compress(content, compresslevel=9, mtime=0)
    return (gzip.compress(header, mtime=0) if header else b"") + member * (expanded // len(content) + 1)


def text_bomb(expanded: int, row: bytes = ROW) -> bytes:
    return repeated_gzip(row * ((1 << 20) // len(row)), expanded, HEADER)


def zero_bomb(expanded: int) -> bytes:
    return repeated_gzip(bytes(1 << 20), expanded)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err[:2000]
    assert len(lines[0]) < 1000, len(lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def lstm(tiny_lstm) -> Path:
    return tiny_lstm


def command(name: str, model: Path, data: Path, tmp_path: Path) -> list[str]:
    """The argv of each command that reads a user's file, reading ``data``."""
    out = tmp_path / "out"
    return {
        "train": ["train", "--data", data, "--out", out, "--model", "lstm", "--epochs", "1", "--device", "cpu"],
        "evaluate": ["evaluate", "--model", model, "--data", data],
        "score": ["score", "--model", model, "--pairs", data, "--out", out],
        "dedup": ["dedup", "--model", model, "--questions", data, "--out", out],
    }[name]


def run_cli(capsys, argv) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- gzip bombs ------------------------------------------------------------------------------------
BOMBS = {
    "text": (lambda: text_bomb(20 << 20), "holds more than 1 MiB of text once decompressed; the limit is 1 MiB "
                                          "(SIAMESE_LAB_MAX_INPUT_BYTES sets it)"),
    "zeros": (lambda: zero_bomb(20 << 20), "looks like a binary file"),
}


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_gzip_bomb_is_refused_by_every_reader(kind, monkeypatch, tmp_path):
    monkeypatch.setenv(limits.INPUT_LIMIT_VARIABLE, str(SMALL_LIMIT))
    content, message = BOMBS[kind][0](), BOMBS[kind][1]
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(content)
    for source in (path, content):
        with pytest.raises(DataError, match=re.escape(message)):
            load_pairs(source)
        with pytest.raises(DataError, match=re.escape(message)):
            load_questions(source)


# ---- Parquet: its text measured, not its file ------------------------------------------------------
PARQUET_REFUSAL = "holds more than 1 MiB of text once decompressed; the limit is 1 MiB"
LONG_QUESTION = "Why is the sky blue? " * 5_000  # 105,000 characters
# Both store a repeated string once: a dictionary page, or delta encoding's shared prefixes.
ENCODINGS = [{}, {"use_dictionary": False, "column_encoding": {"question": "DELTA_BYTE_ARRAY"}}]


def parquet_of(rows: int, row_group_size: int | None = None, **options) -> bytes:
    """A Parquet file of one ``question`` column repeating ``LONG_QUESTION`` ``rows`` times."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"question": pa.array([LONG_QUESTION] * rows)}), buffer,
                   row_group_size=row_group_size, **options)
    return buffer.getvalue()


def test_a_small_parquet_file_of_much_plain_text_is_refused_from_its_footer(monkeypatch, tmp_path):
    import pyarrow.parquet as pq

    monkeypatch.setenv(limits.INPUT_LIMIT_VARIABLE, str(SMALL_LIMIT))
    data = parquet_of(400, use_dictionary=False, compression="zstd")  # 42 MB of text
    assert len(data) < SMALL_LIMIT // 10
    path = tmp_path / "small.parquet"
    path.write_bytes(data)

    def never(*args, **kwargs):
        raise AssertionError("a column was read")

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", never)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", never)
    for source in (path, data):
        with pytest.raises(DataError, match=re.escape(PARQUET_REFUSAL)):
            load_questions(source)


@pytest.mark.parametrize("options", ENCODINGS, ids=["dictionary", "delta"])
def test_a_parquet_file_storing_one_long_string_once_is_refused_before_it_is_decoded(options, monkeypatch, tmp_path):
    from core.data import questions

    monkeypatch.setenv(limits.INPUT_LIMIT_VARIABLE, str(SMALL_LIMIT))
    data = parquet_of(480, row_group_size=120, **options)  # 50 MB of text; the footer counts the string once
    metadata = questions._parquet_file(data, "x").metadata
    assert questions.stored_text_bytes(metadata, ["question"]) < SMALL_LIMIT
    decoded = []
    real = questions._as_text
    monkeypatch.setattr(questions, "_as_text", lambda values: decoded.append(len(values)) or real(values))
    with pytest.raises(DataError, match=re.escape(PARQUET_REFUSAL)):
        load_questions(data)
    assert sum(decoded) * len(LONG_QUESTION) <= SMALL_LIMIT  # refused before more than the cap became text


@pytest.mark.parametrize("options", ENCODINGS, ids=["dictionary", "delta"])
def test_a_parquet_file_under_the_cap_is_read_whole_across_its_row_groups(options, monkeypatch):
    monkeypatch.setenv(limits.INPUT_LIMIT_VARIABLE, str(SMALL_LIMIT))
    questions, _ = load_questions(parquet_of(9, row_group_size=2, **options))  # 945,000 bytes of text
    assert questions == [LONG_QUESTION.strip()] * 9


@pytest.mark.parametrize("name", ["train", "evaluate", "score", "dedup"])
@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_gzip_bomb_is_one_error_line_for_every_command(name, kind, lstm, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(limits.INPUT_LIMIT_VARIABLE, str(SMALL_LIMIT))
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(BOMBS[kind][0]())
    code, out, err = run_cli(capsys, command(name, lstm, path, tmp_path))
    assert code == 2 and out == ""
    assert BOMBS[kind][1] in one_error_line(err)
    if name in ("score", "dedup"):
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.csv.gz"]  # nothing written


def run_bounded(code: str, timeout: float, address_space: int = AS_LIMIT, args=(),
                limit: int | None = None) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter under RLIMIT_AS = ``address_space``, killed after ``timeout`` s, with the
    byte cap ``limit`` (else the real default)."""
    prelude = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({address_space}, {address_space}))
        sys.path.insert(0, {str(ROOT)!r})
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop(limits.INPUT_LIMIT_VARIABLE, None)  # the real default
    if limit is not None:
        env[limits.INPUT_LIMIT_VARIABLE] = str(limit)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


READ_AND_REPORT = """
    from core.data import DataError, load_pairs, load_questions
    for read in (load_pairs, load_questions):
        try:
            read(sys.argv[1])
        except DataError as error:
            print(error)
        else:
            print("read")
"""


def test_a_bomb_is_refused_under_a_1_gib_address_space(tmp_path):
    """1.5 GiB of long rows passes a 128 MiB byte cap, 5 GiB of tiny rows the default line cap: both refused
    while they inflate (a reader holds at most the cap's text), under an address space the old reader (the whole
    file inflated at once) died in. Long rows of too many fields are refused from the file's head."""
    bytes_, lines = tmp_path / "bytes.csv.gz", tmp_path / "lines.csv.gz"
    bytes_.write_bytes(text_bomb(3 << 29, b"Why " * 100 + b"?," + b"How " * 100 + b"?,0\n"))
    lines.write_bytes(text_bomb(5 << 30, b"a,b,1\n"))
    result = run_bounded(READ_AND_REPORT, timeout=120, args=[bytes_], limit=128 << 20)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [f"bytes.csv.gz holds more than 128 MiB of text once decompressed; the "
                                          f"limit is 128 MiB ({limits.INPUT_LIMIT_VARIABLE} sets it)"] * 2
    wide = tmp_path / "wide.csv.gz"
    wide.write_bytes(text_bomb(3 << 29, b"Why " * 100 + b"?,How " * 100 + b"?,0\n"))
    result = run_bounded(READ_AND_REPORT, timeout=120, args=[wide])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0] == "wide.csv.gz: 65 of its first 65 lines have more fields than the " \
                                            "header's 3; is it comma-separated text?"
    result = run_bounded(READ_AND_REPORT, timeout=120, args=[lines])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [f"lines.csv.gz has more than {limits.MAX_LINES:,} lines; the limit is "
                                          f"{limits.MAX_LINES:,}"] * 2


def test_a_bomb_through_the_cli_under_a_memory_cap(lstm, tmp_path):
    """``python -m core dedup`` and ``score`` with the real default limit, in their own process."""
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(text_bomb(5 << 30, b"a,b,1\n"))
    for name in ("dedup", "score"):
        code = "from core.cli.main import main\nsys.exit(main(sys.argv[1:]))"
        result = run_bounded(code, timeout=180, address_space=AS_LIMIT_TORCH,
                             args=command(name, lstm, path, tmp_path))
        assert result.returncode == 2, result.stderr[-3000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr[-3000:]
        assert "lines; the limit is" in errors[0] and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.csv.gz"]


@pytest.mark.parametrize("damage", ["truncated", "bad crc", "magic only", "garbage after a member"])
def test_a_damaged_gzip_is_a_data_error(damage, lstm, capsys, tmp_path):
    good = gzip.compress(HEADER + ROW * 2000, mtime=0)
    content = {"truncated": good[: len(good) // 2], "magic only": b"\x1f\x8b",
               "bad crc": good[:-8] + bytes([good[-8] ^ 0xFF]) + good[-7:],
               "garbage after a member": good + b"not gzip at all"}[damage]
    with pytest.raises(DataError, match="gzip"):
        load_pairs(content)
    path = tmp_path / "damaged.csv.gz"
    path.write_bytes(content)
    code, _, err = run_cli(capsys, command("score", lstm, path, tmp_path))
    assert code == 2 and "gzip" in one_error_line(err)


# ---- files that are not text ----------------------------------------------------------------------
@pytest.mark.timeout(240)  # it ran for minutes before; a hang fails here
def test_a_1_gb_file_of_nuls_is_refused_from_its_first_block(tmp_path):
    path = tmp_path / "zeros.csv"
    with open(path, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GB of NULs that take no disk
    # VmHWM, this process image's own peak: ru_maxrss would also count the pytest process it was forked from.
    peak = "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))"
    result = run_bounded(textwrap.dedent(READ_AND_REPORT) + peak,
                         timeout=60, args=[path])
    assert result.returncode == 0, result.stderr[-3000:]
    *messages, peak_kib = result.stdout.splitlines()
    assert messages == ["zeros.csv looks like a binary file, not CSV/TSV text (UTF-16 text needs its byte-order mark; "
                        "else save it as UTF-8)"] * 2
    assert int(peak_kib) < 600 * 1024  # pandas and numpy themselves, not the file


def test_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "pairs.csv"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(DataError, match="not a regular file"):
            load_pairs(path)


# ---- columns, fields, lines: capped, and every error one short line --------------------------------
def wide_file(columns: int) -> bytes:
    names = ["question1", "question2", "is_duplicate"] + [f"extra column {i}" for i in range(columns - 3)]
    return (",".join(names) + "\n" + ",".join(["a?", "b?", "1"] + ["x"] * (columns - 3)) + "\n").encode()


@pytest.mark.timeout(120)  # it ran for minutes before; a hang fails here
def test_100000_columns_are_refused_from_the_header(lstm, capsys, tmp_path):
    path = tmp_path / "wide.csv"
    path.write_bytes(wide_file(100_000))
    assert path.stat().st_size > 900_000
    with pytest.raises(DataError, match=r"the header has at least [\d,]+ columns; the limit is 1,000"):
        load_pairs(path)
    code, _, err = run_cli(capsys, command("score", lstm, path, tmp_path))
    assert code == 2 and "columns; the limit is 1,000" in one_error_line(err)
    load_pairs(wide_file(limits.MAX_COLUMNS))  # at the cap: read


def test_fields_and_lines_over_their_caps_name_the_limit(monkeypatch, lstm, capsys, tmp_path):
    monkeypatch.setattr(limits, "MAX_FIELD_CHARS", 50)
    long = HEADER + ROW + b"short?," + b"y" * 60 + b"?,0\n"
    with pytest.raises(DataError, match="line 3 has a field of 61 characters; the limit is 50 per field"):
        load_pairs(long)
    path = tmp_path / "long.csv"
    path.write_bytes(long)
    code, _, err = run_cli(capsys, command("score", lstm, path, tmp_path))
    assert code == 2 and "the limit is 50 per field" in one_error_line(err)
    with pytest.raises(DataError, match="a question of 61 characters; the limit is 50"):
        load_questions(b"question\nshort\n" + b"y" * 61 + b"\n")
    monkeypatch.setattr(limits, "MAX_FIELD_CHARS", 10**6)
    monkeypatch.setattr(limits, "MAX_LINES", 100)
    with pytest.raises(DataError, match="has more than 100 lines; the limit is 100"):
        load_pairs(HEADER + ROW * 100)
    load_pairs(HEADER + ROW * 99)  # 100 lines: read


@pytest.mark.parametrize("header", [
    b",".join(b"n" * 20_000 + str(i).encode() for i in range(40)),  # 800 KB of names, none known
    b'"question\n1",question2,is_duplicate',  # a quoted newline in a header name
    b"q\xe9" * 50_000,  # one unknown name, latin-1
])
def test_errors_quoting_the_header_are_one_short_line(header, lstm, capsys, tmp_path):
    content = header + b"\na,b,1\n"
    with pytest.raises(DataError) as caught:
        load_pairs(content)
    message = str(caught.value)
    assert "\n" not in message and len(message) <= limits.MAX_MESSAGE_CHARS and "missing column" in message
    path = tmp_path / "named.csv"
    path.write_bytes(content)
    code, _, err = run_cli(capsys, command("score", lstm, path, tmp_path))
    assert code == 2 and "missing column" in one_error_line(err)


# ---- one reader: score and load_pairs accept and refuse the same files ---------------------------------
TEXT = "question1,question2,is_duplicate\nCafé au lait?,Thé vert?,1\nHow old are you?,What is your age?,0\n"
FILES = {
    "utf-8": TEXT.encode(),
    "utf-8 with bom": b"\xef\xbb\xbf" + TEXT.encode(),
    "tsv": TEXT.replace(",", "\t").encode(),
    "semicolons": TEXT.replace(",", ";").encode(),
    "gzip": gzip.compress(TEXT.encode()),
    "utf-16 le with bom": TEXT.encode("utf-16"),
    "utf-16 be without bom": TEXT.encode("utf-16-be"),
    "gzip of utf-16": gzip.compress(TEXT.replace(",", "\t").encode("utf-16")),
    "latin-1": TEXT.encode("latin-1"),
    "cp1252": (TEXT + "“Quotes”?,Why?,0\n").encode("cp1252"),
    "crlf": TEXT.replace("\n", "\r\n").encode(),
    "form feed before the header": b"\x0c" + TEXT.encode(),
    "quoted newline in a question": TEXT.encode() + b'"Two\nlines?",One?,0\n',
    "a malformed line": TEXT.encode() + b"a,b,1,extra\n",
    "quoted newline in a header name": TEXT.replace("question1", '"question\n1"', 1).encode(),
    "unclosed quote at the end": TEXT.encode() + b'"never closed?,b,1\n',
    "truncated gzip": gzip.compress(TEXT.encode() * 50)[:-30],
    "bad crc": (lambda g: g[:-8] + bytes([g[-8] ^ 1]) + g[-7:])(gzip.compress(TEXT.encode())),
    "utf-32": TEXT.encode("utf-32"),
    "undecodable utf-16": b"\xff\xfe" + TEXT.encode("utf-16-le")[:-1],
    "binary": bytes(range(256)) * 8,
    "empty": b"",
    "header only": HEADER,
    "no question columns": b"a,b\n1,2\n",
    "gzip bomb": text_bomb(20 << 20),
    "100,000 columns": wide_file(100_000),
}


@pytest.fixture(scope="module")
def model(lstm):
    from core.models import load_model

    return load_model(lstm)[0]


@pytest.mark.parametrize("name", list(FILES))
def test_score_and_load_pairs_accept_and_refuse_the_same_files(name, model, lstm, capsys, monkeypatch, tmp_path):
    from core.inference.scoring import score_file

    monkeypatch.setenv(limits.INPUT_LIMIT_VARIABLE, str(SMALL_LIMIT))
    path = tmp_path / "pairs.csv"
    path.write_bytes(FILES[name])
    try:
        pairs, report = load_pairs(path)
    except DataError as error:
        refused = str(error)
        with pytest.raises(DataError) as caught:
            score_file(model, path, tmp_path / "scored.csv", 0.5)
        code, out, err = run_cli(capsys, command("score", lstm, path, tmp_path))
        assert code == 2 and out == "" and one_error_line(err) == f"error: {caught.value}"
        # the same reader, the same words (score needs no label column: it never misses one)
        assert str(caught.value) == refused.replace(", is_duplicate; found columns", "; found columns")
        assert not (tmp_path / "out").exists()
        return
    report_score = score_file(model, path, tmp_path / "scored.csv", 0.5)
    scored = pd.read_csv(tmp_path / "scored.csv", keep_default_na=False, dtype=str)
    assert report_score.rows == report.rows_read - report.dropped.get("malformed line", 0)
    assert report_score.malformed == report.dropped.get("malformed line", 0)
    assert scored.iloc[:, 0].str.strip().tolist() == pairs["question1"].tolist()  # decoded alike
    assert scored.iloc[:, 1].str.strip().tolist() == pairs["question2"].tolist()
    expected = model.score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist())
    np.testing.assert_allclose(scored["similarity"].astype(float), expected, atol=1e-6)
    code, _, err = run_cli(capsys, command("score", lstm, path, tmp_path))
    assert code == 0, err


def test_score_reads_a_big_file_in_chunks(model, tmp_path, monkeypatch):
    """Chunks of the one reader: the questions of every chunk are what load_pairs reads, in order."""
    from core.inference.scoring import ScoreSteps, score_file

    rows = [f"Question {i:04d}?,{'007' if i % 3 else 'Other'} {i}?,{i % 2}" for i in range(250)]
    rows[100:140] = [f"{i},{i + 1},1" for i in range(40)]  # a chunk of questions that look like numbers
    path = tmp_path / "pairs.csv"
    path.write_text("question1,question2,is_duplicate\n" + "\n".join(rows) + "\n")
    seen = []
    report = score_file(model, path, tmp_path / "scored.csv", 0.5, chunk_rows=40,
                        steps=ScoreSteps(writing=lambda done, _: seen.append(done)))
    scored = pd.read_csv(tmp_path / "scored.csv", keep_default_na=False, dtype=str)
    pairs, _ = load_pairs(path)
    assert scored["question1"].tolist() == pairs["question1"].tolist() and len(seen) > 5
    assert report.rows == report.scored == report.labelled == 250


# ---- dedup's threshold -----------------------------------------------------------------------------------
@pytest.mark.timeout(480)  # it ran for minutes before; a hang fails here
def test_dedup_refuses_a_threshold_that_would_cluster_20000_questions_into_one(lstm, capsys, tmp_path):
    """``dedup --threshold -1`` on 20,000 questions searched 400 million pairs for minutes without a word;
    now it says why it stops, right after the first neighbours. The same threshold on the 722 questions of
    the sample, or bounded by --max-neighbourhood, still runs."""
    questions = load_questions(SAMPLE)[0]
    corpus = tmp_path / "questions.txt"
    corpus.write_text("\n".join(f"{questions[i % 722]} {questions[(7 * i + i // 722) % 722]}"
                                for i in range(20_000)) + "\n")
    code, out, err = run_cli(capsys, ["dedup", "--model", lstm, "--questions", corpus, "--out", tmp_path / "c.csv",
                                      "--threshold", "-1"])
    assert code == 2 and out == "" and not (tmp_path / "c.csv").exists()
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and err.rstrip().endswith(error[0])  # after the progress bars, one line
    assert "--threshold -1 is too low for this corpus" in error[0] and "--max-neighbourhood" in error[0]
    for argv in (["--questions", SAMPLE], ["--questions", corpus, "--max-neighbourhood", "8", "-k", "4"]):
        code, _, err = run_cli(capsys, ["dedup", "--model", lstm, "--out", tmp_path / "c.csv", "--overwrite",
                                        "--threshold", "-1", *argv])
        assert code == 0, err


# ---- the app: one error message, never an exception -----------------------------------------------------
APP_BOMB = text_bomb(300 << 20)  # past the app's 200 MB upload limit, counted expanded (1.3 MB compressed)
APP_INPUTS = {
    "gzip bomb": (APP_BOMB, "holds more than 200 MiB of text once decompressed; the limit is 200 MiB"),
    "truncated gzip": (FILES["truncated gzip"], "the gzip data is truncated or damaged"),
    "bad crc": (FILES["bad crc"], "cannot be decompressed"),
    "unclosed quote": (FILES["unclosed quote at the end"], "EOF inside string"),
    "quoted newline in a header name": (FILES["quoted newline in a header name"], "missing column(s) for question1"),
}


def only_an_error(at, message: str) -> None:
    assert not at.exception, at.exception
    assert len(at.error) == 1 and message in at.error[0].value, [e.value for e in at.error]


@pytest.mark.parametrize("name", list(APP_INPUTS))
def test_the_verdict_page_scores_a_bad_file_into_one_error(name, runs_with_models):
    from app_support import open_page

    from lab.navigation import VERDICT

    _, folders = runs_with_models
    at = open_page(VERDICT.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    content, message = APP_INPUTS[name]
    at.file_uploader(key="score_upload").set_value(("pairs.csv.gz", content, "application/gzip")).run()
    only_an_error(at, message)
    assert not any("scored" in button.proto.label for button in at.get("download_button"))


# (a header that names no question column makes a questions file plain lines, one question each: no error)
@pytest.mark.parametrize("name", [name for name in APP_INPUTS if "header" not in name])
def test_the_deduplicate_page_shows_one_error_for_a_bad_upload(name, runs_root):
    from app_support import open_page

    from lab.navigation import DEDUPLICATE

    at = open_page(DEDUPLICATE.path, timeout=120)
    at.radio(key="dedup_source").set_value("An uploaded file").run()
    content, message = APP_INPUTS[name]
    at.file_uploader(key="dedup_upload").set_value(("questions.csv.gz", content, "application/gzip")).run()
    only_an_error(at, message)
    assert not at.dataframe


@pytest.mark.parametrize("name", list(APP_INPUTS))
def test_the_data_page_refuses_a_bad_upload_and_keeps_the_dataset(name, runs_root, sample_pairs):
    from app_support import open_page

    from lab.navigation import DATA

    at = open_page(DATA.path)
    content, message = APP_INPUTS[name]
    at.file_uploader(key="upload").set_value(("pairs.csv.gz", content, "application/gzip")).run()
    if message.startswith("missing column"):  # a header of other names: the page asks which column is which
        assert not at.exception and not at.error
        assert at.info[0].value.startswith("To read pairs.csv.gz, its columns are not named as this page expects")
    else:
        only_an_error(at, message)
    pd.testing.assert_frame_equal(at.session_state.pairs, sample_pairs[0])
