"""Building the training loop's next batches on a background thread, while the current step runs.

Building a batch (slicing the token tables, padding, the attention masks) and page-locking it for a CUDA copy is host
work that no step needs to wait for. On a GPU whose steps are short the host is the bottleneck, so that work would
add to every step; a thread does it for the next few batches instead, and the step only takes a finished one. One
thread feeding a first-in first-out queue keeps the order: the loop gets exactly the batches, in exactly the order,
that building each one in the loop would give, so what is trained does not change.
"""
from __future__ import annotations

import contextlib
import queue
import threading
from typing import Callable, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Built = TypeVar("Built")

_END = object()  # what the thread queues after the last item
_WAIT_SECONDS = 0.1  # how often a thread waiting for room in the queue looks whether the loop has gone


class _Failure:
    """An exception raised by ``build`` on the thread, queued so that the loop raises it at the item that failed."""

    def __init__(self, error: BaseException):
        self.error = error


def built_ahead(items: Iterable[Item], build: Callable[[Item], Built], ahead: int) -> Iterator[tuple[Item, Built]]:
    """``(item, build(item))`` for each of ``items`` in order, each built on a background thread up to ``ahead`` items
    before the loop takes it (``ahead`` 0: built in the loop, one at a time). An exception raised by ``build`` is
    raised here, where its item would have come. Leaving the loop early (a ``break``, an exception) stops the thread:
    the generator's ``finally`` runs as soon as the loop lets go of it."""
    if ahead < 1:
        for item in items:
            yield item, build(item)
        return
    builder = _Builder(items, build, ahead)
    try:
        yield from builder
    finally:
        builder.stop()


class _Builder:
    """The thread and its queue behind ``built_ahead``."""

    def __init__(self, items: Iterable[Item], build: Callable[[Item], Built], ahead: int):
        self._queue: queue.Queue = queue.Queue(maxsize=ahead)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(iter(items), build), name="batches-ahead",
                                        daemon=True)  # never keeps the interpreter alive
        self._thread.start()

    def _fill(self, items: Iterator[Item], build: Callable[[Item], Built]) -> None:
        try:
            for item in items:
                if self._stopped.is_set() or not self._put((item, build(item))):
                    return
        except BaseException as error:  # any of them: the loop would otherwise wait for an item that never comes
            self._put(_Failure(error))
            return
        self._put(_END)

    def _put(self, entry) -> bool:
        """Queue ``entry`` once there is room; False (not queued) once the loop has stopped taking entries."""
        while not self._stopped.is_set():
            try:
                self._queue.put(entry, timeout=_WAIT_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[tuple[Item, Built]]:
        while (entry := self._queue.get()) is not _END:
            if isinstance(entry, _Failure):
                raise entry.error
            yield entry

    def stop(self) -> None:
        """End the thread (after the item it is building, if any) and drop what it built ahead."""
        self._stopped.set()
        with contextlib.suppress(queue.Empty):  # room in the queue wakes a thread waiting to put: it sees the stop
            while True:
                self._queue.get_nowait()
        self._thread.join()
