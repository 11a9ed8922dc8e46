"""Tokenizers: word vocabulary building, padding tables, WordPiece against transformers, save/load."""

import numpy as np
import pytest
import torch

from core.text.tokenizers import (
    WORD_VOCAB_FILE,
    WORDPIECE_VOCAB_FILE,
    TokenTable,
    WordPieceTokenizer,
    WordTokenizer,
    bert_wordpiece,
    minilm_folder,
    tokenizer_from_dict,
)

MAX_LENGTH = 7  # differs from every other size below

# "b" x4, "a" x3, "c" x3, "d" x2, "e" x1 (and "?" x1) -> order by count, ties alphabetical.
CORPUS = ["a b c d", "b a b c", "a b c d e ?"]


def test_build_orders_by_frequency_and_keeps_pad_and_unk_first():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    assert tok.vocab[:2] == ["<pad>", "<unk>"]
    assert (tok.pad_id, tok.unk_id) == (0, 1)
    assert tok.vocab[2:] == ["b", "a", "c", "d", "?", "e"]
    assert tok.vocab_size == 8


def test_build_min_freq_drops_rare_words():
    tok = WordTokenizer.build(CORPUS, min_freq=3, max_length=MAX_LENGTH)
    assert tok.vocab == ["<pad>", "<unk>", "b", "a", "c"]
    tok2 = WordTokenizer.build(CORPUS, min_freq=2, max_length=MAX_LENGTH)
    assert tok2.vocab == ["<pad>", "<unk>", "b", "a", "c", "d"]


def test_build_max_size_counts_pad_and_unk():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_size=4, max_length=MAX_LENGTH)
    assert tok.vocab == ["<pad>", "<unk>", "b", "a"]
    assert tok.vocab_size == 4


def test_split_lowercases_keeps_apostrophes_and_punctuation():
    assert WordTokenizer.split("What's the BEST way, don't you think?") == [
        "what's", "the", "best", "way", ",", "don't", "you", "think", "?"]


def test_encode_pads_to_longest_and_records_lengths():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    table = tok.encode(["b a", "c zzz d b", "e"])
    assert isinstance(table, TokenTable)
    assert table.ids.shape == (3, 4)
    assert table.ids.dtype == np.int32 and table.lengths.dtype == np.int32
    np.testing.assert_array_equal(table.lengths, [2, 4, 1])
    # b=2 a=3 c=4 d=5 ?=6 e=7; unknown "zzz" -> 1; pads are 0
    np.testing.assert_array_equal(table.ids, [[2, 3, 0, 0], [4, 1, 5, 2], [7, 0, 0, 0]])
    assert len(table) == 3


def test_encode_truncates_at_max_length():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    long_text = " ".join(["a"] * 20)
    table = tok.encode([long_text, "b"])
    assert table.ids.shape == (2, MAX_LENGTH)
    np.testing.assert_array_equal(table.lengths, [MAX_LENGTH, 1])
    assert (table.ids[0] == 3).all()


def test_empty_text_gets_one_position():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    table = tok.encode(["", "a b c"])
    np.testing.assert_array_equal(table.lengths, [1, 3])
    assert table.ids[0, 0] == tok.pad_id
    only_empty = tok.encode(["", "   "])
    assert only_empty.ids.shape == (2, 1)
    np.testing.assert_array_equal(only_empty.lengths, [1, 1])


def test_coverage_counts_known_word_occurrences():
    tok = WordTokenizer.build(CORPUS, min_freq=3, max_length=MAX_LENGTH)  # knows b, a, c
    assert tok.coverage(["a b zzz yyy", "c"]) == pytest.approx(3 / 5)
    assert tok.coverage([]) == 0.0


def test_take_trims_to_longest_row_and_mask_matches_lengths():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    texts = ["a", "a b c d e ? b", "b c", "c d e"]
    table = tok.encode(texts)
    assert table.ids.shape == (4, 7)
    ids, mask = table.take([0, 2, 3])
    assert ids.shape == (3, 3) and mask.shape == (3, 3)
    assert ids.dtype == torch.int64 and mask.dtype == torch.bool
    np.testing.assert_array_equal(mask.sum(1).numpy(), [1, 2, 3])
    np.testing.assert_array_equal(ids.numpy(), table.ids[[0, 2, 3], :3])
    expected_mask = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(mask.numpy(), expected_mask)
    # padded positions are exactly the masked-out ones
    assert (ids[~mask] == tok.pad_id).all()


