"""Question-pair data: ``reading`` loads pairs from files or uploads (through ``limits``' bounded stream and caps),
``questions`` reads corpora, ``splitting`` summarises and splits pairs and says whether they are enough to train
on. ``from core.data import X`` works for every public name."""

from core.data.labels import FALSE_LABELS, TRUE_LABELS, LabelValuesError, normalise_label_map
from core.data.questions import corpus_questions, load_questions, pair_key, pair_keys
from core.data.reading import (
    EMPTY_QUESTION, GROUP, MALFORMED_LINE, ROLES, UNREADABLE_LABEL, DataError, LoadReport, MissingColumnsError,
    NoHeaderRowError, PairReader, load_pairs, normalise_questions,
)
from core.data.splitting import (
    MIN_PAIRS_PER_CLASS, SPLIT_BY, Splits, dataset_summary, min_pairs_for_validation, pairs_fingerprint,
    question_groups, recorded_by_question, resampling_groups, resolve_split_by, seeded_sample, seen_pair_mask,
    small_validation_note, split_pairs, split_problems, split_with_files, training_problems,
)
