"""``python -m core dedup``: cluster the near-duplicate questions of a corpus into a CSV.

    python -m core dedup --model M --questions FILE --out clusters.csv [--threshold T] [--min-size 2]
                         [--backend {torch,onnx}]

FILE is a CSV/TSV with a question column, a pairs file, or plain text with one question per line
(``core.data.load_questions``). The clusters are ``core.inference.dedup``'s (community detection on a FAISS
k-NN graph); the CSV has one row per clustered question and is formula safe.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from core.cli.common import (
    CliError,
    TqdmCounter,
    add_backend_option,
    count,
    load_backend,
    model_command,
    print_json,
    threshold,
)


def add_parsers(sub):
    """Register ``dedup`` on the subparsers ``sub``."""
    from core.inference.dedup_graph import DEFAULT_K, MAX_NEIGHBOURHOOD
    from core.inference.search import FLAT_LIMIT

    dedup = model_command(sub, "dedup", "cluster the near-duplicate questions of a corpus into a CSV", cmd_dedup)
    dedup.add_argument("--questions", required=True,
                       help="CSV/TSV with a question column (question, text, sentence, title or q), a pairs file "
                            "(its distinct questions), or plain text with one question per line; optionally .gz")
    dedup.add_argument("--out", required=True, help="output CSV: one row per clustered question")
    dedup.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    dedup.add_argument("--threshold", type=threshold, default=None,
                       help="cosine a member must exceed to its cluster's representative (default: the model's "
                            "calibrated best-accuracy threshold; zero-shot MiniLM's fixed one)")
    dedup.add_argument("--min-size", type=count, default=2, help="smallest cluster kept")
    dedup.add_argument("-k", "--neighbours", type=count, default=DEFAULT_K,
                       help="neighbours searched per question at first (more where all are above the threshold)")
    dedup.add_argument("--max-neighbourhood", type=count, default=None,
                       help=f"deepest search of one question's neighbourhood; beyond it a cluster keeps the "
                            f"closest, and a warning says how many questions reached it (default: {MAX_NEIGHBOURHOOD} "
                            f"when the search is approximate, over {FLAT_LIMIT:,} questions; else unbounded)")
    add_backend_option(dedup)
    return dedup


def _load_questions(path: str) -> list[str]:
    from core.data import DataError, load_questions

    if not Path(path).is_file():
        raise CliError(f"no questions file at {path}")
    try:
        questions, report = load_questions(path)
    except DataError as error:
        raise CliError(f"{path}: {error}") from None
    if report.dropped:
        print(f"data: {report.summary()}", file=sys.stderr)
    for warning in report.warnings:
        print(f"data: note: {warning}", file=sys.stderr)
    return questions


def _check_out(path: str, source: str, overwrite: bool = False) -> Path:
    """The output path, checked before anything is encoded: a file we may (re)write, never another's."""
    out = Path(path)
    if out.exists() and Path(source).exists() and out.resolve() == Path(source).resolve():
        raise CliError("--out is the questions file; choose a new file")
    if out.is_dir():
        raise CliError(f"--out {out} is a folder; name a CSV file")
    if not out.parent.is_dir():
        raise CliError(f"--out {out}: the folder {out.parent} does not exist")
    if out.exists() and not out.is_file():
        raise CliError(f"--out {out} is not a regular file")
    if out.exists() and not overwrite:
        raise CliError(f"--out {out} exists; choose a new file or add --overwrite")
    return out


def cmd_dedup(args) -> int:
    from core.inference.dedup import (
        clusters_frame,
        default_threshold,
        encode_corpus,
        write_csv,
    )
    from core.inference.dedup_graph import NeighbourGraph, capped_note

    out = _check_out(args.out, args.questions, args.overwrite)
    texts = _load_questions(args.questions)
    model, config = load_backend(args)
    cosine = args.threshold if args.threshold is not None else default_threshold(config)
    if cosine is None:
        raise CliError(f"{args.model} has no calibrated threshold; pass --threshold")
    started = time.perf_counter()
    phases = {}  # seconds per phase, in the summary: where a long run spends its time
    vectors, queries = encode_corpus(model, texts, progress=TqdmCounter("encoding"))
    phases["encode"] = time.perf_counter() - started
    graph = NeighbourGraph(vectors, k=args.neighbours, queries=queries, progress=TqdmCounter("neighbours"),
                           max_neighbourhood=args.max_neighbourhood)
    del vectors, queries  # the graph holds them (in its index): a corpus's vectors are kept once
    phases["neighbours"] = time.perf_counter() - started - sum(phases.values())
    clusters = graph.cluster(cosine, args.min_size)
    phases["cluster"] = time.perf_counter() - started - sum(phases.values())
    note = capped_note(graph.capped, graph.max_neighbourhood, cosine)
    if note:
        print(f"warning: {note}", file=sys.stderr)
    frame = clusters_frame(clusters, texts)
    try:
        write_csv(frame, out)
    except OSError as error:
        raise CliError(f"--out {out}: cannot write it: {error.strerror or error}") from None
    print_json({"out": str(out), "questions": len(texts), "clusters": len(clusters),
                "clustered_questions": int(len(frame)), "largest_cluster": clusters[0].size if clusters else 0,
                "threshold": float(cosine), "min_size": args.min_size, "capped_questions": graph.capped,
                "search": "exact" if graph.kind == "flat" else "hnsw (approximate)", "backend": args.backend,
                "seconds": round(time.perf_counter() - started, 1),
                "phase_seconds": {name: round(seconds, 1) for name, seconds in phases.items()}})
    return 0
