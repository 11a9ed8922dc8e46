"""The corpus as a Ray dataset of (id, question) rows for ``core.inference.ray_engine``'s encoder actors.

Two ways in, the same rows out:

- ``driver_dataset``: questions already read here (``core.data.load_questions``) put in Ray's object store.
- ``file_dataset``: Ray Data reads the file itself, on whichever node runs the read task (``ray.data.read_text``
  for one question per line, ``ray.data.read_csv`` for a CSV's question column, ``ray.data.read_parquet`` for a
  Parquet file's), strips the questions and drops
  the empty ones as ``load_questions`` does. Ray Data has no row numbers, so ids are given in two steps: a task
  per block cleans it and returns its count and fingerprint; the blocks' counts give each one its first id; a
  task per block adds the ids and cuts it at multiples of the block size.

Ray's readers are not ``load_questions``: ``read_text`` splits lines with ``str.splitlines`` (also at \\v, \\f,
\\x1c-\\x1e, \\x85, \\u2028, \\u2029), reads UTF-8 only, and ``read_csv`` is pyarrow's parser, not pandas'. So a
file read by Ray is used only when every block's fingerprint equals that of the same rows of the questions the
driver read (``search.fingerprint``): the same questions, in the same order, each once. Otherwise, or when Ray
cannot read the file at all, ``corpus_dataset`` falls back to ``driver_dataset`` and says so. A pairs file is
always read by the driver: its questions are the distinct ones of two columns (``normalise_questions``), a
corpus-wide de-duplication that is no per-block work.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

BATCHES_PER_BLOCK = 8  # encoder batches per dataset block: blocks start at multiples of the batch size
TEXT_COLUMN = "text"  # the column ray.data.read_text names its lines


@dataclass(frozen=True)
class CorpusFile:
    """A corpus file for Ray Data to read: plain text (one question per line), or one column of a CSV or Parquet."""

    path: str  # the file, on storage every node of the cluster sees
    column: str = ""  # the question column as the file spells it; "" for plain text
    delimiter: str = ","  # a CSV's field delimiter
    parquet: bool = False  # a Parquet file (``column`` is then one of its columns)


def block_rows(total: int, batch_size: int, workers: int) -> int:
    """Rows per block: whole batches, about four blocks per worker, at most ``BATCHES_PER_BLOCK`` batches. Every
    batch then starts at a multiple of ``batch_size``, so a retried batch is the same rows (the same shard)."""
    per_block = math.ceil(total / (4 * max(workers, 1)) / batch_size) * batch_size
    return min(max(per_block, batch_size), BATCHES_PER_BLOCK * batch_size)


def driver_dataset(questions: Sequence[str], rows: int):
    """``questions`` (read here) as a Ray dataset of (id, question) blocks of ``rows`` rows."""
    import pandas as pd
    import ray.data

    frame = pd.DataFrame({"id": np.arange(len(questions), dtype=np.int64), "question": list(questions)})
    return ray.data.from_pandas([frame.iloc[start : start + rows] for start in range(0, len(questions), rows)])


def corpus_dataset(questions: Sequence[str], batch_size: int, workers: int, source: CorpusFile | None = None):
    """(dataset of (id, question) rows, "ray" or "driver": who read the file). With ``source``, Ray Data reads
    it (``file_dataset``) unless that does not give exactly ``questions``."""
    rows = block_rows(len(questions), batch_size, workers)
    if source is not None:
        try:
            dataset = file_dataset(source, questions, rows)
        except Exception:  # noqa: BLE001 - whatever Ray's reader trips over, the driver has read the file already
            dataset = None
        if dataset is not None:
            return dataset, "ray"
    return driver_dataset(questions, rows), "driver"


def file_dataset(source: CorpusFile, questions: Sequence[str], rows: int):
    """``source`` read by Ray Data as (id, question) blocks cut at multiples of ``rows``, or None when its
    questions are not exactly ``questions`` (see the module's docstring)."""
    import pyarrow as pa
    import pyarrow.csv
    import ray
    import ray.data

    from core.inference.search import fingerprint

    context = ray.data.DataContext.get_current()
    ordered = context.execution_options.preserve_order
    context.execution_options.preserve_order = True  # blocks in file order: ids are positions
    try:
        if source.parquet:
            read = ray.data.read_parquet(source.path, columns=[source.column])
        elif source.column:
            read = ray.data.read_csv(
                source.path, parse_options=pyarrow.csv.ParseOptions(delimiter=source.delimiter, newlines_in_values=True),
                convert_options=pyarrow.csv.ConvertOptions(include_columns=[source.column],
                                                           column_types={source.column: pa.string()}))
        else:
            read = ray.data.read_text(source.path, drop_empty_lines=False)
        blocks = read.materialize().to_arrow_refs()
    finally:
        context.execution_options.preserve_order = ordered
    clean = ray.remote(num_returns=2)(_clean_block)
    cleaned = [clean.remote(block, source.column or TEXT_COLUMN) for block in blocks]
    facts = ray.get([facts for _, facts in cleaned])  # [(count, fingerprint)] per block, never the texts
    starts = np.concatenate([[0], np.cumsum([count for count, _ in facts])]).astype(np.int64)
    if starts[-1] != len(questions):
        return None
    for (count, digest), start in zip(facts, starts.tolist()):
        if count and fingerprint(questions[start : start + count]) != digest:
            return None
    pieces = []
    for (table, _), (count, _), start in zip(cleaned, facts, starts.tolist()):
        cuts = [at - start for at in range((start // rows + 1) * rows, start + count, rows)]
        if count:
            pieces += _cut_refs(table, start, cuts)
    ray.wait(pieces, num_returns=len(pieces))  # cut before the encoder actors take every CPU
    return ray.data.from_arrow_refs(pieces)


def _cut_refs(table, start: int, cuts: list[int]) -> list:
    import ray

    cut = ray.remote(num_returns=len(cuts) + 1)(_with_ids)
    refs = cut.remote(table, start, cuts)
    return list(refs) if cuts else [refs]


def _clean_block(table, column: str):
    """(the block's questions stripped, the empty ones dropped, as a one-column table; (count, fingerprint))."""
    import pyarrow as pa

    from core.inference.search import fingerprint

    texts = [("" if text is None else str(text)).strip() for text in table.column(column).to_pylist()]
    kept = [text for text in texts if text]
    return pa.table({"question": pa.array(kept, type=pa.string())}), (len(kept), fingerprint(kept))


def _with_ids(table, start: int, cuts: list[int]):
    """``table`` with an ``id`` column from ``start``, cut at the row offsets ``cuts``: len(cuts) + 1 tables."""
    import pyarrow as pa

    table = table.add_column(0, "id", pa.array(np.arange(start, start + len(table), dtype=np.int64)))
    bounds = [0, *cuts, len(table)]
    parts = [table.slice(low, high - low) for low, high in zip(bounds, bounds[1:])]
    return tuple(parts) if cuts else parts[0]
