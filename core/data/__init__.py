"""Question-pair data: ``reading`` loads pairs from files or uploads (with ``parsing`` underneath),
``splitting`` summarises and splits them. ``from core.data import X`` works for every public name."""

from core.data.questions import (
    QUESTION_ALIASES,
    QuestionsReport,
    corpus_questions,
    load_questions,
)
from core.data.reading import (
    DELIMITERS,
    EMPTY_QUESTION,
    FALSE_LABELS,
    MALFORMED_LINE,
    MAX_EXAMPLES,
    ROLE_ALIASES,
    ROLES,
    TRUE_LABELS,
    UNREADABLE_LABEL,
    DataError,
    LoadReport,
    load_pairs,
    normalise_questions,
)
from core.data.splitting import (
    Splits,
    dataset_summary,
    pairs_fingerprint,
    split_pairs,
    unseen_mask,
)

__all__ = [
    "DELIMITERS", "EMPTY_QUESTION", "FALSE_LABELS", "MALFORMED_LINE", "MAX_EXAMPLES", "ROLES", "ROLE_ALIASES",
    "TRUE_LABELS", "UNREADABLE_LABEL", "DataError", "LoadReport", "Splits", "dataset_summary", "load_pairs",
    "normalise_questions", "pairs_fingerprint", "split_pairs", "unseen_mask",
    "QUESTION_ALIASES", "QuestionsReport", "corpus_questions", "load_questions",
]
