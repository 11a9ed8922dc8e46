"""Labels that are never lost: ``LabelStore(path)``, one labelled pair appended per answer.

The file is an ordinary pairs CSV (``core.data.load_pairs`` reads it like any other, its extra columns
ignored), with the header ``LABEL_COLUMNS``: ``question1,question2,is_duplicate,labelled_by,labelled_at``.
A plain pairs file with only the first three columns is accepted too, and grows by rows of three. Any
other header is refused with one ``DataError`` naming the file.

How nothing is lost or doubled:

* Every change holds an ``flock`` on a lock file beside the labels (``.<name>.lock``), so two processes,
  or two browser tabs, never interleave; reads hold it shared.
* ``add`` writes its whole row (and the header, on a new file) with one ``O_APPEND`` ``write``, then
  ``fsync``: a process killed at any moment leaves the row whole or absent. A short write (a full disk)
  is cut off again and raised. A pair already in the file (``core.data.pair_key``: the same two texts
  after ``normalise_questions``, in either order) is not added again, so two tabs answering one pair at
  once give one row.
* ``undo_last`` rewrites the file without its last row (of one labeller, if given) into a temporary
  beside it, ``fsync``s it and renames it into place: the old file or the new one, whole.
* A last row cut short by a power cut (no line end, too few fields) is dropped by the next ``add``; a
  last row that is whole but lacks its line end (a hand-made file) gets one before the next row.

Text is formula safe (``core.saving.safe_csv``): a cell a spreadsheet would run as a formula is written
with a leading ``'``, and so is a text that starts with ``'`` before such a formula, so reading undoes
it exactly (``pairs`` gives back the texts as given; ``load_pairs`` sees them with the quote).

>>> store = LabelStore(folder / "labels.csv")  # doctest: +SKIP
>>> store.add("How old are you?", "What is your age?", 1, labelled_by="ann")  # doctest: +SKIP
True
>>> store.add("what is your age?", "How old are you?", 0)  # the same pair: not added  # doctest: +SKIP
False
"""
from __future__ import annotations

import csv
import errno
import fcntl
import io
import os
import stat
import threading
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from core.data.limits import DataError
from core.data.questions import pair_key, pair_keys
from core.data.reading import FALSE_LABELS, TRUE_LABELS
from core.saving.owned_files import fsync_folder
from core.saving.safe_csv import is_formula
from core.saving.temp_files import create_temporary, unlink_quietly

LABEL_COLUMNS = ("question1", "question2", "is_duplicate", "labelled_by", "labelled_at")
PAIR_COLUMNS = LABEL_COLUMNS[:3]  # a plain pairs file: accepted as labels without who and when
_OPEN_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_BOM = b"\xef\xbb\xbf"


def escape_cell(text: str) -> str:
    """``text`` as written: a leading ``'`` when a spreadsheet could run it (or it is ``'`` + such a text)."""
    return "'" + text if is_formula(text.lstrip("'")) else text


def unescape_cell(text: str) -> str:
    """The inverse of ``escape_cell``."""
    return text[1:] if text.startswith("'") and is_formula(text.lstrip("'")) else text


def _label(value, where: str) -> int:
    text = str(value).strip().lower()
    if text in TRUE_LABELS:
        return 1
    if text in FALSE_LABELS:
        return 0
    raise DataError(f"{where}: is_duplicate is {str(value)[:20]!r}, not 0 or 1")


