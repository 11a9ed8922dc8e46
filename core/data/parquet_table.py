"""A Parquet file's bytes, column names and string columns, for ``core.data.questions``' Parquet shape.

Parquet is binary, so it never goes through ``core.data.text_source``: a file (or upload) whose first four bytes
are Parquet's magic is read whole (within the same byte cap as text, ``limits.input_limit``) and parsed by
pyarrow, which comes with the lab's Ray Data dependency. Only the columns asked for are decoded; every value is
read as text (a number becomes its digits, a missing value an empty string).

Parquet compresses, so its file size says little about its text: a few hundred bytes can hold a gigabyte of one
repeated string. The text is held to the same cap as a decompressed text file, measured twice before it is
decoded: the columns' uncompressed size in the footer (``stored_text_bytes``), before any column is read, and
then, one row group at a time, the text its values decode to (``decoded_text_bytes``), counted on the
dictionary pyarrow reads the strings into, because a dictionary (or delta) encoding stores one long string once
for any number of rows.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

from core.data import limits
from core.data.limits import DataError, over_input_limit
from core.data.text_source import PARQUET_MAGIC, UPLOAD_NAME, check_regular_file, upload_name



def parquet_bytes(source, max_bytes: int | None = None) -> tuple[bytes, str] | None:
    """(all the bytes of ``source``, the name to report it under) when it is a Parquet file; None when it is not
    (then nothing past its first four bytes was read). A path, bytes, or a binary file object (an upload)."""
    limit = limits.input_limit(max_bytes)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:4] != PARQUET_MAGIC:
            return None
        name = UPLOAD_NAME
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        size = check_regular_file(path)  # a pipe or a device would block or never end
        with open(path, "rb") as file:
            if file.read(4) != PARQUET_MAGIC:
                return None
        if size > limit:
            raise over_input_limit(path.name, limit, compressed=False)
        return path.read_bytes(), path.name
    elif hasattr(source, "read") and hasattr(source, "seek"):
        source.seek(0)
        head = source.read(4)
        source.seek(0)
        if head != PARQUET_MAGIC:
            return None
        data = source.read(limit + 1)
        name = upload_name(source)
    else:
        return None
    if len(data) > limit:
        raise over_input_limit(name, limit, compressed=False)
    return data, name


def _parquet_file(data: bytes, name: str, read_dictionary: list[str] | None = None):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(io.BytesIO(data), read_dictionary=read_dictionary)
    except Exception as error:  # noqa: BLE001 - whatever pyarrow trips over in a user's file is theirs to see
        raise DataError(f"could not read {name} as Parquet: {error}") from None


def parquet_header(data: bytes, name: str) -> list[str]:
    """The column names of the Parquet file in ``data`` (top-level fields, in order)."""
    parquet = _parquet_file(data, name)
    if parquet.metadata.num_rows > limits.MAX_LINES:
        raise DataError(f"{name} has more than {limits.MAX_LINES:,} rows; the limit is {limits.MAX_LINES:,}")
    header = list(parquet.schema_arrow.names)
    if len(header) > limits.MAX_COLUMNS:
        raise DataError(f"{name} has {len(header):,} columns; the limit is {limits.MAX_COLUMNS:,}")
    return header


def parquet_text_columns(data: bytes, name: str, columns: list[str], max_bytes: int | None = None) -> list[list[str]]:
    """The values of ``columns`` as text, one list per column, row order kept; a missing value is "". More text
    than ``limits.input_limit(max_bytes)`` is refused before it is decoded (see the module docstring)."""
    import pyarrow as pa

    limit = limits.input_limit(max_bytes)
    schema = _parquet_file(data, name).schema_arrow
    nested = [column for column in columns if pa.types.is_nested(schema.field(column).type)]
    if nested:  # pyarrow would fail on them below with a bare KeyError
        raise DataError(f"could not read the column(s) {', '.join(nested)} of {name} as text: they hold "
                        f"{', '.join(str(schema.field(column).type) for column in nested)} values")
    # As dictionaries: a string repeated on every row is held once, and its rows are counted, never expanded.
    parquet = _parquet_file(data, name, read_dictionary=columns)
    if stored_text_bytes(parquet.metadata, columns) > limit:
        raise over_input_limit(name, limit, compressed=True)
    texts: list[list[str]] = [[] for _ in columns]
    decoded = 0
    try:
        for group in range(parquet.num_row_groups):
            for part in _row_group_parts(parquet, data, group, columns, limit):
                decoded += sum(decoded_text_bytes(part.column(column)) for column in columns)
                if decoded > limit:
                    raise over_input_limit(name, limit, compressed=True)
                for values, column in zip(texts, columns):
                    values.extend(_as_text(part.column(column)))
    except DataError:
        raise
    except Exception as error:  # noqa: BLE001 - a column that cannot be text (a list, a struct) says why
        raise DataError(f"could not read the column(s) {', '.join(columns)} of {name} as text: {error}") from None
    return texts


def _row_group_parts(parquet, data: bytes, group: int, columns: list[str], limit: int):
    """Row group ``group`` of ``columns``: whole, its strings as dictionaries; else (pyarrow reads no delta-encoded
    string column as a dictionary) in batches of so few rows that their text stays under ``limit``, since no
    value is longer than the bytes the row group stores."""
    try:
        yield parquet.read_row_group(group, columns=columns)
        return
    except (NotImplementedError, OSError):  # pyarrow says "Not yet implemented" as either
        pass
    stored = stored_text_bytes(parquet.metadata, columns, groups=[group])
    plain = _parquet_file(data, "")  # no dictionaries asked for: what the batches are read through
    yield from plain.iter_batches(batch_size=max(1, limit // max(stored, 1)), row_groups=[group], columns=columns)


def stored_text_bytes(metadata, columns: list[str], groups=None) -> int:
    """The uncompressed bytes the footer gives ``columns`` (a nested column's every leaf) in the row groups
    ``groups`` (default: all): what reading them decompresses, known before any of it is read."""
    total = 0
    for group in range(metadata.num_row_groups) if groups is None else groups:
        row_group = metadata.row_group(group)
        for leaf in range(row_group.num_columns):
            chunk = row_group.column(leaf)
            if any(chunk.path_in_schema == column or chunk.path_in_schema.startswith(column + ".")
                   for column in columns):
                total += chunk.total_uncompressed_size
    return total


def decoded_text_bytes(values) -> int:
    """The UTF-8 bytes ``values`` (a pyarrow column, chunked or not) take as text, without building that text for
    a dictionary column: each row counts its dictionary entry's length."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    for chunk in getattr(values, "chunks", [values]):
        if pa.types.is_dictionary(chunk.type):
            lengths = pc.binary_length(chunk.dictionary.cast(pa.string())).fill_null(0).to_numpy()
            total += int(lengths[pc.drop_null(chunk.indices).to_numpy()].sum())
        else:
            total += int(pc.sum(pc.binary_length(chunk.cast(pa.string()))).as_py() or 0)
    return total


def _as_text(values) -> list[str]:
    import pyarrow as pa

    return ["" if value is None else value for value in values.cast(pa.string()).to_pylist()]
