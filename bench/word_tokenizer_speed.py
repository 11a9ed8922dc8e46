"""The LSTM's word tokenizer on real questions: the `tokenizers` WordLevel pipeline the lab runs now
(issue 21) against the Python `re` split + dict lookup it replaced, side by side in one process.

Both sides tokenise the same distinct questions to the same ids (checked before timing); the reference
side is the old implementation, kept here only as the yardstick. Figures: seconds to build the
vocabulary (`WordLevelTrainer` against `Counter`) and to encode every question, medians of alternated
rounds, and their ratios. `.venv/bin/python bench/word_tokenizer_speed.py --quick`
"""
from __future__ import annotations

import re
from collections import Counter

from common import alternate, header, load_real_pairs, median, parser, report

# The split the lab used before issue 21 (Python's re on str.lower()); the pipeline's one pattern has
# the same meaning, in the Rust tokenizer's regex syntax.
OLD_WORD_PATTERN = re.compile(r"[0-9a-z\u00c0-\uffff]+(?:'[a-z]+)?|[^\s0-9a-z\u00c0-\uffff]")


def old_build(texts, min_freq: int, max_size: int) -> dict[str, int]:
    counts = Counter(word for text in texts for word in OLD_WORD_PATTERN.findall(text.lower()))
    kept = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_freq]
    return {word: i for i, word in enumerate(["<pad>", "<unk>"] + kept[: max_size - 2])}


def old_encode(index: dict[str, int], texts, max_length: int) -> list[list[int]]:
    get = index.get
    return [[get(w, 1) for w in OLD_WORD_PATTERN.findall(t.lower())[:max_length]] for t in texts]


def main() -> None:
    args = parser(__doc__).parse_args()
    header("word tokenizer: tokenizers pipeline vs the Python re split it replaced", args.quick)
    from core.data import corpus_questions
    from core.text.word_tokenizer import WordTokenizer

    pairs = load_real_pairs(max_rows=20_000 if args.quick else None)
    texts = corpus_questions(pairs)
    min_freq, max_size, max_length = 2, 30_000, 64

    new = WordTokenizer.build(texts, min_freq=min_freq, max_size=max_size, max_length=max_length)
    old_index = old_build(texts, min_freq, max_size)
    assert new.vocab == list(old_index), "the two vocabularies differ"
    new_ids = new.encode(texts)
    old_ids = old_encode(old_index, texts, max_length)
    mismatched = sum(list(new_ids.ids[row, : new_ids.lengths[row]]) != (ids or [0])
                     for row, ids in enumerate(old_ids))
    assert mismatched == 0, f"{mismatched} texts tokenise differently"

    rounds = 3 if args.quick else 5
    build = alternate({"pipeline": lambda: WordTokenizer.build(texts, min_freq=min_freq, max_size=max_size),
                       "python re": lambda: old_build(texts, min_freq, max_size)}, rounds)
    encode = alternate({"pipeline": lambda: new.encode(texts),
                        "python re": lambda: old_encode(old_index, texts, max_length)}, rounds)
    report(f"{len(texts):,} distinct questions, vocabulary {new.vocab_size:,}", {
        "build s (pipeline)": median(build["pipeline"]),
        "build s (python re)": median(build["python re"]),
        "build ratio pipeline / re": median(build["pipeline"]) / median(build["python re"]),
        "encode s (pipeline)": median(encode["pipeline"]),
        "encode s (python re)": median(encode["python re"]),
        "encode ratio pipeline / re": median(encode["pipeline"]) / median(encode["python re"]),
        "encode questions/s (pipeline)": len(texts) / median(encode["pipeline"]),
    })


if __name__ == "__main__":
    main()
