"""The probe of a foreign graph in a child process under a hard address-space cap and a time limit: what a
graph costs is tried where it can do no harm. The child (``python -m core.export.onnx_probe``) caps itself
before it imports onnxruntime, then makes the session (constant folding allocates there) and runs each
batch; graph and batches come on its stdin, vectors go back on its stdout (``.npz``, without pickle)."""
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


def address_space_cap(graph_bytes: int, arena_bytes: int) -> int:
    """The child's address space: onnxruntime's arena, three copies of the graph (the bytes received, the
    model onnxruntime parses from them, the weights of its session) and the base."""
    return arena_bytes + 3 * graph_bytes + BASE_ADDRESS_SPACE


def _npz(arrays: list[np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, *arrays)
    return buffer.getvalue()


def _arrays(data: bytes) -> list[np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as found:
        return [found[f"arr_{index}"] for index in range(len(found.files))]


def probe_in_child(graph: bytes, batches: list[tuple[np.ndarray, np.ndarray]], path: Path) -> list[np.ndarray]:
    """The vectors ``graph`` gives for each (input_ids, attention_mask) batch, computed in a capped child;
    an ``OnnxBackendError`` naming ``path`` when the child runs out of memory or time, or fails."""
    from core.export import onnx_session

    arena = onnx_session.ARENA_MAX_BYTES  # read now: a caller may have lowered it
    # The folder holding ``core`` first on the child's path, and numpy's math libraries on one thread: each
    # of their threads reserves address space that the child never uses.
    root = str(Path(__file__).resolve().parents[2])
    python_path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    one_thread = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(arena), str(address_space_cap(len(graph), arena))],
            input=len(graph).to_bytes(8, "little") + graph + _npz([a for batch in batches for a in batch]),
            capture_output=True, timeout=PROBE_SECONDS, env={**os.environ, **one_thread, "PYTHONPATH": python_path})
    except subprocess.TimeoutExpired:
        raise OnnxBackendError(f"{path} ran its probe for more than {PROBE_SECONDS:g} s; refused") from None
    except OSError as error:
        raise OnnxBackendError(f"cannot start the probe of {path} ({error.strerror or error})") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reasons = [line[len(REFUSED):] for line in lines if line.startswith(REFUSED)]
        if reasons:  # the child's own reason, else how it ended
            why = reasons[-1][:200]
        elif done.returncode < 0:
            why = f"onnxruntime was stopped by signal {-done.returncode} (memory past the cap, or a crash)"
        else:
            why = f"the probe exited with status {done.returncode} ({(lines or ['no message'])[-1][:160]})"
        raise OnnxBackendError(f"{path} failed its probe: {why}")
    try:
        vectors = _arrays(done.stdout)
    except (ValueError, KeyError, OSError, EOFError):
        vectors = []
    if len(vectors) != len(batches):
        raise OnnxBackendError(f"{path} gave no readable vectors on its probe")
    return vectors


# ---- the child -----------------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    from core.export import onnx_session

    onnx_session.ARENA_MAX_BYTES = int(argv[0])  # before the first session registers the arena
    limit = int(argv[1])
    try:  # no more address space than ``limit``, or the inherited limit if lower; not on Windows
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except ImportError:
        pass
    try:
        stdin = sys.stdin.buffer
        graph = stdin.read(int.from_bytes(stdin.read(8), "little"))
        session = onnx_session.capped_session(graph)
        del graph  # the session holds its own copy of the weights
        arrays = _arrays(stdin.read())
        result = _npz([session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
                       for ids, mask in zip(arrays[::2], arrays[1::2])])
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
        reason = f"it needs more than {limit / 2**30:.1f} GiB of memory" if isinstance(error, MemoryError) \
            else onnx_session.failure_reason(error)
        print(f"{REFUSED}{reason}", file=sys.stderr)
        return 3
    sys.stdout.buffer.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