class LabelStore:
    """The labelled pairs of one CSV file; safe to share between threads and processes (see the module)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")
        self._mutex = threading.RLock()
        self._forget()

    # ---- reading -------------------------------------------------------------------------------
    def pairs(self) -> pd.DataFrame:
        """The labels in file order: ``LABEL_COLUMNS`` (who and when empty for a plain pairs file), texts
        as they were given, ``is_duplicate`` 0 or 1."""
        with self._locked(exclusive=False):
            rows = [row[:5] for row in self._rows]
        frame = pd.DataFrame(rows, columns=list(LABEL_COLUMNS))
        frame["is_duplicate"] = frame["is_duplicate"].astype("int64")
        return frame

    def keys(self) -> set[tuple[str, str]]:
        """The ``pair_key`` of every labelled pair."""
        with self._locked(exclusive=False):
            return set(self._keys)

    def __len__(self) -> int:
        with self._locked(exclusive=False):
            return len(self._rows)

    def __contains__(self, pair) -> bool:
        """Whether the pair (question1, question2) is labelled, in either order."""
        with self._locked(exclusive=False):
            return pair_key(*pair) in self._keys

    # ---- changing ------------------------------------------------------------------------------
    def add(self, question1: str, question2: str, is_duplicate, labelled_by: str = "") -> bool:
        """Append one label, durably (fsynced before returning); False, and nothing written, when the pair
        is already labelled. Raises ``ValueError`` for an empty question, a self-pair or a label that is
        not 0/1, ``DataError`` for a file that is not a labels file, ``OSError`` when it cannot be written."""
        question1, question2, labelled_by = str(question1).strip(), str(question2).strip(), str(labelled_by)
        if not question1 or not question2:
            raise ValueError("a labelled pair needs two non-empty questions")
        key = pair_key(question1, question2)
        if key[0] == key[1]:
            raise ValueError(f"a question is not paired with itself: {question1[:60]!r}")
        if is_duplicate not in (0, 1):  # True and False too
            raise ValueError(f"is_duplicate must be 0 or 1, got {is_duplicate!r}")
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        with self._locked(exclusive=True):
            if key in self._keys:
                return False
            cells = [question1, question2, str(int(is_duplicate)), labelled_by, stamp]
            self._append(self._record(cells[:len(self._columns or LABEL_COLUMNS)]))
            self._refresh(repair=False)  # takes in the row just written (and the header of a new file)
        return True

    def undo_last(self, labelled_by: str | None = None) -> dict | None:
        """Remove the last label (the last of ``labelled_by``, when given) and return it as a dict of
        ``LABEL_COLUMNS``; None when there is none. The file is rewritten whole and renamed into place."""
        with self._locked(exclusive=True):
            matches = [i for i, row in enumerate(self._rows) if labelled_by is None or row[3] == labelled_by]
            if not matches:
                return None
            row = self._rows[matches[-1]]
            start, end = row[5], row[6]
            data = self._read_all()
            self._replace(data[:start] + data[end:])
            self._forget()
            self._refresh(repair=False)
        return dict(zip(LABEL_COLUMNS, row[:5]))

    # ---- the file ------------------------------------------------------------------------------
    @contextmanager
    def _locked(self, exclusive: bool):
        """The lock file held (shared for reading), the cached rows brought up to date with the file. A
        reader that cannot create the lock file (a read-only folder) reads without it."""
        with self._mutex:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, 0o644)
            except OSError:
                if exclusive:
                    raise
                fd = None
            try:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                self._refresh(repair=exclusive)
                yield
            finally:
                if fd is not None:
                    os.close(fd)  # closing releases the lock

    def _forget(self) -> None:
        self._columns: tuple[str, ...] | None = None  # those of the file, once its header is read
        self._rows: list[tuple] = []  # (question1, question2, label, by, at, start byte, end byte)
        self._keys: set[tuple[str, str]] = set()
        self._seen: tuple[int, int] | None = None  # (device, inode) of the file read
        self._offset = 0  # bytes of it read (whole records only)
        self._line = 1  # the line the next record starts on
        self._tail = b""  # the bytes of the last record read

    def _open(self, flags: int) -> int:
        fd = os.open(self.path, flags | _OPEN_FLAGS, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise DataError(f"{self.path}: not a regular file")
        return fd

    def _read_all(self) -> bytes:
        fd = self._open(os.O_RDONLY)
        with open(fd, "rb") as handle:
            return handle.read()

    def _refresh(self, repair: bool) -> None:
        """Read what was appended since the last read (all of it after a rewrite or a new file)."""
        try:
            fd = self._open(os.O_RDONLY)
        except FileNotFoundError:
            self._forget()
            return
        with open(fd, "rb") as handle:
            info = os.fstat(fd)
            if not self._unchanged(fd, info):
                self._forget()
                self._seen = (info.st_dev, info.st_ino)
            if info.st_size == self._offset:
                return
            handle.seek(self._offset)
            data = handle.read(info.st_size - self._offset)
        self._parse(data, repair)

    def _unchanged(self, fd: int, info: os.stat_result) -> bool:
        """Whether the file still begins with what was read: the same inode, at least as long, and the last
        record read still where it was (an inode is reused by a rewrite, so the bytes are compared too)."""
        if (info.st_dev, info.st_ino) != self._seen or info.st_size < self._offset:
            return False
        return not self._tail or os.pread(fd, len(self._tail), self._offset - len(self._tail)) == self._tail

    def _parse(self, data: bytes, repair: bool) -> None:
        """Take in the whole records of ``data`` (the file from ``_offset`` on)."""
        base = self._offset
        if base == 0 and data.startswith(_BOM):
            base, data = len(_BOM), data[len(_BOM):]
        lines = [line + b"\n" for line in data.split(b"\n")]
        lines[-1] = lines[-1][:-1]  # what follows the last line end (b"" when the data ends with one)
        fed = [0, 0]  # bytes and lines given to the csv reader so far

        def feed():
            for line in lines:
                if line:
                    fed[0], fed[1] = fed[0] + len(line), fed[1] + 1
                    try:
                        yield line.decode("utf-8")
                    except UnicodeDecodeError:
                        raise DataError(f"{self.path}: line {self._line + fed[1] - 1} is not UTF-8 text") from None

        begin, begin_lines = 0, 0
        taken: list[tuple] = []
        try:
            for fields in csv.reader(feed()):
                end, end_lines = fed
                unended = end == len(data) and not data.endswith(b"\n")  # the last record has no line end
                try:
                    row = self._header(fields) if self._columns is None else self._row(fields)
                except DataError:
                    if not unended:
                        raise
                    if repair:  # a record cut short by a crash was never acknowledged: drop it
                        self._truncate(base + begin)
                    return
                if row is not None:
                    taken.append((*row, base + begin, base + end))
                self._tail = data[begin:end]
                begin, self._offset, self._line = end, base + end, self._line + end_lines - begin_lines
                begin_lines = end_lines
        finally:  # the records before a bad one are taken in all the same, their keys in one pass
            self._rows.extend(taken)
            self._keys.update(pair_keys([row[0] for row in taken], [row[1] for row in taken]))

    def _header(self, fields: list[str]) -> None:
        names = tuple(name.strip().lower() for name in fields)
        if names not in (LABEL_COLUMNS, PAIR_COLUMNS):
            raise DataError(f"{self.path} is not a labels file: its columns are {', '.join(fields)[:120]}; a labels "
                            f"file has {', '.join(LABEL_COLUMNS)} (or only the first three)")
        self._columns = names

    def _row(self, fields: list[str]) -> tuple | None:
        """A label from a record's fields; None for a blank line (skipped, as ``load_pairs`` skips it)."""
        if not fields:
            return None
        where = f"{self.path}: line {self._line}"
        if len(fields) != len(self._columns):
            raise DataError(f"{where} has {len(fields)} fields; the header has {len(self._columns)}")
        question1, question2 = unescape_cell(fields[0].strip()), unescape_cell(fields[1].strip())
        who, when = (unescape_cell(fields[3]), fields[4]) if len(fields) == 5 else ("", "")
        return question1, question2, _label(fields[2], where), who, when

    def _record(self, cells: list[str]) -> bytes:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerow([escape_cell(cell) for cell in cells])
        return buffer.getvalue().encode("utf-8")

    def _append(self, record: bytes) -> None:
        """One ``O_APPEND`` write of ``record`` (after the header on a new file), fsynced; cut off again if
        the disk took only part of it."""
        fd = self._open(os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                payload = self._record(list(LABEL_COLUMNS)) + record
            else:  # a hand-made file may lack its last line end
                payload = (b"" if os.pread(fd, 1, size - 1) == b"\n" else b"\r\n") + record
            written = os.write(fd, payload)
            if written != len(payload):
                os.ftruncate(fd, size)
                raise OSError(errno.ENOSPC, f"only {written} of {len(payload)} bytes could be written", str(self.path))
            os.fsync(fd)
        finally:
            os.close(fd)
        if size == 0:
            fsync_folder(self.path.parent)

    def _truncate(self, size: int) -> None:
        fd = self._open(os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _replace(self, data: bytes) -> None:
        """``data`` into a temporary beside the file, fsynced, renamed onto it; the folder fsynced."""
        mode = stat.S_IMODE(os.stat(self.path).st_mode)
        temp, fd = create_temporary(self.path)
        try:
            with open(fd, "wb", closefd=False) as handle:
                handle.write(data)
            os.fchmod(fd, mode)
            os.fsync(fd)
            os.replace(temp, self.path)
        except BaseException:
            unlink_quietly(temp)
            raise
        finally:
            os.close(fd)
        fsync_folder(self.path.parent)
