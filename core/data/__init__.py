"""Question-pair data: ``reading`` loads pairs from files or uploads (``pair_chunks`` reads them in chunks,
over ``parsing`` and ``text_source``, within the caps of ``limits``), ``splitting`` summarises and splits them,
and says whether they are enough to train on.
``from core.data import X`` works for every public name."""

from core.data.labels import MAX_LABEL_VALUES, LabelValuesError, normalise_label_map
from core.data.limits import input_limit
from core.data.pair_chunks import PairChunk, PairReader, PairsHead
from core.data.parsing import MissingColumnsError
from core.data.questions import (
    QUESTION_ALIASES,
    QuestionsReport,
    corpus_questions,
    load_questions,
    pair_key,
    pair_keys,
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
    DEFAULT_VAL_FRACTION,
    MIN_PAIRS_PER_CLASS,
    MIN_TRUSTED_VALIDATION_PAIRS,
    SPLIT_BY,
    Splits,
    TrainingProblem,
    dataset_summary,
    min_pairs_for_validation,
    pairs_fingerprint,
    question_groups,
    recorded_by_question,
    resampling_groups,
    resolve_split_by,
    seeded_sample,
    seen_pair_mask,
    small_validation_note,
    split_pairs,
    split_problems,
    split_with_files,
    training_problems,
)

__all__ = [
    "DELIMITERS", "EMPTY_QUESTION", "FALSE_LABELS", "MALFORMED_LINE", "MAX_EXAMPLES", "ROLES", "ROLE_ALIASES",
    "TRUE_LABELS", "UNREADABLE_LABEL", "DataError", "LoadReport", "Splits", "dataset_summary", "load_pairs",
    "normalise_questions", "pairs_fingerprint", "split_pairs", "seen_pair_mask",
    "QUESTION_ALIASES", "QuestionsReport", "corpus_questions", "load_questions", "pair_key", "pair_keys",
    "PairChunk", "PairReader", "PairsHead", "input_limit", "MissingColumnsError",
    "LabelValuesError", "MAX_LABEL_VALUES", "normalise_label_map",
    "DEFAULT_VAL_FRACTION", "SPLIT_BY", "question_groups", "recorded_by_question", "resampling_groups",
    "resolve_split_by", "seeded_sample",
    "split_with_files", "MIN_PAIRS_PER_CLASS", "MIN_TRUSTED_VALIDATION_PAIRS", "small_validation_note",
    "split_problems", "TrainingProblem", "min_pairs_for_validation", "training_problems",
]
