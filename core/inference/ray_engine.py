"""Embedding and deduplicating on a Ray cluster (``--engine ray``): the same vectors and clusters as the local path,
encoded by a pool of encoder actors (a killed one restarted, its batch retried) and the first k-NN search split over
Ray tasks. An address is checked with a socket and the HTTP/2 preface, then ``ray.init`` runs under a time limit, so
an unreachable cluster is one ``RayAddressError`` line. Ray is imported inside functions; on a real cluster the model
folder must be on storage every node sees.
"""
from __future__ import annotations

import math
import os
import signal
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence
from urllib.parse import urlsplit

import numpy as np

from core.inference.dedup_graph import NeighbourGraph
from core.notices import native_stderr_dropped

OBJECT_STORE_CAP = 2 << 30  # bytes: a local Ray's shared-memory store, at most a tenth of this machine's memory
TASK_RETRIES = 3  # retries of a search task whose worker died, before the run fails
CONNECT_TIMEOUT_S = 10.0  # resolving and reaching a cluster's address, before Ray is asked to join it
INIT_TIMEOUT_S = 15.0  # ray.init joining a cluster whose address answered: both limits together stay under 30 s
NAMED_ADDRESSES = ("auto", "local")  # ray.init's own words: a cluster found on this machine, or a new one
CLIENT_SCHEME, CLIENT_PORT, GCS_PORT = "ray://", 10001, 6379  # Ray's default ports: its client server, its GCS
# The HTTP/2 client connection preface (its fixed 24 bytes, then an empty SETTINGS frame): a gRPC server answers
# it with a frame whose 9-byte header has type SETTINGS, the first frame any HTTP/2 server sends.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
FRAME_HEADER_BYTES, SETTINGS_FRAME = 9, 0x4
ANSWER_GRACE_S = 0.5  # past the timeout, for the check's own socket to report its timeout before it is cut
BATCHES_PER_BLOCK = 8  # encoder batches per dataset block: blocks start at multiples of the batch size


class RayAddressError(ValueError):
    """A Ray cluster address that cannot be reached, or where something that is not Ray answers; the message
    is one line."""


def check_ray_address(address: str, timeout: float | None = None) -> None:
    """``RayAddressError`` unless ``address`` answers the HTTP/2 preface as Ray's gRPC servers do within ``timeout``
    s, name lookup included (only the connection under ``RAY_USE_TLS``); ``auto`` and ``local`` pass."""
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    host, port = _host_and_port(address)
    if host is None:
        return
    outcome: list[str | None] = []
    deadline = time.monotonic() + timeout

    def connect() -> None:
        try:
            outcome.append(_not_ray(host, port, deadline, timeout))
        except Exception as error:  # noqa: BLE001 - any failure, said in one line below (a thread's would be lost)
            outcome.append(f"the address check failed ({type(error).__name__}: {error})")

    # In a thread: the system's name lookup has no timeout of its own and may wait on a resolver for minutes.
    thread = threading.Thread(target=connect, name="ray-address-check", daemon=True)
    thread.start()
    thread.join(timeout + ANSWER_GRACE_S)
    if not outcome:
        raise RayAddressError(f"Ray cluster {address}: no answer within {timeout:g} s")
    if outcome[0] is not None:
        raise RayAddressError(f"Ray cluster {address}: {outcome[0]}")


def _not_ray(host: str, port: int, deadline: float, timeout: float) -> str | None:
    """Why ``host:port`` is no Ray server, in a few words, or None: it answers the HTTP/2 preface with a SETTINGS
    frame by ``deadline``."""
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except socket.gaierror as error:
        return f"cannot resolve {host} ({error.strerror or error})"
    except UnicodeError as error:  # the IDNA codec refuses a label over 63 characters, an empty label ...
        return f"{host[:80]} is not a valid host name ({error})"
    except OSError as error:
        return f"nothing answers there ({'timed out' if isinstance(error, TimeoutError) else error.strerror or error})"
    with connection:
        if os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true"):  # TLS comes first: not checked
            return None
        try:
            connection.settimeout(max(deadline - time.monotonic(), 0.001))
            connection.sendall(HTTP2_PREFACE)
            header = connection.recv(FRAME_HEADER_BYTES, socket.MSG_WAITALL)
            why = ("it closed the connection without an HTTP/2 answer" if len(header) < FRAME_HEADER_BYTES
                   else None if header[3] == SETTINGS_FRAME else "its answer is not HTTP/2")
        except TimeoutError:
            why = f"no HTTP/2 answer within {timeout:g} s"
        except OSError as error:
            why = f"it dropped the connection: {error.strerror or error}"
    return why and f"something listens there but it is not Ray ({why})"


