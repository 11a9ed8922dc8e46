"""Tokenizers: word vocabulary building, padding tables, WordPiece against transformers, save/load."""

import json

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from core.text.token_table import TokenTable
from core.text.pair_table import read_tokenizer
from core.text.word_tokenizer import LEGACY_WORD_VOCAB_FILE, WORD_TOKENIZER_FILE, WordTokenizer
from core.text.wordpiece_tokenizer import (
    WORDPIECE_VOCAB_FILE,
    WordPieceTokenizer,
    bert_wordpiece,
    minilm_folder,
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
    for tiny in (2, 1, 0):  # <pad> and <unk> stay whatever the cap
        assert WordTokenizer.build(CORPUS, min_freq=1, max_size=tiny).vocab == ["<pad>", "<unk>"]


# After lower-casing: "zeta" x3, "b" x3; "éa", "ab", "z", "b's", "!" x2 each; "ä", "a", "10" x1 each. Words of
# equal count come in ascending code-point order (the rule of the Counter-based build before), which is
# neither the order they first appear in nor the reverse.
TIES = ["zeta b éa ab z b's !", "ZETA B ÉA Ab z b's !", "zeta b ä a 10"]


def test_build_orders_equal_counts_by_the_word_ascending():
    tok = WordTokenizer.build(TIES, min_freq=1)
    assert tok.vocab == ["<pad>", "<unk>", "b", "zeta",  # 3 each: "b" < "zeta"
                         "!", "ab", "b's", "z", "éa",  # 2 each: "!" < "ab" < "b's" < "z" < "éa"
                         "10", "a", "ä"]  # 1 each: "10" < "a" < "ä"


def test_build_min_freq_keeps_words_seen_exactly_that_often():
    assert WordTokenizer.build(TIES, min_freq=3).vocab == ["<pad>", "<unk>", "b", "zeta"]
    assert WordTokenizer.build(TIES, min_freq=2).vocab == ["<pad>", "<unk>", "b", "zeta", "!", "ab", "b's", "z", "éa"]
    assert WordTokenizer.build(TIES, min_freq=4).vocab == ["<pad>", "<unk>"]
    assert WordTokenizer.build(TIES, min_freq=0).vocab == WordTokenizer.build(TIES, min_freq=1).vocab
    # the cap cuts inside a group of equal counts by the same order
    assert WordTokenizer.build(TIES, min_freq=1, max_size=6).vocab == ["<pad>", "<unk>", "b", "zeta", "!", "ab"]


def test_split_lowercases_keeps_apostrophes_and_punctuation():
    tok = WordTokenizer(["<pad>", "<unk>"])
    assert tok.split("What's the BEST way, don't you think?") == [
        "what's", "the", "best", "way", ",", "don't", "you", "think", "?"]


def test_special_tokens_in_the_text_are_plain_words():
    """Training registers <pad> and <unk> with the Rust tokenizer; the pipeline built from its vocabulary
    must not, or a question containing "<pad>" would be given the padding id."""
    tok = WordTokenizer.build(["<pad> a <unk> a", "b"], min_freq=1)
    assert tok.vocab == ["<pad>", "<unk>", "<", ">", "a", "b", "pad", "unk"]
    assert tok.encode(["<pad>"]).ids.tolist() == [[2, 6, 3]]
    assert tok.encode(["<unk> <pad>"]).ids.tolist() == [[2, 7, 3, 2, 6, 3]]


def test_a_lone_surrogate_is_a_word_character():
    """Bytes that were not UTF-8 reach Python as lone surrogates (a command line's arguments); the Rust
    tokenizer takes UTF-8 only, so each becomes U+FFFD, which lies in the word range as they do."""
    tok = WordTokenizer.build(["a\udcffb c", "c"], min_freq=1)
    assert tok.vocab == ["<pad>", "<unk>", "c", "a\ufffdb"]
    assert tok.split("X\udcff, y") == ["x\ufffd", ",", "y"] and tok.count("X\udcff, y") == 3
    assert tok.encode(["a\udcffb c zz"]).ids.tolist() == [[3, 2, 1]]
    wordpiece = bert_wordpiece()  # WordPiece shares the encoding: [UNK] where the surrogate was, not a TypeError
    assert wordpiece.encode(["a\udcff"]).ids.tolist() == wordpiece.encode(["a\ufffd"]).ids.tolist()


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
    assert tok.pad_id == 0 and tok.encode([""]).ids[0, 0] == 101  # [CLS]
    assert tok.vocab_size == 30522
    tokens = tok.to_hf_tokenizer().encode("How old are you?").tokens
    assert tokens == ["[CLS]", "how", "old", "are", "you", "?", "[SEP]"]


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
    assert sorted(p.name for p in tmp_path.iterdir()) == [WORD_TOKENIZER_FILE]
    settings = tok.to_dict()
    assert settings == {"kind": "word", "max_length": MAX_LENGTH, "vocab_file": WORD_TOKENIZER_FILE}
    loaded = read_tokenizer(tmp_path, {"tokenizer": settings})
    assert isinstance(loaded, WordTokenizer)
    assert loaded.vocab == tok.vocab and loaded.max_length == MAX_LENGTH
    texts = ["a b zzz", "d e ? c b a a a", "A, B. C!"]
    np.testing.assert_array_equal(loaded.encode(texts).ids, tok.encode(texts).ids)
    # Hugging Face tokenizers reads the file as it is: the same ids, the same truncation.
    rust = Tokenizer.from_file(str(tmp_path / WORD_TOKENIZER_FILE))
    table = tok.encode(texts)
    assert [rust.encode(t).ids for t in texts] == [table.ids[i, : table.lengths[i]].tolist() for i in range(3)]
    assert [rust.encode(t).ids for t in texts[:2]] == [[3, 2, 1], [5, 7, 6, 4, 2, 3, 3]]  # b=2 a=3 c=4 d=5 ?=6 e=7


def test_saved_patterns_are_never_run(tmp_path):
    """Loading takes only the vocabulary from tokenizer.json: a file whose pipeline splits and lowercases
    otherwise still gives this project's ids."""
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    tok.save(tmp_path)
    document = json.loads((tmp_path / WORD_TOKENIZER_FILE).read_text(encoding="utf-8"))
    document["normalizer"] = None
    document["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated",
                                 "invert": False}
    document["model"]["unk_token"] = "b"
    (tmp_path / WORD_TOKENIZER_FILE).write_text(json.dumps(document), encoding="utf-8")
    loaded = read_tokenizer(tmp_path, {"tokenizer": tok.to_dict()})
    texts = ["A B zzz", "d e ? c b a a a"]
    np.testing.assert_array_equal(loaded.encode(texts).ids, tok.encode(texts).ids)
    assert loaded.hf_tokenizer_json() == tok.hf_tokenizer_json()


def test_a_legacy_word_vocab_loads_into_the_same_pipeline(tmp_path):
    """Folders saved before tokenizer.json hold word_vocab.txt (one word per line, id = line)."""
    (tmp_path / LEGACY_WORD_VOCAB_FILE).write_text("<pad>\n<unk>\nb\na\nc\nd\n?\ne\n", encoding="utf-8")
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=MAX_LENGTH)
    for vocab_file in (LEGACY_WORD_VOCAB_FILE, None):  # loaders before never read the setting
        settings = {"kind": "word", "max_length": MAX_LENGTH}
        if vocab_file:
            settings["vocab_file"] = vocab_file
        loaded = read_tokenizer(tmp_path, {"tokenizer": settings}, vocab_size=8)
        assert loaded.vocab == tok.vocab
        assert loaded.hf_tokenizer_json() == tok.hf_tokenizer_json()
        assert loaded.encode(["b a zzz E ?"]).ids.tolist() == [[2, 3, 1, 7, 6]]
    with pytest.raises(ValueError, match="vocab_file"):
        read_tokenizer(tmp_path, {"tokenizer": {"kind": "word", "max_length": 8, "vocab_file": "../elsewhere.txt"}})
    with pytest.raises(ValueError, match="vocab_file"):
        read_tokenizer(tmp_path, {"tokenizer": {"kind": "wordpiece", "max_length": 8,
                                                "vocab_file": LEGACY_WORD_VOCAB_FILE}})


