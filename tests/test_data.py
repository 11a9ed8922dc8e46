"""load_pairs, dataset_summary and split_pairs on small hand-built files."""

import dataclasses
import gzip
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.data import (
    DataError,
    LoadReport,
    dataset_summary,
    load_pairs,
    split_pairs,
)

SAMPLE = Path(__file__).resolve().parent.parent / "assets" / "sample_pairs.csv"

HEADER = "question1,question2,is_duplicate\n"


def csv_bytes(*lines: str, header: str = HEADER) -> bytes:
    return (header + "".join(line + "\n" for line in lines)).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Formats and sources
# ---------------------------------------------------------------------------------------------


def test_csv_file_gives_exact_frame_and_report(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_bytes(csv_bytes("How do I learn Python?,What is the best way to learn Python?,1", "Is Mars red?,Why is the sky blue?,0"))

    pairs, report = load_pairs(path)

    expected = pd.DataFrame(
        {
            "question1": ["How do I learn Python?", "Is Mars red?"],
            "question2": ["What is the best way to learn Python?", "Why is the sky blue?"],
            "is_duplicate": np.array([1, 0], dtype=np.int64),
        }
    )
    pd.testing.assert_frame_equal(pairs, expected, check_dtype=False)
    assert list(pairs.columns) == ["question1", "question2", "is_duplicate"]
    assert pairs["is_duplicate"].dtype == np.int64
    assert pd.api.types.is_string_dtype(pairs["question1"]) and pd.api.types.is_string_dtype(pairs["question2"])
    assert isinstance(pairs.index, pd.RangeIndex) and pairs.index.start == 0
    assert report == LoadReport(
        source="pairs.csv",
        delimiter=",",
        columns={"question1": "question1", "question2": "question2", "is_duplicate": "is_duplicate"},
        rows_read=2,
        rows_kept=2,
        dropped={},
        examples=[],
        encoding="utf-8",
    )
    assert report.summary() == "kept 2 of 2 rows"


def test_tsv_with_extra_columns_ignores_them_and_keeps_commas_in_text(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
        "0\t1\t2\tHi, how are you?\tHow are you, friend?\t1\n"
        "1\t3\t4\tWhat is 2+2?\tWhat is 3+3?\t0\n",
        encoding="utf-8",
    )
    pairs, report = load_pairs(str(path))
    assert report.delimiter == "\t"
    assert pairs.to_dict("list") == {
        "question1": ["Hi, how are you?", "What is 2+2?"],
        "question2": ["How are you, friend?", "What is 3+3?"],
        "is_duplicate": [1, 0],
    }


@pytest.mark.parametrize("delimiter", [";", "|"])
def test_semicolon_and_pipe_delimiters(delimiter):
    text = delimiter.join(["question1", "question2", "is_duplicate"]) + "\n" + delimiter.join(["A, b?", "C, d?", "1"]) + "\n"
    pairs, report = load_pairs(text.encode())
    assert report.delimiter == delimiter
    assert pairs.to_dict("list") == {"question1": ["A, b?"], "question2": ["C, d?"], "is_duplicate": [1]}


def test_gzip_detected_by_magic_bytes_not_extension(tmp_path):
    path = tmp_path / "pairs.txt"  # deliberately not .gz
    with gzip.open(path, "wb") as handle:
        handle.write(csv_bytes("Q one?,Q two?,1", "Q three?,Q four?,0"))
    pairs, report = load_pairs(path)
    assert report.source == "pairs.txt"
    assert pairs.to_dict("list") == {
        "question1": ["Q one?", "Q three?"],
        "question2": ["Q two?", "Q four?"],
        "is_duplicate": [1, 0],
    }


def test_multi_member_gzip_reads_all_members():
    content = gzip.compress(csv_bytes("A?,B?,1")) + gzip.compress(b"C?,D?,0\n")
    pairs, _ = load_pairs(content)
    assert pairs["question1"].tolist() == ["A?", "C?"]


def test_nul_padding_after_the_last_gzip_member_is_tolerated_and_garbage_is_not():
    # Tape and block tools pad a gzip file with NULs, which gzip itself reads past.
    member = gzip.compress(csv_bytes("A?,B?,1"))
    pairs, _ = load_pairs(member + bytes(512))
    assert pairs["question1"].tolist() == ["A?"]
    with pytest.raises(DataError, match="starts like a gzip file but cannot be decompressed"):
        load_pairs(member + bytes(8) + b"junk")


def test_bytes_and_bytesio_sources_report_upload():
    content = csv_bytes("A?,B?,1")
    from_bytes, bytes_report = load_pairs(content)
    from_stream, stream_report = load_pairs(io.BytesIO(content))
    pd.testing.assert_frame_equal(from_bytes, from_stream)
    assert bytes_report.source == stream_report.source == "<upload>"


def test_named_upload_is_reread_from_the_start():
    class Upload(io.BytesIO):  # what a Streamlit UploadedFile looks like to us
        name = "my_pairs.csv"

    upload = Upload(csv_bytes("A?,B?,1"))
    upload.read()  # e.g. a preview already consumed it
    pairs, report = load_pairs(upload)
    assert report.source == "my_pairs.csv"
    assert pairs["question1"].tolist() == ["A?"]


@pytest.mark.parametrize(
    "header",
    [
        "q1,q2,label",
        "sentence1,sentence2,label",
        "text1,text2,label",
        "question1,question2,duplicate",
        " Question1 , QUESTION2 ,Is_Duplicate ",
    ],
)
def test_column_aliases(header):
    pairs, report = load_pairs(f"{header}\nFirst?,Second?,1\n".encode())
    assert pairs.to_dict("list") == {"question1": ["First?"], "question2": ["Second?"], "is_duplicate": [1]}
    assert report.columns == dict(zip(["question1", "question2", "is_duplicate"], header.split(",")))


def test_explicit_column_mapping_overrides_detection():
    content = b"left,right,question1,verdict\nL?,R?,decoy,yes\n"
    pairs, report = load_pairs(content, columns={"question1": "left", "question2": "right", "is_duplicate": "verdict"})
    assert pairs.to_dict("list") == {"question1": ["L?"], "question2": ["R?"], "is_duplicate": [1]}
    assert report.columns == {"question1": "left", "question2": "right", "is_duplicate": "verdict"}


def test_partial_mapping_keeps_detection_for_other_roles():
    pairs, _ = load_pairs(b"question1,other,label\nA?,B?,0\n", columns={"question2": "other"})
    assert pairs.to_dict("list") == {"question1": ["A?"], "question2": ["B?"], "is_duplicate": [0]}


def test_mapping_to_absent_column_names_it():
    with pytest.raises(DataError, match=r"missing column\(s\) for question2 \(mapped to 'nope'\); found columns: question1, question2, is_duplicate"):
        load_pairs(csv_bytes("A?,B?,1"), columns={"question2": "nope"})


# ---------------------------------------------------------------------------------------------
# Header names that fit a role more than once: the first candidate is used, with a warning
# ---------------------------------------------------------------------------------------------


def test_repeated_header_name_uses_the_first_column_and_warns():
    pairs, report = load_pairs(b"question1,question1,question2,is_duplicate\nFirst?,Second?,Third?,1\n")
    assert pairs.to_dict("list") == {"question1": ["First?"], "question2": ["Third?"], "is_duplicate": [1]}
    assert report.columns == {"question1": "question1", "question2": "question2", "is_duplicate": "is_duplicate"}
    assert report.warnings == [
        'columns 1 "question1" and 2 "question1" both name question1; question1 is read from column 1 '
        '"question1", the other is ignored'
    ]
    assert report.summary() == "kept 1 of 1 rows"  # warnings are shown on their own, not in the summary


def test_header_repeated_with_other_case_and_spaces_counts_as_repeated():
    pairs, report = load_pairs(b"question1, Question1 ,question2,is_duplicate\nFirst?,Second?,Third?,1\n")
    assert pairs["question1"].tolist() == ["First?"]
    assert report.warnings == [
        'columns 1 "question1" and 2 "Question1" both name question1; question1 is read from column 1 '
        '"question1", the other is ignored'
    ]


def test_repeated_name_and_alias_of_one_role_are_all_listed():
    pairs, report = load_pairs(b"is_duplicate,question1,question2, Is_Duplicate ,label\n1,A?,B?,0,0\n")
    assert pairs["is_duplicate"].tolist() == [1]
    assert report.warnings == [
        'columns 1 "is_duplicate", 4 "Is_Duplicate" and 5 "label" all name is_duplicate; is_duplicate is read '
        'from column 1 "is_duplicate", the others are ignored'
    ]


def test_two_aliases_of_one_role_use_the_preferred_alias_and_warn():
    pairs, report = load_pairs(b"q1,question1,q2,label\nAlias?,Canonical?,Other?,0\n")
    assert pairs["question1"].tolist() == ["Canonical?"]  # ROLE_ALIASES order, not column order
    assert report.columns["question1"] == "question1"
    assert report.warnings == [
        'columns 1 "q1" and 2 "question1" both name question1; question1 is read from column 2 "question1", '
        "the other is ignored"
    ]


def test_repeated_unused_header_and_plain_files_give_no_warning():
    _, report = load_pairs(b"id,id,question1,question2,is_duplicate\n1,2,A?,B?,1\n")
    assert report.warnings == []
    _, report = load_pairs(csv_bytes("A?,B?,1"))
    assert report.warnings == []


def test_pandas_style_renamed_duplicates_are_not_assumed():
    # The header row is read as data, so a repeated name is never renamed "question1.1" behind our
    # back: asking for that name finds no such column instead of silently taking the second one.
    content = b"question1,question1,question2,is_duplicate\nFirst?,Second?,Third?,1\n"
    with pytest.raises(DataError, match=r"missing column\(s\) for question1 \(mapped to 'question1.1'\); "
                                        r"found columns: question1, question1, question2, is_duplicate"):
        load_pairs(content, columns={"question1": "question1.1"})
    # A file that really has a "question1.1" column (saved from a renamed pandas frame) reads
    # question1 from "question1": "question1.1" is no alias, so nothing is ambiguous.
    pairs, report = load_pairs(b"question1,question1.1,question2,is_duplicate\nFirst?,Second?,Third?,1\n")
    assert pairs["question1"].tolist() == ["First?"]
    assert report.warnings == []


def test_mapping_to_a_repeated_name_warns():
    pairs, report = load_pairs(b"left,left,right,verdict\nL1?,L2?,R?,1\n",
                               columns={"question1": "left", "question2": "right", "is_duplicate": "verdict"})
    assert pairs["question1"].tolist() == ["L1?"]
    assert report.warnings == [
        'columns 1 "left" and 2 "left" both name question1; question1 is read from column 1 "left", the other '
        'is ignored'
    ]


def test_mapping_an_exact_name_beside_a_case_variant_does_not_warn():
    pairs, report = load_pairs(b"Left,left,right,verdict\nL1?,L2?,R?,1\n",
                               columns={"question1": "left", "question2": "right", "is_duplicate": "verdict"})
    assert pairs["question1"].tolist() == ["L2?"]
    assert report.warnings == []


def test_one_column_read_as_two_roles_is_refused():
    # A pair of a question with itself teaches nothing: refused (tests/test_label_map.py has the other cases).
    with pytest.raises(DataError) as caught:
        load_pairs(csv_bytes("A?,B?,1"), columns={"question2": "question1"})
    assert str(caught.value) == ('<upload>: column 1 "question1" is given two roles, question1 and question2 '
                                 '(values such as "A?"); each role needs a column of its own')


def test_load_report_without_warnings_stays_backward_compatible():
    first = LoadReport("a.csv", ",", {}, 1, 1, {}, [], "utf-8")
    second = LoadReport(source="b.csv", delimiter=",", columns={}, rows_read=1, rows_kept=1, dropped={}, examples=[])
    assert first.warnings == second.warnings == []
    first.warnings.append("x")
    assert second.warnings == []  # no shared default list


@pytest.mark.parametrize(
    "spelling, value",
    [
        ("1", 1), ("0", 0), ("1.0", 1), ("0.0", 0), ("true", 1), ("FALSE", 0), ("Yes", 1), ("no", 0),
        ("T", 1), ("f", 0), ("y", 1), ("N", 0), (" 1 ", 1),
    ],
)
def test_label_spellings(spelling, value):
    pairs, report = load_pairs(csv_bytes(f"A?,B?,{spelling}"))
    assert pairs["is_duplicate"].tolist() == [value]
    assert report.dropped == {}


@pytest.mark.parametrize("spelling", ["2", "-1", "maybe", "", "yes please"])
def test_unreadable_label_spellings_are_dropped(spelling):
    pairs, report = load_pairs(csv_bytes("Keep?,Me?,1", f"A?,B?,{spelling}"))
    assert pairs["question1"].tolist() == ["Keep?"]
    assert report.dropped == {"unreadable label": 1}
    assert report.examples == [(3, "unreadable label")]


# ---------------------------------------------------------------------------------------------
# Dropped rows
# ---------------------------------------------------------------------------------------------


def test_dropped_rows_counted_by_reason_with_line_numbers():
    content = csv_bytes(
        "What is A?,What is B?,1",  # line 2: kept
        "  ,What is C?,0",  # line 3: empty question
        "What is D?,What is E?,maybe",  # line 4: unreadable label
        "What is F?,What is G?,1,extra",  # line 5: malformed (4 fields)
        "What is H?,,2",  # line 6: both problems, counted once as empty question
        "What is I?,What is J?",  # line 7: label missing
        "What is K?,What is L?,no",  # line 8: kept
        "What is M?",  # line 9: question2 missing
    )
    pairs, report = load_pairs(content)

    assert pairs.to_dict("list") == {
        "question1": ["What is A?", "What is K?"],
        "question2": ["What is B?", "What is L?"],
        "is_duplicate": [1, 0],
    }
    assert report.rows_read == 8
    assert report.rows_kept == 2
    assert report.dropped == {"empty question": 3, "unreadable label": 2, "malformed line": 1}
    assert report.examples == [
        (3, "empty question"),
        (4, "unreadable label"),
        (5, "malformed line"),
        (6, "empty question"),
        (7, "unreadable label"),
        (9, "empty question"),
    ]
    assert report.summary() == "kept 2 of 8 rows; dropped 3 empty questions, 2 unreadable labels, 1 malformed line"


def test_first_data_row_with_extra_field_is_malformed_not_an_index():
    pairs, report = load_pairs(csv_bytes("A?,B?,1,extra", "C?,D?,0"))
    assert pairs.to_dict("list") == {"question1": ["C?"], "question2": ["D?"], "is_duplicate": [0]}
    assert report.dropped == {"malformed line": 1}
    assert report.examples == [(2, "malformed line")]


def test_a_head_of_lines_wider_than_the_header_is_refused_not_skipped_line_by_line():
    """pandas skips such lines at a cost that grows with the square of their number: a wrong delimiter or a
    bomb of them is refused from the file's head, in one line; a few among good rows are still dropped."""
    with pytest.raises(DataError, match=r"^<upload>: 40 of its first 40 lines have more fields than the header's 3; "
                                        r"is it comma-separated text\?$"):
        load_pairs(csv_bytes(*["A?,B?,1,x"] * 40, "C?,D?,0"))
    _, report = load_pairs(csv_bytes(*["A?,B?,1,x"] * 30, *["C?,D?,0"] * 30))
    assert report.dropped == {"malformed line": 30}


def test_line_numbers_step_over_skipped_malformed_lines():
    content = csv_bytes("A?,B?,1,x", "C?,D?,0,y", "E?,F?,1", " ,G?,1")
    _, report = load_pairs(content)
    assert report.examples == [(2, "malformed line"), (3, "malformed line"), (5, "empty question")]


def test_examples_stop_at_twenty():
    content = csv_bytes(*[f"Q{i}?,,1" for i in range(30)], "Good?,Row?,1")
    _, report = load_pairs(content)
    assert report.dropped == {"empty question": 30}
    assert report.examples == [(line, "empty question") for line in range(2, 22)]


def test_max_rows_keeps_first_usable_rows_and_reports_only_those():
    content = csv_bytes("A?,B?,1", " ,X?,1", "C?,D?,0", "E?,F?,1", " ,Y?,0")
    pairs, report = load_pairs(content, max_rows=2)
    assert pairs["question1"].tolist() == ["A?", "C?"]
    assert (report.rows_read, report.rows_kept, report.dropped) == (3, 2, {"empty question": 1})


def test_questions_stripped_but_inner_text_unchanged():
    pairs, _ = load_pairs(csv_bytes('"  Two  spaces   inside?  ",\tTabbed?\t,1'))
    assert pairs.loc[0, "question1"] == "Two  spaces   inside?"
    assert pairs.loc[0, "question2"] == "Tabbed?"


def test_null_like_questions_stay_text():
    pairs, report = load_pairs(csv_bytes("null,n/a,1", "NA,NaN,0", "None,#N/A,1"))
    assert pairs["question1"].tolist() == ["null", "NA", "None"]
    assert pairs["question2"].tolist() == ["n/a", "NaN", "#N/A"]
    assert report.dropped == {}


def test_numeric_looking_questions_keep_their_text_even_past_the_first_parse_chunk():
    # 300k rows puts numeric-only chunks past pandas' first chunk, where type inference would
    # otherwise turn "01" into 1.
    rows = "".join(f"0{i},{i}.50,1\n" for i in range(300_000))
    pairs, report = load_pairs((HEADER + rows).encode())
    assert report.rows_kept == 300_000
    assert pairs["question1"].iloc[[0, 299_999]].tolist() == ["00", "0299999"]
    assert pairs["question2"].iloc[-1] == "299999.50"


# ---------------------------------------------------------------------------------------------
# Encodings, line endings, quoting
# ---------------------------------------------------------------------------------------------


def test_latin1_bytes_decode_as_cp1252():
    content = (HEADER + "Caf\u00e9 au lait?,Na\u00efve \u201cquote\u201d?,1\n").encode("cp1252")
    pairs, report = load_pairs(content)
    assert pairs.loc[0, "question1"] == "Caf\u00e9 au lait?"
    assert pairs.loc[0, "question2"] == "Na\u00efve \u201cquote\u201d?"
    assert report.encoding == "cp1252"


def test_bytes_undefined_in_cp1252_fall_back_to_latin1():
    pairs, report = load_pairs(HEADER.encode() + b"Odd \x81 byte?,B?,1\n")
    assert pairs.loc[0, "question1"] == "Odd \x81 byte?"
    assert report.encoding == "latin-1"


def test_utf8_bom_is_stripped():
    pairs, report = load_pairs(("\ufeff" + HEADER + "\u00c9t\u00e9?,B?,1\n").encode("utf-8"))
    assert report.columns["question1"] == "question1"
    assert pairs.loc[0, "question1"] == "\u00c9t\u00e9?"


def test_crlf_line_endings():
    pairs, _ = load_pairs(b"question1,question2,is_duplicate\r\nA?,B?,1\r\nC?,D?,0\r\n")
    assert pairs.to_dict("list") == {"question1": ["A?", "C?"], "question2": ["B?", "D?"], "is_duplicate": [1, 0]}


def test_quoted_field_with_embedded_newline_comma_and_escaped_quote():
    content = csv_bytes('"What, exactly,\nis ""this""?",Other?,1', "Next?,Row?,0")
    pairs, report = load_pairs(content)
    assert pairs["question1"].tolist() == ['What, exactly,\nis "this"?', "Next?"]
    assert report.rows_read == 2


# ---------------------------------------------------------------------------------------------
# UTF-16 with its BOM (read), UTF-16 without one and UTF-32 (refused)
# ---------------------------------------------------------------------------------------------

# Non-Latin text, an emoji (a surrogate pair in UTF-16), quotes, an embedded newline and dropped rows.
UTF16_TEXT = (
    "question1,question2,is_duplicate\r\n"
    "Caf\u00e9 \u201cnoir\u201d?,Was ist \u00df?,1\r\n"
    "\u4f60\u597d\u5417?,Emoji \U0001f600 here?,0\r\n"
    '"Plain, ""quoted""?","Multi\nline?",yes\r\n'
    " ,Empty first?,1\r\n"
    "\u0410\u0411?,\u0412?,maybe\r\n"
)
UTF16_CASES = [
    ("utf-16-le", b"\xff\xfe"),
    ("utf-16-be", b"\xfe\xff"),
]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("codec, bom", UTF16_CASES, ids=["le-bom", "be-bom"])
def test_utf16_loads_to_the_same_frame_and_report_as_utf8(codec, bom, compress):
    expected_pairs, expected_report = load_pairs(UTF16_TEXT.encode("utf-8"))
    assert len(expected_pairs) == 3 and expected_report.dropped == {"empty question": 1, "unreadable label": 1}
    content = bom + UTF16_TEXT.encode(codec)
    pairs, report = load_pairs(gzip.compress(content) if compress else content)
    pd.testing.assert_frame_equal(pairs, expected_pairs)
    assert report == dataclasses.replace(expected_report, encoding=codec)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_wide_text_without_a_bom_is_refused_not_guessed(codec):
    with pytest.raises(DataError, match=r"looks like a binary file, not CSV/TSV text \(UTF-16 text needs its "
                                        r"byte-order mark; else save it as UTF-8\)"):
        load_pairs(UTF16_TEXT.encode(codec))


def test_python_utf16_codec_output_loads(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text(UTF16_TEXT, encoding="utf-16", newline="")  # BOM + native order, as Windows tools write
    pairs, report = load_pairs(path)
    pd.testing.assert_frame_equal(pairs, load_pairs(UTF16_TEXT.encode("utf-8"))[0])
    assert report.encoding in {"utf-16-le", "utf-16-be"}


def test_excel_unicode_text_export_is_tab_separated_utf16():
    text = "question1\tquestion2\tis_duplicate\r\nA, b?\tC; d?\t1\r\n"
    pairs, report = load_pairs(b"\xff\xfe" + text.encode("utf-16-le"))
    assert (report.delimiter, report.encoding) == ("\t", "utf-16-le")
    assert pairs.to_dict("list") == {"question1": ["A, b?"], "question2": ["C; d?"], "is_duplicate": [1]}


@pytest.mark.parametrize(
    "content, detail",
    [
        (b"\xff\xfe" + csv_bytes("A?,B?,1").decode().encode("utf-16-le")[:-1], "truncated data at byte 82"),
        (b"\xff\xfe" + HEADER.encode("utf-16-le") + b"\x00\xdc" + "A?,B?,1\n".encode("utf-16-le"),
         "illegal encoding at byte 68"),
        (gzip.compress(b"\xfe\xff" + HEADER.encode("utf-16-be") + b"\xd8\x00", mtime=0), "unexpected end of data at byte 68"),
    ],
    ids=["odd length", "lone surrogate", "gzip, cut surrogate pair"],
)
def test_utf16_that_does_not_decode_is_a_data_error(content, detail):
    with pytest.raises(DataError) as caught:
        load_pairs(content)
    message = str(caught.value)
    assert message.startswith("<upload> looks like UTF-16 but does not decode; save it as UTF-8 (")
    assert detail in message


def test_utf32_is_refused_with_a_clear_message():
    with pytest.raises(DataError, match=r"UTF-32 text, which is not supported; save it as UTF-8"):
        load_pairs(csv_bytes("A?,B?,1").decode().encode("utf-32"))


# ---------------------------------------------------------------------------------------------
# Unusable input
# ---------------------------------------------------------------------------------------------


def test_data_error_is_a_value_error():
    assert issubclass(DataError, ValueError)


def test_missing_columns_message_lists_found_columns():
    with pytest.raises(DataError) as caught:
        load_pairs(b"a,b,c\n1,2,3\n")
    assert (
        "missing column(s) for question1, question2, is_duplicate; found columns: a, b, c "
        "(expected question1, question2, is_duplicate or an alias such as q1/q2/label)"
    ) in str(caught.value)


def test_missing_columns_found_by_delimiter_counting():
    with pytest.raises(DataError, match=r"missing column\(s\) for question2, is_duplicate; found columns: question1, b, c"):
        load_pairs(b"question1;b;c\n1;2;3\n")


@pytest.mark.parametrize(
    "content",
    [
        HEADER.encode() + b"\x00\x01\x02binary\x00",
        bytes(range(1, 9)) * 200,
        gzip.compress(bytes(range(256)) * 40, mtime=0),
        np.random.default_rng(0).bytes(8192),
        b"\x00" * 64 + HEADER.encode(),  # NUL runs are no UTF-16: no text byte beside the NULs
        b"\x00\x00" + HEADER.encode() + b"\x00\x00",
    ],
    ids=["nul bytes", "control bytes", "gzip of binary", "random bytes", "nul padding", "nul pairs around text"],
)
def test_binary_content(content):
    with pytest.raises(DataError, match="looks like a binary file, not CSV/TSV text"):
        load_pairs(content)


def test_a_parquet_file_of_pairs_is_said_to_be_parquet(tmp_path):
    """It was "looks like a binary file": a user who has pairs in Parquet was not told what the readers take."""
    pd.DataFrame({"question1": ["a?"], "question2": ["b?"], "is_duplicate": [1]}).to_parquet(tmp_path / "p.csv")
    with pytest.raises(DataError, match=r"p.csv is a Parquet file; pairs are read from CSV/TSV text \(Parquet is "
                                        r"read as a file of questions: dedup, suggest\)"):
        load_pairs(str(tmp_path / "p.csv"))


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\xef\xbb\xbf", gzip.compress(b"", mtime=0)])
def test_empty_file(content):
    with pytest.raises(DataError, match="the file is empty"):
        load_pairs(content)


@pytest.mark.parametrize("content", [HEADER.encode(), HEADER.strip().encode()])
def test_header_only(content):
    with pytest.raises(DataError, match="the file has a header but no rows"):
        load_pairs(content)


def test_no_usable_rows_names_the_reasons():
    with pytest.raises(DataError, match="no usable rows: dropped 1 empty question, 1 unreadable label"):
        load_pairs(csv_bytes(" ,B?,1", "C?,D?,x"))


def test_unterminated_quote_is_a_data_error_with_pandas_detail():
    with pytest.raises(DataError, match="could not parse <upload> as comma-separated text: .*EOF inside string"):
        load_pairs(csv_bytes('"Never closed?,B?,1', "C?,D?,0"))


def test_damaged_gzip():
    with pytest.raises(DataError, match="gzip"):
        load_pairs(gzip.compress(csv_bytes("A?,B?,1") * 50)[:-30])


def test_missing_path(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_pairs(tmp_path / "absent.csv")


@pytest.mark.skipif(not SAMPLE.exists(), reason="assets/sample_pairs.csv not written yet")
def test_bundled_sample_loads_cleanly():
    pairs, report = load_pairs(SAMPLE)
    assert report.dropped == {}
    assert report.rows_kept == report.rows_read == len(pairs) > 0
    assert set(pairs["is_duplicate"].unique()) == {0, 1}


# ---------------------------------------------------------------------------------------------
# Summary, splits, unseen questions
# ---------------------------------------------------------------------------------------------


def pairs_frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


def test_dataset_summary_counts_normalised_unique_questions():
    pairs = pairs_frame([("What is A?", "B?", 1), ("what  is a? ", "C?", 0), ("D?", "b?", 1)])
    assert dataset_summary(pairs) == {
        "pairs": 3,
        "duplicates": 2,
        "duplicate_rate": pytest.approx(2 / 3),
        "unique_questions": 4,  # "what is a?", "b?", "c?", "d?"
    }


def distinct_pairs(count: int) -> pd.DataFrame:
    return pairs_frame([(f"Question {i} first?", f"Question {i} second?", i % 2) for i in range(count)])


def as_rows(frame: pd.DataFrame) -> list[tuple]:
    return sorted(frame.itertuples(index=False, name=None))


def test_split_sizes_and_partition():
    pairs = distinct_pairs(1000)
    splits = split_pairs(pairs, val_fraction=0.1, test_fraction=0.2, seed=3)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (700, 100, 200)
    assert as_rows(pd.concat([splits.train, splits.val, splits.test])) == as_rows(pairs)
    for part in (splits.train, splits.val, splits.test):
        assert list(part.columns) == ["question1", "question2", "is_duplicate"]
        assert isinstance(part.index, pd.RangeIndex) and part.index.start == 0


def test_split_is_reproducible_per_seed():
    pairs = distinct_pairs(500)
    first, again, other = (split_pairs(pairs, seed=seed) for seed in (7, 7, 8))
    pd.testing.assert_frame_equal(first.test, again.test)
    pd.testing.assert_frame_equal(first.train, again.train)
    assert as_rows(first.test) != as_rows(other.test)


def grouped_pairs() -> pd.DataFrame:
    """500 small groups of 1-3 pairs sharing texts, plus one 200-pair hub group."""
    rng = np.random.default_rng(0)
    rows = []
    for group in range(500):
        texts = [f"Group {group} text {k}?" for k in range(4)]
        for _ in range(int(rng.integers(1, 4))):
            first, second = rng.choice(4, size=2, replace=False)
            rows.append((texts[first], texts[second], int(rng.integers(0, 2))))
    rows += [("The hub question?", f"Spoke {k}?", 1) for k in range(200)]
    return pairs_frame(rows)


def texts_of(frame: pd.DataFrame) -> set[str]:
    return {" ".join(text.lower().split()) for text in pd.concat([frame["question1"], frame["question2"]])}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_by_question_shares_no_text_between_splits(seed):
    pairs = grouped_pairs()
    splits = split_pairs(pairs, val_fraction=0.1, test_fraction=0.1, seed=seed, by_question=True)

    assert texts_of(splits.train).isdisjoint(texts_of(splits.test))
    assert texts_of(splits.train).isdisjoint(texts_of(splits.val))
    assert texts_of(splits.val).isdisjoint(texts_of(splits.test))
    assert as_rows(pd.concat([splits.train, splits.val, splits.test])) == as_rows(pairs)
    target = round(0.1 * len(pairs))
    # Groups hold at most 3 pairs, so greedy filling lands within 3 of the target.
    assert target - 3 <= len(splits.test) <= target
    assert target - 3 <= len(splits.val) <= target
    assert "the hub question?" in texts_of(splits.train)  # too big for a held-out split


def test_split_by_question_groups_texts_equal_after_normalising():
    pairs = pd.concat(
        [pairs_frame([("Alpha question?", "Beta?", 1), ("alpha   QUESTION? ", "Gamma?", 0)]), distinct_pairs(40)],
        ignore_index=True,
    )
    for seed in range(20):
        splits = split_pairs(pairs, val_fraction=0.25, test_fraction=0.25, seed=seed, by_question=True)
        homes = [name for name in ("train", "val", "test") if "alpha question?" in texts_of(getattr(splits, name))]
        assert len(homes) == 1
        assert len(getattr(splits, homes[0]).query("question2 in ['Beta?', 'Gamma?']")) == 2


def test_split_by_question_is_reproducible():
    pairs = grouped_pairs()
    first = split_pairs(pairs, seed=5, by_question=True)
    again = split_pairs(pairs, seed=5, by_question=True)
    other = split_pairs(pairs, seed=6, by_question=True)
    pd.testing.assert_frame_equal(first.test, again.test)
    assert as_rows(first.test) != as_rows(other.test)


