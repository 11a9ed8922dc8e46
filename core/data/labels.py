"""What a label column means, and whether a file's columns hold what their roles say. ``parse_labels`` reads labels
by the documented spellings or a label map's values and rules (">=4"). ``LabelTally`` follows a pass over a file's
chunks, then ``refuse``s a question column of labels and (without a map) a label column mostly of other values (a
``LabelValuesError`` carrying them, so the app can offer a mapping). ``guess_label`` only pre-fills the Data page's
mapping; reading never guesses.
"""
from __future__ import annotations

import operator
import re
from collections import Counter

import numpy as np
import pandas as pd

from core.data.limits import DataError, clip

TRUE_LABELS = frozenset({"1", "1.0", "true", "yes", "t", "y"})
FALSE_LABELS = frozenset({"0", "0.0", "false", "no", "f", "n"})
LABEL_SPELLINGS = TRUE_LABELS | FALSE_LABELS
# Words that say what a pair is, for the Data page's first guess only (``guess_label``); separators are read as "_".
GUESSED_TRUE = frozenset({"match", "matches", "matched", "matching", "duplicate", "duplicates", "dup", "dupe",
                          "is_duplicate", "same", "similar", "paraphrase", "paraphrases", "equivalent"})
GUESSED_FALSE = frozenset({"different", "not_duplicate", "non_duplicate", "no_duplicate", "not_dup", "not_match",
                           "no_match", "non_match", "nomatch", "mismatch", "not_same", "not_similar", "dissimilar",
                           "not_paraphrase", "non_paraphrase", "not_equivalent", "distinct"})
MAX_LABEL_VALUES = 20  # distinct label values a report or a refusal lists, most frequent first
QUOTED_VALUES = 3  # values a message quotes
_TRACKED_VALUES = 1_000  # distinct label values counted; a column with more is no label column anyway
_HEAD_ROWS = 256  # question values looked at first: one that is not a label decides at once
_MAP_HINT = "--label-map on the command line or the label mapping on the Data page"


class LabelValuesError(DataError):
    """A label column that does not hold duplicate labels; its ``values`` (most frequent first), ``header`` and
    ``columns`` (role -> name) let a caller offer a label mapping."""

    def __init__(self, message: str, column: str, values: list[str], header: list[str], columns: dict[str, str]):
        super().__init__(message)
        self.column, self.values, self.header, self.columns = column, list(values), list(header), dict(columns)


def normalise_label_map(label_map) -> dict[str, int] | None:
    """``label_map`` (value -> 1/0 or True/False, a mapping or (value, label) pairs, so a value given twice is seen)
    with its values stripped and lower-cased; None stays None. A DataError when it is empty, a value is blank, a
    label is not 0 or 1, or one value gets both."""
    if label_map is None:
        return None
    normalised: dict[str, int] = {}
    for value, label in (label_map.items() if hasattr(label_map, "items") else label_map):
        key = str(value).strip().lower()
        if not key:
            raise DataError("the label map has a blank value; name each label value, e.g. Relevant=1")
        if isinstance(label, str):
            label = label.strip()
        if label not in (0, 1, "0", "1"):  # True and False compare equal to 1 and 0
            raise DataError(f"the label map gives {clip(value)!r} the label {clip(repr(label))}; labels are 1 "
                            "(duplicate) and 0 (not duplicate)")
        if normalised.get(key, int(label)) != int(label):
            raise DataError(f"the label map gives {clip(value)!r} both 1 and 0 (values match ignoring case and spaces)")
        normalised[key] = int(label)
    if not normalised:
        raise DataError("the label map is empty; give at least one value a label, e.g. Relevant=1")
    return normalised


# A label map's key may be a rule on a numeric label instead of a value: ">=4" -> 1 maps every score of 4 or more.
RULE = re.compile(r"^(>=|<=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+))$")
COMPARE = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


def label_value(value, label_map: dict[str, int] | None = None) -> int:
    """1, 0, or -1 for unreadable: by ``label_map`` (its values first, then its rules in order), else by the
    documented spellings."""
    if label_map is not None:
        keys = [str(value).strip().lower()]
        if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
            keys.append(str(int(value)))  # as a map writes it: pandas reads a column of "1" and "" as floats
        found = [label_map[key] for key in keys if key in label_map]
        if found:
            return found[0]
        rules = [(RULE.match(key), label) for key, label in label_map.items()]
        try:
            number = float(str(value).strip())
        except ValueError:
            return -1
        return next((label for rule, label in rules if rule and np.isfinite(number)
                     and COMPARE[rule[1]](number, float(rule[2]))), -1)
    if isinstance(value, (bool, int, float, np.number)):
        number = float(value)
    else:
        text = str(value).strip().lower()
        if text in TRUE_LABELS:
            return 1
        if text in FALSE_LABELS:
            return 0
        try:
            number = float(text)  # numeric spellings such as "1.00" or "+1"
        except ValueError:
            return -1
    return 1 if number == 1 else 0 if number == 0 else -1


def guess_label(value) -> int | None:
    """What a label value most likely means: 1 or 0 for the documented spellings and words such as "match" /
    "different"; None when the word does not say (the user is asked)."""
    known = label_value(value)
    if known >= 0:
        return known
    word = re.sub(r"[\s_-]+", "_", str(value).strip().lower())
    return 1 if word in GUESSED_TRUE else 0 if word in GUESSED_FALSE else None


