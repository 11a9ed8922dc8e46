"""Model folders saved by earlier versions still load and score as they did.

``tests/fixtures/legacy/lstm_words/`` is a word-token LSTM saved before the word tokenizer became a
``tokenizers`` WordLevel pipeline (it holds ``word_vocab.txt``, not ``tokenizer.json``);
``lstm_words.expected.json`` holds what that code computed for three pairs: the similarities and the
token ids of the six texts, encoded together."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from core.models import load_model
from core.saving import CONFIG_FILE, RECORD_FILE, WEIGHTS_FILE, save_model
from core.text.word_tokenizer import LEGACY_WORD_VOCAB_FILE, WORD_TOKENIZER_FILE

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy"


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((LEGACY / "lstm_words.expected.json").read_text(encoding="utf-8"))


def _score(model, pairs) -> np.ndarray:
    return np.asarray(model.score_pairs([a for a, _ in pairs], [b for _, b in pairs]), dtype=float)


def test_the_legacy_word_lstm_scores_and_tokenizes_as_before(expected):
    folder = LEGACY / "lstm_words"
    assert (folder / LEGACY_WORD_VOCAB_FILE).is_file() and not (folder / WORD_TOKENIZER_FILE).exists()
    model, config = load_model(folder)
    assert config["tokenizer"]["vocab_file"] == LEGACY_WORD_VOCAB_FILE
    np.testing.assert_allclose(_score(model, expected["pairs"]), expected["similarity"], rtol=0, atol=1e-4)
    texts = [text for pair in expected["pairs"] for text in pair]
    assert model.tokenizer.encode(texts).ids.tolist() == expected["token_ids"]


def test_a_legacy_folder_saved_again_holds_tokenizer_json(expected, tmp_path):
    model, config = load_model(LEGACY / "lstm_words")
    folder = save_model(model, tmp_path / "again", metadata={"name": config["name"]})
    assert sorted(p.name for p in folder.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORD_TOKENIZER_FILE, RECORD_FILE])
    saved = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    assert saved["tokenizer"] == {"kind": "word", "max_length": 16, "vocab_file": WORD_TOKENIZER_FILE}
    # Hugging Face tokenizers reads it as it is, and gives the legacy ids (no padding: each text alone).
    rust = Tokenizer.from_file(str(folder / WORD_TOKENIZER_FILE))
    texts = [text for pair in expected["pairs"] for text in pair]
    unpadded = [[i for i in row if i != 0] for row in expected["token_ids"]]  # 0 is <pad>, never a word's id
    assert [rust.encode(text).ids for text in texts] == unpadded
    reloaded, _ = load_model(folder)
    assert reloaded.tokenizer.vocab == model.tokenizer.vocab
    np.testing.assert_allclose(_score(reloaded, expected["pairs"]), expected["similarity"], rtol=0, atol=1e-4)
