"""Deduplication speed: ours end to end against sentence-transformers, side by side in one run.

The corpus is the first 20,000 distinct questions (--quick: 2,000) of the shared Quora pairs
(``core.inference.search.corpus_questions`` of its first rows), clustered with zero-shot all-MiniLM-L6-v2 at one
threshold (default ``core.models.ZERO_SHOT_THRESHOLD``), clusters of at least 2:

- ours: ``core.inference.search.encode_towers`` (``MiniLM.encode`` in chunks), a ``NeighbourGraph`` (FAISS, exact up
  to 50,000 questions, k = 50 at first, deeper where all k are above the threshold), ``cluster``;
- ours (onnx): the same with ``--backend onnx``: the model's ONNX graph run by onnxruntime
  (``core.export.onnx_backend.onnx_model``, exported once before the timing);
- theirs: ``SentenceTransformer(<the installed MiniLM folder>).encode(convert_to_tensor=True)`` and
  ``sentence_transformers.util.community_detection`` (n² cosines in batches).

Ours encode with batch size 256 (our default; a transformer's batches are also cut at 1,024 padded
tokens, ``core.models.base``), theirs at sentence-transformers' default batch size 32 (its faster
setting on this CPU: at 256 it is about 2x slower); max length 64 on every side (``max_seq_length = 64``
on theirs).
Their rule is cosine >= threshold, ours > threshold: they are given the next float32 above the
threshold, so both mean "strictly above". The sides run in turn (ours, ours (onnx), theirs, ... with
--rounds); reported: median seconds per side and phase, and the ratios theirs / ours.

"Same clusters up to ties": community_detection run on *our* vectors must give exactly our clusters
(the algorithm); end to end, the two encoders' vectors differ in the last digits, so a pair whose
cosine sits at the threshold may fall on either side. Every pair on which the two vector sets disagree
("above the threshold" in one, not in the other) is a tie; the clusterings are the same up to ties when
every cluster found by only one side holds a question of such a pair.

    .venv/bin/python bench/dedup_speed.py [--quick] [--questions N] [--threshold T] [--rounds R]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import DATA, header, median, parser, report, setup_torch  # noqa: E402

BATCH, PEER_BATCH, MAX_LENGTH = 256, 32, 64


def load_corpus(count: int):
    """(questions, pairs frame of the rows read): the first ``count`` distinct questions of the shared
    file; None when the file is absent."""
    import pandas as pd

    from core.data import corpus_questions

    if not DATA.is_file():
        return None
    rows = count  # a row holds about 1.8 new questions at the start of the file
    while True:
        frame = pd.read_csv(DATA, sep="\t", keep_default_na=False, nrows=rows)
        questions = corpus_questions(frame)
        if len(questions) >= count or len(frame) < rows:
            return questions[:count], frame
        rows *= 2


def strictly_above(threshold: float) -> float:
    """The threshold to give community_detection (cosine >= t) so that it means cosine > ``threshold``."""
    return float(np.nextafter(np.float32(threshold), np.float32(2)))


def as_sets(clusters) -> set[frozenset[int]]:
    return {frozenset(int(i) for i in c) for c in clusters}


def disagreeing_rows(a: np.ndarray, b: np.ndarray, threshold: float, chunk: int = 1024) -> tuple[set[int], int, float]:
    """Rows of a pair that is above ``threshold`` under one set of unit vectors and not under the other;
    the number of such pairs; the largest |cos_a - cos_b| over all pairs. O(n²) in chunks."""
    t = np.float32(threshold)
    rows: set[int] = set()
    pairs, largest = 0, 0.0
    for start in range(0, len(a), chunk):
        sa, sb = a[start : start + chunk] @ a.T, b[start : start + chunk] @ b.T  # (c, N) each
        largest = max(largest, float(np.abs(sa - sb).max()))
        i, j = np.nonzero((sa > t) != (sb > t))
        i += start
        keep = i != j
        pairs += int(keep.sum())
        rows.update(i[keep].tolist())
        rows.update(j[keep].tolist())
    return rows, pairs // 2, largest


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--questions", type=int, default=None, help="corpus size (default 20,000; --quick 2,000)")
    p.add_argument("--threshold", type=float, default=None, help="cosine threshold (default: zero-shot MiniLM's)")
    p.add_argument("--rounds", type=int, default=1, help="runs of each side, alternated")
    p.add_argument("--device", default="cpu", help="where both sides encode (cpu or cuda)")
    args = p.parse_args()
    count = args.questions or (2_000 if args.quick else 20_000)
    header(f"dedup_speed: ours vs sentence-transformers, {count:,} questions", args.quick)
    loaded = load_corpus(count)
    if loaded is None:
        print(f"skipped: the shared data is not at {DATA}")
        return
    texts, _ = loaded
    setup_torch()
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import community_detection

    from core.inference.dedup_graph import NeighbourGraph
    from core.inference.search import clustering_rows, encode_towers
    from core.models import ZERO_SHOT_THRESHOLD, load_model
    from core.text.wordpiece_tokenizer import minilm_folder

    threshold = ZERO_SHOT_THRESHOLD if args.threshold is None else args.threshold
    ours_model, _ = load_model("minilm", device=args.device)
    sides = {"ours": ours_model}
    if args.device == "cpu":
        import os
        import tempfile

        from core.export.onnx_backend import CACHE_ENV, onnx_model

        os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="dedup-speed-")
        sides["ours (onnx)"], _ = onnx_model("minilm")
    theirs_model = SentenceTransformer(str(minilm_folder()), device=args.device)
    theirs_model.max_seq_length = MAX_LENGTH
    results: dict[str, dict] = {}
    times: dict[str, list[dict]] = {side: [] for side in [*sides, "theirs"]}

    def ours(side: str) -> None:
        started = time.perf_counter()
        vectors, queries = clustering_rows(*encode_towers(sides[side], texts, batch_size=BATCH))
        encoded = time.perf_counter()
        graph = NeighbourGraph(vectors, queries=queries)
        searched = time.perf_counter()
        clusters = graph.cluster(threshold, 2)
        done = time.perf_counter()
        times[side].append({"encode": encoded - started, "k-NN graph": searched - encoded,
                            "cluster": done - searched, "total": done - started})
        results[side] = {"vectors": vectors, "clusters": clusters, "kind": graph.kind}

    def theirs() -> None:
        started = time.perf_counter()
        embeddings = theirs_model.encode(texts, batch_size=PEER_BATCH, convert_to_tensor=True)
        encoded = time.perf_counter()
        communities = community_detection(embeddings, threshold=strictly_above(threshold), min_community_size=2)
        done = time.perf_counter()
        times["theirs"].append({"encode": encoded - started, "community_detection": done - encoded,
                                "total": done - started})
        unit = torch.nn.functional.normalize(embeddings.float(), dim=-1).cpu().numpy()
        results["theirs"] = {"vectors": unit, "clusters": communities}

    for _ in range(args.rounds):
        for side in sides:
            ours(side)
        theirs()
    peer = results["theirs"]
    theirs_median = median([t["total"] for t in times["theirs"]])
    speed = {f"theirs {phase}": median([t[phase] for t in times["theirs"]]) for phase in times["theirs"][0]}
    for side in sides:
        speed.update({f"{side} {phase}": median([t[phase] for t in times[side]]) for phase in times[side][0]})
        speed[f"ratio theirs / {side} (total; goal >= 1.5)"] = theirs_median / median([t["total"] for t in times[side]])
        speed[f"ratio theirs / {side} (after encoding)"] = median(
            [t["community_detection"] for t in times["theirs"]]) / median(
            [t["k-NN graph"] + t["cluster"] for t in times[side]])
    report("speed (median seconds)", speed)
    for side in sides:
        report_clusters(side, results[side], peer, texts, threshold)


def report_clusters(side: str, mine: dict, peer: dict, texts, threshold: float) -> None:
    import torch
    from sentence_transformers.util import community_detection

    ours_sets = as_sets(c.members for c in mine["clusters"])
    theirs_sets = as_sets(peer["clusters"])
    on_our_vectors = as_sets(community_detection(torch.from_numpy(mine["vectors"]), threshold=strictly_above(threshold),
                                                 min_community_size=2))
    ties, tie_pairs, largest = disagreeing_rows(mine["vectors"], peer["vectors"], threshold)
    differing = ours_sets ^ theirs_sets
    explained = all(cluster & ties for cluster in differing)
    report(f"clusters: {side} against theirs", {
        "questions": len(texts), "threshold": threshold, "our search": mine["kind"],
        "ours: clusters / questions in one": f"{len(ours_sets):,} / {sum(len(c) for c in ours_sets):,}",
        "theirs: clusters / questions in one": f"{len(theirs_sets):,} / {sum(len(c) for c in theirs_sets):,}",
        "community_detection on our vectors == ours": on_our_vectors == ours_sets,
        "end to end: clusters in both": len(ours_sets & theirs_sets),
        "end to end: clusters in only one": len(differing),
        "pairs the two encoders put on opposite sides of the threshold": tie_pairs,
        "largest |cosine difference| between the encoders": largest,
        "same clusters up to ties": explained,
    })


if __name__ == "__main__":
    main()
