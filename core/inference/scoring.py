"""Score a whole file of pairs at a threshold, streamed in chunks read by ``core.data.PairReader``: every input
column kept, ``similarity`` and ``predicted_duplicate`` added, formula-safe; with labels, the metrics too.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

import numpy as np
import pandas as pd

from core.data import DataError
from core.data.labels import LabelTally
from core.data.reading import MALFORMED_LINE, describe_counts
from core.data.reading import PairReader
from core.inference.metrics import evaluate_scores
from core.saving.safe_csv import safe_csv_text
from core.saving.user_files import claim_files

CHUNK_ROWS = 20_000  # pairs read, scored and written at a time: bounds memory whatever the file size
# Pairs per model call when progress is followed, so it moves within a chunk while each call fills several batches.
SCORE_STEP = 2048
OUTPUT_COLUMNS = ("similarity", "predicted_duplicate")  # what is appended to each row, in this order

StepProgress = Callable[[int, "int | None"], None]  # (rows done, total or None: a stream's length is unknown)


@dataclass
class ScoreSteps:
    """The progress of ``score_file``'s three steps, in rows (by default not followed); ``reading`` is called with 0
    before the file's first pass, ``encoding`` within a chunk too, ``SCORE_STEP`` at a time."""

    reading: StepProgress = lambda done, total: None  # noqa: E731
    encoding: StepProgress = lambda done, total: None  # noqa: E731
    writing: StepProgress = lambda done, total: None  # noqa: E731


@dataclass
class ScoreReport:
    rows: int = 0  # data rows read
    malformed: int = 0  # records pandas skipped as malformed (more fields than the header), not written
    scored: int = 0  # rows with two non-empty questions, scored
    skipped_empty: int = 0  # rows with an empty question: written with an empty similarity
    labelled: int = 0  # scored rows whose label could be read
    metrics: dict = field(default_factory=dict)  # evaluate_scores on the labelled rows (empty without labels)
    warnings: list[str] = field(default_factory=list)  # as LoadReport's: which column was used, unread labels
    # The names the two output columns took: OUTPUT_COLUMNS, or another where the input already had that name.
    columns: dict = field(default_factory=lambda: {name: name for name in OUTPUT_COLUMNS})
    notes: list[str] = field(default_factory=list)  # what a user should know of the output: a renamed column


def output_names(input_columns) -> dict[str, str]:
    """Each of ``OUTPUT_COLUMNS`` -> the name it is written under: itself, or where the input has it already (case
    and surrounding spaces aside: a spreadsheet could not tell them apart), the first free ``<name>_1``, ..."""
    taken = {_column_key(column): str(column) for column in input_columns}
    names = {}
    for name in OUTPUT_COLUMNS:
        chosen, number = name, 0
        while _column_key(chosen) in taken:
            number += 1
            chosen = f"{name}_{number}"
        names[name] = chosen
        taken[_column_key(chosen)] = chosen
    return names


def _column_key(name) -> str:
    """What two column names must differ in to be told apart: ``str(name).strip().casefold()``."""
    return str(name).strip().casefold()


def renamed_note(names: dict[str, str], input_columns=()) -> str | None:
    """One line saying which output columns took another name (``output_names``) and which of ``input_columns``
    made them, or None."""
    kept = {_column_key(column): str(column) for column in input_columns}
    renamed = [f"{chosen!r} (the input's own {kept.get(_column_key(name), name)!r} is kept)"
               for name, chosen in names.items() if chosen != name]
    return f"the scores are written as {' and '.join(renamed)}" if renamed else None


@contextmanager
def _sink(out):
    """``out`` itself when it is an open text file, else a new file claimed and written whole (``user_files``)."""
    if hasattr(out, "write"):
        yield out
        return
    with claim_files([Path(out)]) as claim, claim.open(Path(out), "w", encoding="utf-8", newline="") as sink:
        yield sink


def score_file(model, source: str | Path, out: str | Path | TextIO, threshold: float, chunk_rows: int = CHUNK_ROWS,
               max_bytes: int | None = None, columns: dict[str, str] | None = None, label_map: dict | None = None,
               steps: ScoreSteps | None = None, names: list[str] | None = None) -> ScoreReport:
    """Score every pair of ``source`` with ``model`` into ``out`` (a new file's path, or an open text file).
    ``max_bytes``, ``columns``, ``label_map`` and ``names`` as ``load_pairs``'s; unusable input is a ``DataError``
    (found after the last row, it leaves no output file)."""
    source = Path(source)
    steps = steps or ScoreSteps()
    steps.reading(0, None)
    pairs = PairReader(source, columns, labels_required=False, all_text=True, chunk_rows=chunk_rows,
                       max_bytes=max_bytes, label_map=label_map, names=names)
    tally = LabelTally(pairs.head.name, pairs.head.header, pairs.head.positions, pairs.label_map)
    report = ScoreReport()
    labels_seen, scores_seen, input_columns = [], [], []
    with _sink(out) as sink:
        for number, pair_chunk in enumerate(pairs):
            tally.add(pair_chunk)
            chunk, first, second = pair_chunk.rows, pair_chunk.question1, pair_chunk.question2
            steps.reading(report.rows + len(chunk), None)
            usable = ((first != "") & (second != "")).to_numpy()
            similarity = np.full(len(chunk), np.nan)
            if usable.any():
                similarity[usable] = _scores(model, first[usable].tolist(), second[usable].tolist(), steps.encoding,
                                             report.scored)
            predicted = np.where(np.isnan(similarity), pd.NA, (similarity > threshold).astype(int))
            if number == 0:
                report.columns, input_columns = output_names(chunk.columns), list(chunk.columns)
            names = report.columns
            written = chunk.assign(**{names["similarity"]: np.round(similarity, 6),
                                      names["predicted_duplicate"]: predicted})
            sink.write(safe_csv_text(written, header=number == 0))
            steps.writing(report.rows + len(chunk), None)
            report.rows += len(chunk)
            report.malformed += len(pair_chunk.skipped)
            report.scored += int(usable.sum())
            report.skipped_empty += int((~usable).sum())
            if pair_chunk.labels is not None:
                keep = usable & pair_chunk.label_readable
                labels_seen.append(pair_chunk.labels[keep])
                scores_seen.append(similarity[keep])
        if report.rows == 0:  # as load_pairs says it; inside the claim, so no output file is left behind
            raise DataError(f"{pairs.head.name}: " + (f"no usable rows: dropped {describe_counts({MALFORMED_LINE: report.malformed})}"
                                                      if report.malformed else "the file has a header but no rows"))
        tally.refuse()  # inside the claim too: a refused file leaves no output
    label_warning = tally.unreadable_warning()
    report.warnings = pairs.head.warnings + ([label_warning] if label_warning else [])
    report.notes = [note for note in (renamed_note(report.columns, input_columns),) if note]
    if labels_seen:
        labels, scores = np.concatenate(labels_seen), np.concatenate(scores_seen)
        report.labelled = int(labels.size)
        if labels.size:
            report.metrics = evaluate_scores(labels, scores, threshold)
    return report


def _scores(model, first: list[str], second: list[str], progress: StepProgress, before: int) -> np.ndarray:
    """``model.score_pairs`` of the pairs, ``SCORE_STEP`` at a time, with ``progress``."""
    parts = []
    for start in range(0, len(first), SCORE_STEP):
        parts.append(model.score_pairs(first[start : start + SCORE_STEP], second[start : start + SCORE_STEP]))
        progress(before + start + len(parts[-1]), None)
    return np.concatenate(parts)