def _host_and_port(address: str) -> tuple[str | None, int | None]:
    """(host, port) of ``host[:port]``, ``[v6][:port]`` or ``ray://host[:port]`` (Ray's default port when none is
    given); (None, None) for ``auto`` and ``local``; RayAddressError for anything else."""
    text = address.strip()
    if text.lower() in NAMED_ADDRESSES:
        return None, None
    client = text.lower().startswith(CLIENT_SCHEME)
    try:
        parts = urlsplit("//" + (text[len(CLIENT_SCHEME):] if client else text))
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is no number, or out of range
        parts, host, port = None, None, None
    if parts is None or not host or parts.path or parts.query or parts.fragment:
        raise RayAddressError(f"Ray cluster address {address!r} is not host:port (or ray://host:port, auto, local)")
    return host, port if port is not None else CLIENT_PORT if client else GCS_PORT


@contextmanager
def ray_session(address: str = "", num_cpus: int | None = None):
    """Ray for the block: an empty ``address`` starts a local Ray with ``num_cpus`` CPUs (default: this machine's),
    else joins the cluster there; quiet, and shut down at the end. A Ray already running in this process is used."""
    import logging

    import psutil
    import ray
    import ray.data

    if ray.is_initialized():  # a caller (a test's one local cluster) owns it
        yield
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # offline: no usage report
    quiet = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if address:
        check_ray_address(address)
        try:
            # Ray's core worker logs each failed attempt on descriptor 2, past Python's logging: one line here.
            with _time_limit(INIT_TIMEOUT_S), native_stderr_dropped():
                ray.init(address=address, **quiet)
        except _TimeUp:
            if ray.is_initialized():
                ray.shutdown()
            raise RayAddressError(f"Ray cluster {address}: it answered, but Ray did not join it within "
                                  f"{INIT_TIMEOUT_S:g} s") from None
        except ConnectionError as error:
            if address.strip().lower() in NAMED_ADDRESSES:  # ray.init found no cluster started on this machine
                raise RayAddressError(f"Ray cluster {address}: none runs on this machine; start one with "
                                      "`ray start --head`, or give --ray-address host:port") from None
            # Ray answers but will not take this driver (e.g. its auth token)
            raise RayAddressError(f"Ray cluster {address}: it refused this driver "
                                  f"({' '.join(str(error).split())[:300]})") from None
    else:
        store = min(OBJECT_STORE_CAP, psutil.virtual_memory().total // 10)
        root = str(Path(__file__).resolve().parents[2])  # workers import core from this checkout
        before = os.environ.get("PYTHONPATH")
        # In the environment the local Ray's processes inherit, not a runtime_env: a runtime_env makes Ray
        # start a fresh worker process for it instead of taking a pooled one (~2 s per encoder actor here).
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, before]))
        try:
            ray.init(num_cpus=num_cpus or os.cpu_count(), object_store_memory=store, **quiet)
        finally:
            if before is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = before
    ray.data.DataContext.get_current().enable_progress_bars = False  # no bars or INFO lines on the command's stderr
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


class _TimeUp(BaseException):
    """Raised into ray.init when its time is up: a BaseException, so no retry loop of Ray's catches it."""


