"""The probe of a foreign graph, run in a child process under a hard memory cap and a time limit.

What a foreign graph costs is not read from it: it is run, somewhere it can do no harm.
``probe_in_child(graph, batches, path)`` starts ``python -m core.export.onnx_probe``, which caps its own
address space (``RLIMIT_AS``, ``address_space_cap``) before it imports onnxruntime, makes a session of
the graph under the arena cap of ``core.export.onnx_session`` and runs each (input_ids, attention_mask)
batch; the parent waits at most ``PROBE_SECONDS``, then kills it. The session is made in the child too,
because onnxruntime folds constants while it makes one: a ``ConstantOfShape`` of 2**34 floats is
allocated before any batch runs. A graph that asks for more memory than the cap, runs past the time
limit, crashes onnxruntime or fails on a batch is refused on one line, and the lab's own process never
made a session of it.

The graph (its length, then its bytes) and the batches reach the child on its standard input, the
vectors come back on its standard output; arrays travel as ``.npz``, read without pickle.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from core.export.common import OnnxBackendError

PROBE_SECONDS = 60.0  # far above what MiniLM's probe takes on a slow machine, far below "hung"
# The child's own interpreter, numpy and onnxruntime: about 0.35 GiB measured, with room to spare.
BASE_ADDRESS_SPACE = 2 * 2**30
REFUSED = "refused: "  # how the child's last line on stderr starts when it says why itself
MODULE = "core.export.onnx_probe"


def address_space_cap(graph_bytes: int, arena_bytes: int) -> int:
    """The child's address space: onnxruntime's arena, three copies of the graph (the bytes received, the
    model onnxruntime parses from them, the weights of its session) and the base."""
    return arena_bytes + 3 * graph_bytes + BASE_ADDRESS_SPACE


def probe_in_child(graph: bytes, batches: list[tuple[np.ndarray, np.ndarray]], path: Path) -> list[np.ndarray]:
    """The vectors ``graph`` gives for each (input_ids, attention_mask) batch, computed in a capped child;
    an ``OnnxBackendError`` naming ``path`` when the child runs out of memory or time, or fails."""
    from core.export import onnx_session

    arena = onnx_session.ARENA_MAX_BYTES  # read now: a caller may have lowered it
    command = [sys.executable, "-m", MODULE, str(arena), str(address_space_cap(len(graph), arena))]
    try:
        done = subprocess.run(command, input=_packed(graph, batches), capture_output=True,
                              timeout=PROBE_SECONDS, env=_child_environment())
    except subprocess.TimeoutExpired:
        raise OnnxBackendError(f"{path} ran its probe for more than {PROBE_SECONDS:g} s; refused") from None
    except OSError as error:
        raise OnnxBackendError(f"cannot start the probe of {path} ({error.strerror or error})") from None
    if done.returncode != 0:
        raise OnnxBackendError(f"{path} failed its probe: {_why(done)}")
    try:
        return _unpacked(done.stdout, len(batches))
    except (ValueError, KeyError, OSError, EOFError):
        raise OnnxBackendError(f"{path} gave no readable vectors on its probe") from None


def _child_environment() -> dict[str, str]:
    """This process's environment, with the folder holding ``core`` first on the path (the child imports
    the lab's onnx_session whatever folder the lab was started from) and numpy's math libraries on one
    thread: each of their threads reserves address space, per core, that the child never uses."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    one_thread = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    return {**os.environ, **one_thread, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def _why(done: subprocess.CompletedProcess) -> str:
    """The child's own reason, else how it ended (a signal when onnxruntime aborted or the cap killed it)."""
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    reasons = [line[len(REFUSED):] for line in lines if line.startswith(REFUSED)]
    if reasons:
        return reasons[-1][:200]
    if done.returncode < 0:
        return f"onnxruntime was stopped by signal {-done.returncode} (memory past the cap, or a crash)"
    return f"the probe exited with status {done.returncode} ({(lines or ['no message'])[-1][:160]})"


def _packed(graph: bytes, batches: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """The graph's length, the graph, then the batches as ``.npz``: the child keeps one copy of the graph."""
    arrays = {}
    for index, (ids, mask) in enumerate(batches):
        arrays[f"ids{index}"], arrays[f"mask{index}"] = ids, mask
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return len(graph).to_bytes(8, "little") + graph + buffer.getvalue()


def _unpacked(data: bytes, count: int) -> list[np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return [arrays[f"vectors{index}"] for index in range(count)]


# ---- the child -----------------------------------------------------------------------------------
def _cap_address_space(limit: int) -> int:
    """No more than ``limit`` bytes of address space for this process, or its inherited limit if lower
    (returned); without ``resource`` (not a Unix) only onnxruntime's arena cap holds."""
    try:
        import resource
    except ImportError:
        return limit
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return limit


def _run_probe(arena_bytes: int) -> bytes:
    from core.export import onnx_session

    onnx_session.ARENA_MAX_BYTES = arena_bytes  # before the first session registers the arena
    stdin = sys.stdin.buffer
    graph = stdin.read(int.from_bytes(stdin.read(8), "little"))
    session = onnx_session.capped_session(graph)
    del graph  # the session holds its own copy of the weights
    vectors = {}
    with np.load(io.BytesIO(stdin.read()), allow_pickle=False) as batches:
        for index in range(sum(name.startswith("ids") for name in batches.files)):
            feed = {"input_ids": batches[f"ids{index}"], "attention_mask": batches[f"mask{index}"]}
            vectors[f"vectors{index}"] = session.run(None, feed)[0]
    buffer = io.BytesIO()
    np.savez(buffer, **vectors)
    return buffer.getvalue()


def main(argv: list[str]) -> int:
    arena_bytes = int(argv[0])
    address_space = _cap_address_space(int(argv[1]))
    try:
        result = _run_probe(arena_bytes)
    except MemoryError:
        print(f"{REFUSED}it needs more than {address_space / 2**30:.1f} GiB of memory", file=sys.stderr)
        return 3
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
        from core.export.onnx_session import failure_reason

        print(f"{REFUSED}{failure_reason(error)}", file=sys.stderr)
        return 3
    sys.stdout.buffer.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