def parse_labels(column: pd.Series, label_map: dict[str, int] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(labels as int64, 0 where unreadable; readable mask; distinct values as text -> rows), decided once per
    distinct value (pandas may give ints, floats, bools or text). A missing value counts as ""."""
    codes, distinct = pd.factorize(column)  # missing values get code -1
    values = distinct.tolist()
    verdicts = np.array([label_value(value, label_map) for value in values] + [-1], dtype=np.int64)
    labels = verdicts[codes]  # code -1 picks the trailing "unreadable" verdict
    readable = labels >= 0
    rows = np.bincount(codes + 1, minlength=len(values) + 1)  # missing first
    counts: dict[str, int] = {}
    for text, count in zip([""] + [str(value).strip() for value in values], rows.tolist()):
        if count:
            counts[text] = counts.get(text, 0) + count
    return np.where(readable, labels, 0), readable, counts


def quoted(values) -> str:
    return ", ".join(f'"{clip(value)}"' if str(value).strip() else "(empty)" for value in values)


def accepted_labels(label_map: dict[str, int] | None) -> str:
    if label_map is not None:
        return "the label map's " + ", ".join(f'"{clip(value)}"={label}' for value, label in label_map.items())
    return (", ".join(sorted(TRUE_LABELS)) + " for a duplicate; " + ", ".join(sorted(FALSE_LABELS))
            + " for not a duplicate")


class LabelTally:
    """What ``refuse`` and ``unreadable_warning`` need of a file, gathered chunk by chunk (``add``)."""

    def __init__(self, name: str, header: list[str], positions: dict[str, int], label_map: dict[str, int] | None):
        self.name, self.header, self.positions, self.label_map = name, header, positions, label_map
        self.label_column = header[positions["is_duplicate"]] if "is_duplicate" in positions else None
        self.values: Counter[str] = Counter()  # the label column's values as text -> rows
        self.readable = self.unreadable = 0  # rows with both questions, by whether their label was read
        self._unreadable_values: list[pd.Series] = []  # their label text, indexed by row position
        self._spellings = LABEL_SPELLINGS | set(label_map or ())
        self._holds_text: set[str] = set()  # question roles seen with a value that is not a label
        self._label_like: dict[str, list[str]] = {"question1": [], "question2": []}  # the first few such values

    def add(self, chunk) -> None:
        both = ((chunk.question1 != "") & (chunk.question2 != "")).to_numpy(dtype=bool)
        for role, questions in (("question1", chunk.question1), ("question2", chunk.question2)):
            if role not in self._holds_text:
                self._look_at_questions(role, questions, both)
        if chunk.labels is None:
            return
        for text, count in (chunk.label_values or {}).items():
            if text in self.values or len(self.values) < _TRACKED_VALUES:
                self.values[text] += count
        unread = both & ~chunk.label_readable
        self.readable += int(np.count_nonzero(both & chunk.label_readable))
        self.unreadable += int(np.count_nonzero(unread))
        if unread.any():
            column = chunk.rows.iloc[:, self.positions["is_duplicate"]]
            texts = column[unread].fillna("").astype(str).str.strip()
            self._unreadable_values.append(texts.set_axis(chunk.start + np.flatnonzero(unread)))

    def _look_at_questions(self, role: str, questions: pd.Series, both: np.ndarray) -> None:
        for part in (slice(None, _HEAD_ROWS), slice(_HEAD_ROWS, None)):
            present = questions.iloc[part][both[part]]
            if not present.str.lower().isin(self._spellings).all():
                self._holds_text.add(role)
                return
            seen = self._label_like[role]
            seen += [value for value in dict.fromkeys(present.head(64)) if value not in seen][:QUOTED_VALUES - len(seen)]

    def label_values(self) -> dict[str, int]:
        return dict(self.values.most_common(MAX_LABEL_VALUES))

    def refuse(self) -> None:
        """A DataError for a question column of labels; a LabelValuesError for a label column of other values."""
        for role, which in (("question1", "first"), ("question2", "second")):
            if role not in self._holds_text and self._label_like[role]:
                column = self.header[self.positions[role]]
                raise DataError(f'{self.name}: the {role} column "{clip(column)}" holds labels, not questions '
                                f"(values such as {quoted(self._label_like[role])}); give {role} the column of "
                                f"the {which} question")
        if self.label_map is None and self.unreadable >= 2 and self.unreadable > self.readable:
            found = self._found(pd.concat(self._unreadable_values))
            values = [value for value, _ in self.values.most_common() if value][:MAX_LABEL_VALUES]
            raise LabelValuesError(
                f'{self.name}: the is_duplicate column "{clip(self.label_column)}" does not hold duplicate '
                f"labels: {self.unreadable:,} of {self.readable + self.unreadable:,} rows have another value "
                f"({found}); accepted: {accepted_labels(None)}; give each value a label with {_MAP_HINT}, or "
                "choose another column",
                self.label_column, values, self.header,
                {role: self.header[position] for role, position in self.positions.items()})

    def unreadable_warning(self, rows: int | None = None) -> str | None:
        """One line on the rows with both questions and an unreadable label among the first ``rows`` rows: the
        values found, those accepted, where to map them. None without any."""
        found = pd.concat([pd.Series([], dtype=object), *self._unreadable_values])
        if rows is not None:
            found = found[found.index < rows]
        if found.empty:
            return None
        count = len(found)
        return (f"{count:,} {'row has' if count == 1 else 'rows have'} an unreadable label in column "
                f'"{clip(self.label_column)}" ({self._found(found)}); accepted: {accepted_labels(self.label_map)}; '
                f"give such values a label with {_MAP_HINT}")

    @staticmethod
    def _found(values: pd.Series) -> str:
        distinct = [value for value, _ in Counter(values.tolist()).most_common()]
        if len(distinct) > QUOTED_VALUES:
            return f"{len(distinct):,} distinct values, such as {quoted(distinct[:QUOTED_VALUES])}"
        return f"{'value' if len(distinct) == 1 else 'values'} {quoted(distinct)}"