@contextmanager
def _time_limit(seconds: float):
    """``_TimeUp`` if the block runs past ``seconds`` (SIGALRM: in the main thread, where the CLI runs it; in any
    other thread the block runs unbounded, as signals reach only the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise _TimeUp

    previous = signal.signal(signal.SIGALRM, expired)
    outer = signal.setitimer(signal.ITIMER_REAL, seconds)[0]  # another alarm's time left (pytest-timeout's): kept
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))


class BatchEncoder:
    """A Ray Data encoder actor: loads the model once, then encodes each batch of (id, question) rows."""

    def __init__(self, load: Callable[[], object], unit: bool, batch_size: int):
        self.model = load()
        self.unit, self.batch_size = unit, batch_size

    def __call__(self, batch: dict) -> dict:
        from core.inference.search import clustering_rows, encode_towers

        texts = [str(text) for text in batch["question"]]
        if self.unit:  # deduplication's vectors: unit rows, both towers' mean for a two-tower model
            vectors, queries = clustering_rows(*encode_towers(self.model, texts, batch_size=self.batch_size))
        else:  # ``embed``'s raw vectors of tower 1, as the local path writes them
            vectors = np.asarray(self.model.encode(texts, tower=1, batch_size=self.batch_size), dtype=np.float32)
            queries = None
        return {"id": np.asarray(batch["id"], dtype=np.int64), "vectors": vectors,
                **({"queries": queries} if queries is not None else {})}


def ray_encode(load: Callable[[], object], questions: Sequence[str], batch_size: int = 256, workers: int = 2,
               unit: bool = True, encoder: type = BatchEncoder) -> tuple[np.ndarray, np.ndarray | None]:
    """(vectors, queries or None), each (N, d) in question order, of ``questions`` encoded on Ray by the model a
    picklable ``load()`` gives. ``unit``: deduplication's vectors (``CorpusVectors.for_clustering``), else
    ``embed``'s. A row encoded twice is kept once."""
    import pandas as pd
    import ray.data

    if not len(questions):
        return np.zeros((0, 0), dtype=np.float32), None
    # Blocks of whole batches (a retried batch is the same rows), about four per worker, bounded in size.
    rows = min(max(math.ceil(len(questions) / (4 * max(workers, 1)) / batch_size), 1), BATCHES_PER_BLOCK) * batch_size
    frame = pd.DataFrame({"id": np.arange(len(questions), dtype=np.int64), "question": list(questions)})
    dataset = ray.data.from_pandas([frame.iloc[start : start + rows] for start in range(0, len(questions), rows)])
    encoded = dataset.map_batches(
        encoder, fn_constructor_args=(load, unit, batch_size), batch_size=batch_size, batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1)
    vectors = queries = None
    seen = np.zeros(len(questions), dtype=bool)
    for batch in encoded.iter_batches(batch_size=None, batch_format="numpy"):
        ids = batch["id"]
        if vectors is None:
            vectors = np.empty((len(questions), batch["vectors"].shape[1]), dtype=np.float32)
            queries = np.empty_like(vectors) if "queries" in batch else None
        vectors[ids] = batch["vectors"]
        if queries is not None:
            queries[ids] = batch["queries"]
        seen[ids] = True
    if not seen.all():
        raise RuntimeError(f"{int((~seen).sum()):,} of {len(questions):,} questions came back unencoded")
    return vectors, queries


def _search_shard(index_bytes: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids) of the ``k`` best of each row of ``queries`` in the serialised index: one Ray task's work."""
    import faiss

    return faiss.deserialize_index(index_bytes).search(np.ascontiguousarray(queries, dtype=np.float32), k)


class RayGraph(NeighbourGraph):
    """``NeighbourGraph(vectors, **options)`` whose first search is cut into ``workers`` Ray tasks, the index in the
    object store once; deeper searches and clustering run here, so the clusters are the same."""

    def __init__(self, vectors: np.ndarray, workers: int = 2, **options):
        self._shards = max(int(workers), 1)  # > 0 while the constructor's first search runs
        super().__init__(vectors, **options)
        self._shards = 0

    def _search(self, rows: np.ndarray, k: int):
        if not self._shards:
            return super()._search(rows, k)
        import faiss
        import ray

        index, shards = self.index, self._shards
        stored = ray.put(faiss.serialize_index(index))
        task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(_search_shard)

        def on_ray(queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
            step = -(-len(queries) // shards)
            parts = ray.get([task.remote(stored, queries[start : start + step], depth)
                             for start in range(0, len(queries), step)])
            scores, ids = (np.concatenate(column) for column in zip(*parts))
            return scores, ids

        # The index's ``search`` alone sent to Ray for the call: everything else (kind, re-scoring) sees the index.
        index.search = on_ray
        try:
            return super()._search(rows, k)
        finally:
            del index.search
