"""``python -m core dedup``: cluster the near-duplicate questions of a corpus into a CSV.

    python -m core dedup --model M --questions FILE --out clusters.csv [--threshold T] [--min-size 2]
                         [--backend {torch,onnx}] [--engine {local,ray} [--ray-address A] [--workers N]]

FILE is a CSV/TSV or Parquet file with a question column, a pairs file, or plain text with one question per line
(``core.data.load_questions``). The clusters are ``core.inference.dedup``'s (community detection on a FAISS
k-NN graph); the CSV has one row per clustered question and is formula safe. The graph's index is kept in
the lab's cache (``index_cache``) and used again by the next run of the same model on the same corpus
(``core.inference.dedup_index``); the summary's ``index`` says whether it was.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from core.cli.common import (
    CliError,
    TqdmCounter,
    add_backend_option,
    add_engine_options,
    claimed_output,
    count,
    engine_session,
    load_backend,
    model_command,
    output_path,
    print_json,
    ray_vectors,
    read_corpus,
    threshold,
)


def add_parsers(sub):
    """Register ``dedup`` on the subparsers ``sub``."""
    from core.inference.dedup_graph import DEFAULT_K, MAX_NEIGHBOURHOOD
    from core.inference.search import FLAT_LIMIT
    from core.inference.vector_index import INDEX_KINDS

    dedup = model_command(sub, "dedup", "cluster the near-duplicate questions of a corpus into a CSV", cmd_dedup)
    dedup.add_argument("--questions", required=True,
                       help="CSV/TSV or Parquet with a question column (question, text, sentence, title or q), a "
                            "pairs file (its distinct questions), or plain text with one question per line; optionally "
                            ".gz")
    dedup.add_argument("--out", required=True, help="output CSV: one row per clustered question")
    dedup.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    dedup.add_argument("--threshold", type=threshold, default=None,
                       help="cosine a member must exceed to its cluster's representative (default: the model's "
                            "clustering threshold, picked for a high precision on its validation split; zero-shot "
                            "MiniLM's fixed one; else its pair threshold. The one used is printed with its source)")
    dedup.add_argument("--min-size", type=count, default=2, help="smallest cluster kept")
    dedup.add_argument("-k", "--neighbours", type=count, default=DEFAULT_K,
                       help="neighbours searched per question at first (more where all are above the threshold)")
    dedup.add_argument("--max-neighbourhood", type=count, default=None,
                       help=f"deepest search of one question's neighbourhood; beyond it a cluster keeps the "
                            f"closest, and a warning says how many questions reached it (default: {MAX_NEIGHBOURHOOD} "
                            f"when the search is approximate, over {FLAT_LIMIT:,} questions; else unbounded)")
    add_backend_option(dedup)
    dedup.add_argument("--index", choices=INDEX_KINDS, default=None,
                       help=f"the neighbour search's index: flat (exact), hnsw (approximate graph) or ivfpq "
                            f"(compressed about 15x, trained on a seeded sample; its candidates are scored again "
                            f"exactly); default: flat up to {FLAT_LIMIT:,} questions, hnsw above")
    add_engine_options(dedup)
    return dedup


# Results a deeper neighbourhood search may return before a run is refused (about a minute of exact search
# on a 2-core CPU): 20,000 questions at --threshold -1 would ask for 400 million, minutes in silence.
DEEPER_SEARCH_LIMIT = 1 << 25


def _check_threshold(graph, cosine: float, calibrated: float) -> None:
    """Refuse a threshold at which nearly every question's neighbourhood is the whole corpus.

    Most questions then have all of their first neighbours above the threshold, each is searched again as
    deep as the corpus (an exact index has no depth cap), and the answer is one giant cluster. No user
    means that, and waiting minutes for it in silence is worse than a refusal that says why at once: the
    run stops before clustering, with the numbers and the two ways out (a higher threshold, or a bounded
    search with --max-neighbourhood, whose capped-neighbourhood warning then says what was cut). A small
    corpus never reaches the limit, whatever the threshold: it is the work that is refused, not the value.
    """
    rows, results = graph.deeper_search(cosine)
    if results > DEEPER_SEARCH_LIMIT:
        hint = f" (the model's clustering threshold is {calibrated:.4g})"
        raise CliError(f"--threshold {cosine:.4g} is too low for this corpus: {rows:,} questions have all "
                       f"{graph.k} nearest neighbours above it, so nearly everything would be one cluster after a "
                       f"search of ~{results:,} pairs; raise the threshold{hint} or bound the search with "
                       "--max-neighbourhood")


def index_cache() -> Path:
    """Where dedup keeps its neighbour indexes between runs: the lab's own cache (``$SIAMESE_LAB_CACHE``,
    ``core.export.onnx_cache.cache_root``), never the model folder or the corpus's."""
    from core.export.onnx_cache import cache_root

    return cache_root() / "dedup"


