"""Score a whole file of pairs at a threshold, streamed: a 1 GB file never sits in memory twice.

The file is read in chunks of rows (CSV or TSV, plain or gzip; the delimiter and the question
columns found as ``core.data`` finds them, the label column optional). Each chunk is scored and
appended to the output, which keeps every input column and adds ``similarity`` and
``predicted_duplicate`` (1 when the similarity is above the threshold), formula-safe. When the file
has labels, the metrics of ``core.inference.metrics.evaluate_scores`` come back too.
"""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from core.data.parsing import DataError, _role_candidates, choose_delimiter
from core.data.reading import FALSE_LABELS, TRUE_LABELS
from core.inference.metrics import evaluate_scores
from core.saving.safe_csv import safe_csv_text

CHUNK_ROWS = 20_000  # pairs read, scored and written at a time: bounds memory whatever the file size
_HEAD_BYTES = 65_536


@dataclass
class ScoreReport:
    rows: int = 0  # data rows read
    scored: int = 0  # rows with two non-empty questions, scored
    skipped_empty: int = 0  # rows with an empty question: written with an empty similarity
    labelled: int = 0  # scored rows whose label could be read
    metrics: dict = field(default_factory=dict)  # evaluate_scores on the labelled rows (empty without labels)


def _open_text(path: Path):
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    raw = gzip.open(path, "rb") if gzipped else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")


def _columns(path: Path) -> tuple[str, list[str], dict[str, int]]:
    """Delimiter, header, and the position of question1 / question2 (and is_duplicate if present)."""
    with _open_text(path) as handle:
        head = handle.read(_HEAD_BYTES).encode("utf-8")
    if not head.strip():
        raise DataError(f"{path.name} is empty")
    delimiter = choose_delimiter(head, None)
    first_line = head.decode("utf-8", errors="replace").lstrip("\r\n").splitlines()[0]
    header = next(iter(pd.read_csv(io.StringIO(first_line), sep=delimiter, header=None, dtype=str,
                                   keep_default_na=False).values.tolist()), [])
    found = {role: positions[0] for role, positions in _role_candidates(header, None).items() if positions}
    missing = [role for role in ("question1", "question2") if role not in found]
    if missing:
        raise DataError(f"{path.name}: no column for {' and '.join(missing)}; found columns: "
                        f"{', '.join(map(str, header[:20]))}")
    return delimiter, [str(name) for name in header], found


def _labels(column: pd.Series) -> np.ndarray:
    """1, 0, or -1 where the label cannot be read."""
    text = column.astype(str).str.strip().str.lower()
    return np.where(text.isin(TRUE_LABELS), 1, np.where(text.isin(FALSE_LABELS), 0, -1))


def score_file(model, source: str | Path, out: str | Path, threshold: float, chunk_rows: int = CHUNK_ROWS,
               progress: Callable[[int], None] | None = None) -> ScoreReport:
    """Score every pair of ``source`` with ``model`` and write ``out``; ``progress(rows_done)`` after each chunk."""
    source, out = Path(source), Path(out)
    delimiter, header, roles = _columns(source)
    report = ScoreReport()
    labels_seen, scores_seen = [], []
    with _open_text(source) as handle, open(out, "w", encoding="utf-8", newline="") as sink:
        chunks = pd.read_csv(handle, sep=delimiter, dtype=str, keep_default_na=False, chunksize=chunk_rows,
                             on_bad_lines="skip", engine="python" if len(delimiter) > 1 else "c")
        for number, chunk in enumerate(chunks):
            first = chunk.iloc[:, roles["question1"]].astype(str).str.strip()
            second = chunk.iloc[:, roles["question2"]].astype(str).str.strip()
            usable = ((first != "") & (second != "")).to_numpy()
            similarity = np.full(len(chunk), np.nan)
            if usable.any():
                similarity[usable] = model.score_pairs(first[usable].tolist(), second[usable].tolist())
            predicted = np.where(np.isnan(similarity), pd.NA, (similarity > threshold).astype(int))
            written = chunk.assign(similarity=np.round(similarity, 6), predicted_duplicate=predicted)
            sink.write(safe_csv_text(written, header=number == 0))
            report.rows += len(chunk)
            report.scored += int(usable.sum())
            report.skipped_empty += int((~usable).sum())
            if "is_duplicate" in roles:
                labels = _labels(chunk.iloc[:, roles["is_duplicate"]])
                keep = usable & (labels >= 0)
                labels_seen.append(labels[keep])
                scores_seen.append(similarity[keep])
            if progress is not None:
                progress(report.rows)
    if labels_seen:
        labels, scores = np.concatenate(labels_seen), np.concatenate(scores_seen)
        report.labelled = int(labels.size)
        if labels.size:
            report.metrics = evaluate_scores(labels, scores, threshold)
    return report
