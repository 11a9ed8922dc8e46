"""The word tokenizer of the Siamese LSTM: ``word_pipeline``, one Hugging Face ``tokenizers`` pipeline, is the only
definition of a word, run by training, encoding, loading and export alike. A saved folder holds it as
``tokenizer.json``, of which loading takes only the vocabulary, so no pattern from a folder ever runs.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

from core.saving.files import VOCAB_MAX_BYTES, parse_json, read_regular_file
from core.text.token_table import RustTokenizer, check_max_length, check_vocab_size, utf8

PAD_TOKEN, UNK_TOKEN = "<pad>", "<unk>"  # ids 0 and 1 of every word vocabulary
WORD_TOKENIZER_FILE = "tokenizer.json"  # a word-token model's tokenizer: our pipeline and its vocabulary
LEGACY_WORD_VOCAB_FILE = "word_vocab.txt"  # what word-token models saved before: one word per line


def word_pipeline(vocab: Mapping[str, int], max_length: int | None) -> Tokenizer:
    """The word tokenizer over ``vocab`` (word -> id; unknown words -> ``<unk>``), truncating to
    ``max_length`` (None: no truncation), no padding. Text is lower-cased, then split into words (keeping
    one inner apostrophe: "don't", "what's") and single punctuation marks; whitespace separates them."""
    tokenizer = Tokenizer(models.WordLevel(dict(vocab), unk_token=UNK_TOKEN))
    # Python's str.lower(), which built the first word vocabularies, writes a capital sigma that ends a word in its
    # final form (Unicode's Final_Sigma rule); Lowercase lowers one character at a time, so those come first.
    final_sigma = Regex(r"(?<=[\p{Cased}&&\P{Case_Ignorable}]\p{Case_Ignorable}*)\x{3a3}"
                        r"(?!\p{Case_Ignorable}*[\p{Cased}&&\P{Case_Ignorable}])")
    tokenizer.normalizer = normalizers.Sequence([normalizers.Replace(final_sigma, "\u03c2"), normalizers.Lowercase()])
    # The tokens are the pattern's matches (invert=True): a word, or any other single character except the
    # whitespace below U+00C0, which only separates words. Whitespace from U+00C0 up lies in the word range and
    # stays inside a word, as in the vocabularies saved before this pipeline.
    words = Regex(r"[0-9a-z\x{c0}-\x{ffff}]+(?:'[a-z]+)?"
                  r"|[^\t\n\x{b}\x{c}\r\x{1c}-\x{1f} \x{85}\x{a0}0-9a-z\x{c0}-\x{ffff}]")
    tokenizer.pre_tokenizer = pre_tokenizers.Split(words, behavior="removed", invert=True)
    if max_length is not None:
        tokenizer.enable_truncation(max_length)
    return tokenizer


def word_vocab_from_lines(data: bytes, vocab_size: int | None, path: Path) -> list[str]:
    """The words of a legacy ``word_vocab.txt`` (one per line, id = position among the non-empty lines)."""
    vocab = [word for word in data.decode("utf-8").split("\n") if word != ""]
    check_vocab_size(len(vocab), vocab_size, path)
    return vocab


def word_vocab_from_json(data: bytes, vocab_size: int | None, path: Path) -> list[str]:
    """The words of a ``tokenizer.json``'s WordLevel vocabulary in id order; only ``model.vocab`` is read, and its
    ids must be exactly 0..n-1."""
    document = parse_json(data, path)
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordLevel":
        raise ValueError(f"{path} is not a WordLevel tokenizer (its model.type must be \"WordLevel\")")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise ValueError(f"{path}: model.vocab must be a JSON object of word -> id")
    check_vocab_size(len(vocab), vocab_size, path)
    words: list[str | None] = [None] * len(vocab)
    for word, index in vocab.items():
        if type(index) is not int or not 0 <= index < len(words) or words[index] is not None:
            raise ValueError(f"{path}: the vocabulary's ids must be exactly 0..{len(words) - 1}, each once "
                             f"(word {word[:40]!r} has id {str(index)[:40]})")
        words[index] = word
    return words  # every slot filled: n distinct ids in 0..n-1


class WordTokenizer(RustTokenizer):
    """Word-level vocabulary built from training questions, for the Siamese LSTM."""

    kind, file = "word", WORD_TOKENIZER_FILE
    pad_token, unk_token = PAD_TOKEN, UNK_TOKEN
    pad_id, unk_id = 0, 1

    def __init__(self, vocab: Sequence[str], max_length: int = 64):
        """``vocab``: the words in id order, starting with ``<pad>`` and ``<unk>``, each once."""
        if list(vocab[:2]) != [self.pad_token, self.unk_token]:
            raise ValueError("a word vocabulary must start with <pad> and <unk>")
        index = {word: i for i, word in enumerate(vocab)}
        if len(index) != len(vocab):
            raise ValueError("a word vocabulary must list each word once")
        self.vocab = list(vocab)
        self.max_length = check_max_length(max_length)
        self._tokenizer = word_pipeline(index, self.max_length)

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 2, max_size: int = 30000, max_length: int = 64) -> "WordTokenizer":
        """Words seen at least ``min_freq`` times, most frequent first (ties by code points), up to ``max_size``
        entries with ``<pad>`` and ``<unk>``."""
        trainer = trainers.WordLevelTrainer(vocab_size=max(2, max_size), min_frequency=max(0, min_freq),
                                            special_tokens=[PAD_TOKEN, UNK_TOKEN], show_progress=False)
        tokenizer = word_pipeline({PAD_TOKEN: 0, UNK_TOKEN: 1}, max_length=None)
        tokenizer.train_from_iterator(map(utf8, texts), trainer)
        trained = tokenizer.get_vocab(with_added_tokens=False)
        # A fresh pipeline over the trained words: training also registers <pad> and <unk> as added tokens,
        # which would match those strings in raw text.
        return cls(sorted(trained, key=trained.__getitem__), max_length=max_length)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def split(self, text: str) -> list[str]:
        """The words of ``text`` as the pipeline sees them (lower-cased, uncut by ``max_length``)."""
        normalized = self._tokenizer.normalizer.normalize_str(utf8(text))
        return [word for word, _ in self._tokenizer.pre_tokenizer.pre_tokenize_str(normalized)]

    def count(self, text: str) -> int:
        """Tokens ``text`` has before ``max_length`` cuts it."""
        return len(self.split(text))

    def save(self, folder: Path) -> None:
        (Path(folder) / WORD_TOKENIZER_FILE).write_text(self.hf_tokenizer_json(), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, max_length: int, vocab_size: int | None = None,
             vocab_file: str | None = None) -> "WordTokenizer":
        """The vocabulary saved in ``folder`` under ``vocab_file`` (``tokenizer.json``, or a legacy ``word_vocab.txt``,
        also when the setting is absent); a ValueError unless it has ``vocab_size`` words when given."""
        readers = {WORD_TOKENIZER_FILE: word_vocab_from_json, LEGACY_WORD_VOCAB_FILE: word_vocab_from_lines}
        name = LEGACY_WORD_VOCAB_FILE if vocab_file is None else vocab_file
        if not isinstance(name, str) or name not in readers:
            raise ValueError(f"a word tokenizer's vocab_file must be {' or '.join(readers)}, got {vocab_file!r}")
        path = Path(folder) / name
        return cls(readers[name](read_regular_file(path, VOCAB_MAX_BYTES, folder), vocab_size, path), max_length=max_length)