def ray_corpus_file(path: str, report):
    """The questions file as Ray Data may read it itself (``core.inference.ray_corpus.CorpusFile``): plain text,
    a CSV's question column (UTF-8) or a Parquet file's; None for a pairs file (its distinct questions are a
    corpus-wide de-duplication) or another encoding, which the driver's reading serves."""
    from core.data.questions import COLUMN, LINES
    from core.inference.ray_corpus import CorpusFile

    if report.encoding != "utf-8" or report.shape not in (LINES, COLUMN):
        return None
    if report.file_format == "parquet":
        return CorpusFile(str(Path(path).resolve()), report.columns[0], parquet=True)
    if report.shape == LINES:
        return CorpusFile(str(Path(path).resolve()))
    # A one-column file is read whole lines to a field (commas kept): a separator no question holds.
    return CorpusFile(str(Path(path).resolve()), report.columns[0], report.delimiter or "\x1f")


def cmd_dedup(args) -> int:
    out = output_path(args.out, args.questions)
    # Claimed before anything is read or encoded; the CSV goes into place whole when the run ends well.
    with claimed_output([out], args.overwrite) as claim:
        summary = _dedup_into(claim, out, args)
    print_json(summary)
    return 0


def _dedup_into(claim, out: Path, args) -> dict:
    """Cluster ``args.questions`` into ``claim``'s temporary for ``out``; the run's summary."""
    from core.inference.calibration import Calibrated, clustering_threshold
    from core.inference.dedup import (
        clusters_frame,
        encode_corpus,
        outsized_cluster_note,
        write_csv_chunks,
    )
    from core.inference.dedup_graph import NeighbourGraph, capped_note
    from core.inference.dedup_index import saved_graph_index

    texts, report = read_corpus(args.questions)
    model, config = load_backend(args)
    store = saved_graph_index(index_cache(), model, texts)  # None: a model nothing identifies, built each run
    calibrated = clustering_threshold(config)
    chosen = calibrated if args.threshold is None else Calibrated(args.threshold, "given with --threshold")
    cosine = chosen.threshold
    print(f"threshold: {cosine:.4g} ({chosen.source})", file=sys.stderr)
    started = time.perf_counter()
    phases = {}  # seconds per phase, in the summary: where a long run spends its time
    with engine_session(args):  # --engine ray: encoder actors, then the first search in Ray tasks
        if args.engine == "ray":
            vectors, queries, read_by = ray_vectors(args, texts, out.parent, unit=True,
                                                    source=ray_corpus_file(args.questions, report))
        else:
            vectors, queries = encode_corpus(model, texts, progress=TqdmCounter("encoding"))
        phases["encode"] = time.perf_counter() - started
        options = dict(k=args.neighbours, queries=queries, max_neighbourhood=args.max_neighbourhood,
                       index_kind=args.index, index_store=store)
        if args.engine == "ray":
            from core.inference.ray_engine import ray_graph

            graph = ray_graph(vectors, workers=args.workers, **options)
        else:
            graph = NeighbourGraph(vectors, progress=TqdmCounter("neighbours"), **options)
        del vectors, queries, options  # the graph holds them (in its index): a corpus's vectors are kept once
    phases["neighbours"] = time.perf_counter() - started - sum(phases.values())
    _check_threshold(graph, cosine, calibrated.threshold)
    clusters = graph.cluster(cosine, args.min_size)
    phases["cluster"] = time.perf_counter() - started - sum(phases.values())
    largest = clusters[0].size if clusters else 0
    for note in (capped_note(graph.capped, graph.max_neighbourhood, cosine),
                 outsized_cluster_note(largest, len(texts), cosine)):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    frame = clusters_frame(clusters, texts)
    with claim.open(out) as handle:
        write_csv_chunks(handle, frame)
    return {"out": str(out), "questions": len(texts), "clusters": len(clusters),
            "clustered_questions": int(len(frame)), "largest_cluster": largest,
            "threshold": float(cosine), "threshold_source": chosen.source, "min_size": args.min_size,
            "capped_questions": graph.capped,
            "search": "exact" if graph.kind == "flat" else f"{graph.kind} (approximate)",
            "index": {"kind": graph.kind, "reused": bool(store and store.reused),
                      **({"folder": str(store.folder(graph.kind))} if store else {})},
            "backend": args.backend,
            "engine": args.engine, **({"workers": args.workers, "read_by": read_by} if args.engine == "ray" else {}),
            "seconds": round(time.perf_counter() - started, 1),
            "phase_seconds": {name: round(seconds, 1) for name, seconds in phases.items()}}
