"""A Parquet file's bytes, column names and string columns, for ``core.data.questions``' Parquet shape.

Parquet is binary, so it never goes through ``core.data.text_source``: a file (or upload) whose first four bytes
are Parquet's magic is read whole (within the same byte cap as text, ``limits.input_limit``) and parsed by
pyarrow, which comes with the lab's Ray Data dependency. Only the columns asked for are decoded; every value is
read as text (a number becomes its digits, a missing value an empty string).
"""
from __future__ import annotations

import io
import os
from pathlib import Path

from core.data import limits
from core.data.limits import DataError, over_input_limit
from core.data.text_source import _UPLOAD_NAME, _check_regular_file

PARQUET_MAGIC = b"PAR1"  # a Parquet file's first and last four bytes


def parquet_bytes(source, max_bytes: int | None = None) -> tuple[bytes, str] | None:
    """(all the bytes of ``source``, the name to report it under) when it is a Parquet file; None when it is not
    (then nothing past its first four bytes was read). A path, bytes, or a binary file object (an upload)."""
    limit = limits.input_limit(max_bytes)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:4] != PARQUET_MAGIC:
            return None
        name = _UPLOAD_NAME
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        size = _check_regular_file(path)  # a pipe or a device would block or never end
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
        name = getattr(source, "name", None)
        name = Path(name).name if isinstance(name, str) and name else _UPLOAD_NAME
    else:
        return None
    if len(data) > limit:
        raise over_input_limit(name, limit, compressed=False)
    return data, name


def _parquet_file(data: bytes, name: str):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(io.BytesIO(data))
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


def parquet_text_columns(data: bytes, name: str, columns: list[str]) -> list[list[str]]:
    """The values of ``columns`` as text, one list per column, row order kept; a missing value is ""."""
    import pyarrow as pa

    try:
        table = _parquet_file(data, name).read(columns=columns)
        return [["" if value is None else value for value in table.column(column).cast(pa.string()).to_pylist()]
                for column in columns]
    except DataError:
        raise
    except Exception as error:  # noqa: BLE001 - a column that cannot be text (a list, a struct) says why
        raise DataError(f"could not read the column(s) {', '.join(columns)} of {name} as text: {error}") from None