def test_wordpiece_matches_transformers_bert_tokenizer():
    from transformers import BertTokenizerFast

    vocab_file = minilm_folder() / WORDPIECE_VOCAB_FILE
    reference = BertTokenizerFast(str(vocab_file))
    tok = bert_wordpiece(max_length=32)
    texts = ["How old are you?", "What's the best way to learn Python-3 quickly?", "Über café naïve"]
    table = tok.encode(texts)
    for row, text in enumerate(texts):
        expected = reference(text)["input_ids"]
        assert table.ids[row, : table.lengths[row]].tolist() == expected
    first = table.ids[0, : table.lengths[0]].tolist()
    assert first[0] == 101 and first[-1] == 102
    assert tok.pad_id == 0 and tok.cls_id == 101
    assert tok.vocab_size == 30522
    assert tok.tokens("How old are you?") == ["[CLS]", "how", "old", "are", "you", "?", "[SEP]"]


def test_wordpiece_truncates_to_max_length_including_specials():
    tok = bert_wordpiece(max_length=5)
    table = tok.encode(["how old are you today my friend", ""])
    assert table.ids.shape == (2, 5)
    assert table.ids[0].tolist() == [101, 2129, 2214, 2024, 102]
    assert table.ids[1].tolist() == [101, 102, 0, 0, 0]
    np.testing.assert_array_equal(table.lengths, [5, 2])


def test_word_tokenizer_save_load_round_trip(tmp_path):
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    tok.save(tmp_path)
    assert (tmp_path / WORD_VOCAB_FILE).is_file()
    settings = tok.to_dict()
    assert settings == {"kind": "word", "max_length": MAX_LENGTH, "vocab_file": WORD_VOCAB_FILE}
    loaded = tokenizer_from_dict(settings, tmp_path)
    assert isinstance(loaded, WordTokenizer)
    assert loaded.vocab == tok.vocab and loaded.max_length == MAX_LENGTH
    texts = ["a b zzz", "d e ? c b a a a"]
    np.testing.assert_array_equal(loaded.encode(texts).ids, tok.encode(texts).ids)


def test_wordpiece_save_load_round_trip(tmp_path):
    tok = bert_wordpiece(max_length=11)
    tok.save(tmp_path)
    assert (tmp_path / WORDPIECE_VOCAB_FILE).read_bytes() == (minilm_folder() / WORDPIECE_VOCAB_FILE).read_bytes()
    loaded = tokenizer_from_dict(tok.to_dict(), tmp_path)
    assert isinstance(loaded, WordPieceTokenizer) and loaded.max_length == 11
    texts = ["How old are you?", "a much longer question that will be cut at eleven tokens for sure"]
    a, b = loaded.encode(texts), tok.encode(texts)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.lengths, b.lengths)


@pytest.mark.parametrize("settings", [
    {"kind": "bpe", "max_length": 8},
    {"max_length": 8},
    {"kind": "word", "max_length": 0},
    {"kind": "word", "max_length": "8"},
    {"kind": "word", "max_length": 10_000},
    {"kind": "word"},
])
def test_tokenizer_from_dict_rejects_bad_settings(tmp_path, settings):
    WordTokenizer(["<pad>", "<unk>", "a"]).save(tmp_path)
    with pytest.raises(ValueError):
        tokenizer_from_dict(settings, tmp_path)


def test_bad_tokenizer_settings_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="<pad> and <unk>"):
        WordTokenizer(["a", "b", "c"])
    with pytest.raises(ValueError):
        WordTokenizer(["<pad>", "<unk>", "a"], max_length=0)
    with pytest.raises(ValueError):
        bert_wordpiece(max_length=0)
    not_bert = tmp_path / "vocab.txt"
    not_bert.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(ValueError, match="WordPiece"):
        WordPieceTokenizer(not_bert)
    with pytest.raises(FileNotFoundError):
        WordPieceTokenizer(tmp_path / "missing" / "vocab.txt")


def test_count_is_the_length_before_truncation():
    from core.text.tokenizers import WordTokenizer, bert_wordpiece

    words = WordTokenizer(["<pad>", "<unk>", "how"], max_length=3)
    assert words.count("How old are you ?") == 5  # how, old, are, you, ?
    assert int(words.encode(["How old are you ?"]).lengths[0]) == 3  # cut to max_length
    pieces = bert_wordpiece(max_length=4)
    assert pieces.count("How old are you?") == 7  # [CLS] how old are you ? [SEP]
    assert int(pieces.encode(["How old are you?"]).lengths[0]) == 4