def test_to_hf_tokenizer_is_a_copy_of_the_pipeline():
    tok = WordTokenizer.build(CORPUS, min_freq=1, max_length=3)
    copy = tok.to_hf_tokenizer()
    assert copy.to_str() == tok.hf_tokenizer_json()
    copy.no_truncation()  # changing the copy leaves the tokenizer alone
    assert len(copy.encode("a a a a a").ids) == 5
    assert tok.encode(["a a a a a"]).ids.tolist() == [[3, 3, 3]]


def test_wordpiece_save_load_round_trip(tmp_path):
    tok = bert_wordpiece(max_length=11)
    tok.save(tmp_path)
    assert (tmp_path / WORDPIECE_VOCAB_FILE).read_bytes() == (minilm_folder() / WORDPIECE_VOCAB_FILE).read_bytes()
    loaded = read_tokenizer(tmp_path, {"tokenizer": tok.to_dict()})
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
def test_read_tokenizer_rejects_bad_settings(tmp_path, settings):
    WordTokenizer(["<pad>", "<unk>", "a"]).save(tmp_path)
    with pytest.raises(ValueError):
        read_tokenizer(tmp_path, {"tokenizer": settings})


def test_bad_tokenizer_settings_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="<pad> and <unk>"):
        WordTokenizer(["a", "b", "c"])
    with pytest.raises(ValueError, match="once"):
        WordTokenizer(["<pad>", "<unk>", "a", "b", "a"])
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
    words = WordTokenizer(["<pad>", "<unk>", "how"], max_length=3)
    assert words.count("How old are you ?") == 5  # how, old, are, you, ?
    assert int(words.encode(["How old are you ?"]).lengths[0]) == 3  # cut to max_length
    pieces = bert_wordpiece(max_length=4)
    assert pieces.count("How old are you?") == 7  # [CLS] how old are you ? [SEP]
    assert int(pieces.encode(["How old are you?"]).lengths[0]) == 4
