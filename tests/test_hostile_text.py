"""Hostile question text through the core (reliability case "hostile text").

Empty strings, 10,000-character questions, emoji, right-to-left scripts, bidi controls and
HTML/JS go through ``load_pairs`` (kept verbatim, only empty ones dropped), both tokenizers
(truncated to ``max_length``), zero-shot MiniLM and a tiny Siamese LSTM (finite cosines), and the
CLI's ``predict`` (JSON out, the text reaching the model unescaped). The app code must not render
user text as HTML: no ``unsafe_allow_html=True`` in ``app.py``, under ``pages/`` or ``lab/``.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from core.cli.main import main
from core.data import load_pairs
from core.models import MiniLM, SiameseLSTM, SiameseLSTMConfig
from core.text.word_tokenizer import WordTokenizer
from core.text.wordpiece_tokenizer import bert_wordpiece

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "<script>alert(1)</script>"

HOSTILE = [
    SCRIPT,
    '<img src=x onerror="alert(document.cookie)">',
    "</div><iframe src='javascript:alert(1)'></iframe>",
    "{{7*7}} ${7*7} <%= 7*7 %> '; DROP TABLE questions; --",
    "Why is 😀🔥👨‍👩‍👧‍👦 so popular? 🏳️‍🌈",
    "ما هي أفضل طريقة لتعلم البرمجة؟",  # Arabic
    "מה הדרך הטובה ביותר ללמוד תכנות?",  # Hebrew
    "Mixed English والعربية ועברית in one line?",
    "\u202egnp.exe\u202c and \u200f\u200e bidi marks\u200b?",  # RLO override, RLM/LRM, zero-width space
    "Café naïve e\u0301 ﷺ 你好 Ω≈ç√?",
    "why " * 2_500,  # 10,000 characters, 2,500 words
    "a" * 10_000,  # one 10,000-character word
    "😀" * 10_000,  # 10,000 emoji
]
assert all(len(text) == 10_000 for text in HOSTILE[-3:])


def write_rows(rows) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["question1", "question2", "is_duplicate"])
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def test_hostile_text_is_loaded_verbatim_and_only_empty_questions_are_dropped():
    rows = [(text, HOSTILE[(i + 1) % len(HOSTILE)], i % 2) for i, text in enumerate(HOSTILE)]
    rows.insert(3, ("", SCRIPT, 1))
    rows.insert(7, (SCRIPT, "   ", 0))
    pairs, report = load_pairs(write_rows(rows))

    kept = [row for row in rows if row[0].strip() and row[1].strip()]
    assert pairs["question1"].tolist() == [q1.strip() for q1, _, _ in kept]
    assert pairs["question2"].tolist() == [q2.strip() for _, q2, _ in kept]
    assert pairs["is_duplicate"].tolist() == [label for _, _, label in kept]
    assert report.dropped == {"empty question": 2}
    assert (report.rows_read, report.rows_kept) == (len(rows), len(HOSTILE))
    assert SCRIPT in pairs["question1"].tolist()  # not escaped, not stripped of tags
    # The 10,000-character questions arrive whole ("why " * 2500 loses only its trailing space).
    assert sorted(pairs["question1"].str.len())[-3:] == [9_999, 10_000, 10_000]


@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_hostile_text_in_tsv_and_gzip(delimiter):
    import gzip

    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter)
    writer.writerow(["question1", "question2", "is_duplicate"])
    writer.writerows([(text, SCRIPT, 1) for text in HOSTILE])
    pairs, report = load_pairs(gzip.compress(buffer.getvalue().encode("utf-8")))
    assert pairs["question1"].tolist() == [text.strip() for text in HOSTILE]
    assert report.dropped == {}


# ---------------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------------

ALL_TEXTS = HOSTILE + ["", " ", "\n"]


def assert_table_within(table, count: int, max_length: int, vocab_size: int):
    assert table.ids.shape[0] == count and table.ids.shape[1] <= max_length
    assert table.lengths.shape == (count,)
    assert (table.lengths >= 1).all() and (table.lengths <= max_length).all()
    assert table.ids.min() >= 0 and table.ids.max() < vocab_size


def test_word_tokenizer_truncates_and_never_fails():
    tokenizer = WordTokenizer.build(HOSTILE, min_freq=1, max_length=7)
    table = tokenizer.encode(ALL_TEXTS)
    assert_table_within(table, len(ALL_TEXTS), 7, tokenizer.vocab_size)
    long_rows = [ALL_TEXTS.index(text) for text in ("why " * 2_500, "a" * 10_000)]
    assert table.lengths[long_rows[0]] == 7  # 2,500 words cut to max_length
    assert table.lengths[long_rows[1]] == 1  # one word
    assert "script" in tokenizer.vocab and "<" in tokenizer.vocab  # tags are just tokens


def test_bert_wordpiece_truncates_to_max_length_and_never_fails():
    tokenizer = bert_wordpiece(max_length=32)
    table = tokenizer.encode(ALL_TEXTS)
    assert_table_within(table, len(ALL_TEXTS), 32, tokenizer.vocab_size)
    assert tokenizer.encode(["why " * 2_500]).lengths[0] == 32  # [CLS] + 30 words + [SEP]
    # A 10,000-character run of emoji is one over-long "word": WordPiece turns it into a single [UNK].
    assert tokenizer.to_hf_tokenizer().encode("😀" * 10_000).tokens == ["[CLS]", "[UNK]", "[SEP]"]
    assert "script" in tokenizer.to_hf_tokenizer().encode(SCRIPT).tokens


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    return MiniLM.pretrained()


def pair_lists():
    first = ALL_TEXTS
    second = list(reversed(ALL_TEXTS))
    return first, second


def test_minilm_scores_hostile_pairs(minilm):
    first, second = pair_lists()
    scores = minilm.score_pairs(first, second)
    assert scores.shape == (len(first),)
    assert np.isfinite(scores).all() and (np.abs(scores) <= 1 + 1e-6).all()
    identical = minilm.score_pairs(HOSTILE, HOSTILE)
    assert identical == pytest.approx(np.ones(len(HOSTILE)), abs=1e-5)


def test_tiny_lstm_scores_hostile_pairs():
    torch.manual_seed(0)
    tokenizer = WordTokenizer.build(HOSTILE, min_freq=1, max_length=7)
    model = SiameseLSTM(
        SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=16, hidden_size=32), tokenizer
    ).eval()
    first, second = pair_lists()
    scores = model.score_pairs(first, second)
    assert scores.shape == (len(first),) and np.isfinite(scores).all()
    vectors = model.encode(ALL_TEXTS)
    assert vectors.shape == (len(ALL_TEXTS), 32) and torch.isfinite(vectors).all()


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question1, question2",
    [
        (SCRIPT, "<b>bold</b> & 'quotes' \"double\""),
        ("ما هي أفضل طريقة لتعلم البرمجة؟", "מה הדרך הטובה ביותר ללמוד תכנות?"),
        ("why " * 2_500, "😀" * 10_000),
    ],
    ids=["html", "rtl", "10k chars"],
)
def test_cli_predict_prints_json_and_scores_the_raw_text(capsys, minilm, question1, question2):
    assert main(["predict", "--model", "minilm", question1, question2]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)  # one JSON object, nothing else on stdout
    assert set(result) == {"similarity", "threshold", "verdict"}
    assert "&lt;" not in out and "&amp;" not in out and "&#" not in out
    # The CLI scored exactly these strings: not an HTML-escaped copy of them.
    raw = float(minilm.score_pairs([question1], [question2])[0])
    assert result["similarity"] == pytest.approx(raw, abs=2e-6)
    if html.escape(question1) != question1:
        escaped = float(minilm.score_pairs([html.escape(question1)], [html.escape(question2)])[0])
        assert abs(escaped - raw) > 1e-4  # so the check above can tell the two apart


# ---------------------------------------------------------------------------------------------
# The app never renders user text as HTML
# ---------------------------------------------------------------------------------------------

UNSAFE_HTML = re.compile(r"unsafe_allow_html\s*=\s*True")


def app_sources() -> list[Path]:
    sources = [ROOT / "app.py"]
    for folder in ("pages", "lab"):
        sources += sorted((ROOT / folder).rglob("*.py"))
    assert len(sources) > 10, sources  # the scan sees the app's files
    return sources


def test_no_app_file_renders_raw_html():
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in app_sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if UNSAFE_HTML.search(line)
    ]
    assert offenders == [], f"unsafe_allow_html=True renders user text as HTML: {offenders}"
