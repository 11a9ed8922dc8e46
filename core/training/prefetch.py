"""Building the training loop's next batches on a background thread, while the current step runs.

Building a batch (slicing the token tables, padding, the attention masks) and page-locking it for a CUDA copy is host
work that no step needs to wait for. On a GPU whose steps are short the host is the bottleneck, so that work would
add to every step; one worker thread builds the next few batches instead, and the step only takes a finished one. A
single worker runs them first in, first out: the loop gets exactly the batches, in exactly the order, that building
each one in the loop would give, so what is trained does not change.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Built = TypeVar("Built")


def built_ahead(items: Iterable[Item], build: Callable[[Item], Built], ahead: int) -> Iterator[tuple[Item, Built]]:
    """``(item, build(item))`` for each of ``items`` in order, each built on a background thread up to ``ahead`` items
    before the loop takes it (``ahead`` 0: built in the loop, one at a time). An exception raised by ``build`` is
    raised here, where its item would have come. Leaving the loop early (a ``break``, an exception) stops the thread
    after the item it is building: the generator's ``finally`` runs as soon as the loop lets go of it."""
    if ahead < 1:
        for item in items:
            yield item, build(item)
        return
    pool = ThreadPoolExecutor(1, thread_name_prefix="batches-ahead")
    pending: deque = deque()  # (item, future), oldest first
    try:
        for item in items:
            pending.append((item, pool.submit(build, item)))
            if len(pending) > ahead:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
