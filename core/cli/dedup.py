"""``python -m core dedup``: the near-duplicate questions of a corpus clustered into a CSV, or with ``--sweep`` a row
of figures per threshold from one graph. A second run reuses the lab's cache (the vectors, keyed by the model's files
so the model is not even loaded, and the graph's index); ``--rerank`` has a cross-encoder confirm the candidate pairs.
"""
from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

from core.cli.common import (
    QUESTIONS_HELP, CliError, TqdmCounter, add_engine_options, add_output_options,
    add_rerank_option, claimed_output, count, engine_session, load_backend, load_corpus, load_reranker, model_command,
    output_path, print_json, ray_vectors, refuse_without_vectors, threshold, vector_cache,
    vector_cache_key,
)

DEFAULT_SWEEP = "0.70:0.95:0.05"  # --sweep without a range: from topic-level likeness to near copies


def sweep_range(text: str) -> list[float]:
    """argparse type of ``--sweep``: ``START:STOP:STEP``, cosines from START up to STOP (included) by STEP."""
    import argparse

    from core.inference.dedup import MAX_SWEEP, threshold_range

    try:
        start, stop, step = map(float, text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP:STEP, e.g. {DEFAULT_SWEEP}, got {text!r}") from None
    try:
        return threshold_range(start, stop, step)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error} (at most {MAX_SWEEP} thresholds)") from None


def add_parsers(sub):
    from core.inference.dedup_graph import DEFAULT_K, MAX_NEIGHBOURHOOD
    from core.inference.search import FLAT_LIMIT, INDEX_KINDS

    dedup = model_command(sub, "dedup", "cluster the near-duplicate questions of a corpus into a CSV", cmd_dedup,
                          backend=True)
    option = dedup.add_argument
    option("--questions", required=True, help=QUESTIONS_HELP)
    add_output_options(dedup, required=False, help="output CSV, one row per clustered question (unless --sweep)")
    option("--threshold", type=threshold, default=None,
           help="cosine a member must exceed to its cluster's representative (default: the model's clustering "
                "threshold, else its pair threshold); with --rerank, the cosine a candidate pair must exceed "
                "(default: the model's pair threshold)")
    option("--sweep", type=sweep_range, nargs="?", const=sweep_range(DEFAULT_SWEEP), default=None,
           metavar="START:STOP:STEP", help=f"print a row of figures per threshold instead (default: {DEFAULT_SWEEP})")
    option("--vectors", default=None, metavar="FILE.npy", help="the vectors `embed` wrote, instead of encoding")
    option("--min-size", type=count, default=2, help="smallest cluster kept")
    option("-k", "--neighbours", type=count, default=DEFAULT_K,
           help="neighbours searched per question at first (more where all are above the threshold)")
    option("--max-neighbourhood", type=count, default=None,
           help=f"deepest search of one question's neighbourhood, said when reached (default: {MAX_NEIGHBOURHOOD} "
                f"for an approximate search, else unbounded)")
    option("--index", choices=INDEX_KINDS, default=None,
           help=f"flat (exact), hnsw (approximate graph) or ivfpq (compressed, candidates rescored exactly); "
                f"default: flat up to {FLAT_LIMIT:,} questions, hnsw above")
    add_engine_options(dedup)
    add_rerank_option(dedup)
    return dedup


# Results a deeper neighbourhood search may return before a run is refused (about a minute of exact search
# on a 2-core CPU): 20,000 questions at --threshold -1 would ask for 400 million, minutes in silence.
DEEPER_SEARCH_LIMIT = 1 << 25


def _check_threshold(graph, cosine: float, config: dict) -> None:
    """Refuse, with the two ways out, a threshold at which nearly every question's neighbourhood is the whole
    corpus: minutes of search in silence for one giant cluster. It is the work that is refused, not the value."""
    rows, results = graph.deeper_search(cosine)
    if results > DEEPER_SEARCH_LIMIT:
        from core.inference.calibration import clustering_threshold

        hint = f" (the model's clustering threshold is {clustering_threshold(config).threshold:.4g})"
        raise CliError(f"--threshold {cosine:.4g} is too low for this corpus: {rows:,} questions have all "
                       f"{graph.k} nearest neighbours above it, so nearly everything would be one cluster after a "
                       f"search of ~{results:,} pairs; raise the threshold{hint} or bound the search with "
                       "--max-neighbourhood")


def cmd_dedup(args) -> int:
    from core.device import resolve_device

    resolve_device(args.device)  # a GPU that is not here is refused before any work, and a model without vectors
    refuse_without_vectors(args.model)
    if args.sweep is not None:
        for flag, value in (("--out", args.out), ("--threshold", args.threshold), ("--rerank", args.rerank)):
            if value is not None:
                raise CliError(f"--sweep prints a row per threshold of its range and writes no clusters; drop {flag}")
        rows, summary = _dedup(args)
        for row in rows:
            print_json(row)
        print_json(summary)
        return 0
    if args.out is None:
        raise CliError("python -m core dedup: --out is required (or --sweep, which writes no file)")
    out = output_path(args.out, args.questions, args.vectors)
    # Claimed before anything is read or encoded; the CSV goes into place whole when the run ends well.
    with claimed_output([out], args.overwrite) as claim:
        summary = _dedup(args, claim, out)
    print_json(summary)
    return 0


def _graph(args, texts):
    """(the ``NeighbourGraph`` of ``texts``, its model's config, what the summary says of its vectors and index,
    seconds per phase): vectors from ``--vectors``, the cache or the encoder, the index from the cache if there."""
    from core.device import resolve_device
    from core.export.onnx_backend import cache_root
    from core.inference.dedup_graph import NeighbourGraph
    from core.inference.embedding import read_embedding_file
    from core.inference.search import DeviceIndex, fingerprint, model_identity
    from core.inference.search import CorpusVectors, SavedIndex, corpus_vectors
    from core.model_names import ZERO_SHOT
    from core.models.registry import zero_shot_config
    from core.saving import read_config

    started, phases = time.perf_counter(), {}
    device = resolve_device(args.device)
    loaded = functools.cache(lambda: load_backend(args))  # a run whose vectors are cached needs only the config
    model = functools.cache(lambda: loaded()[0])
    key = vector_cache_key(args) or model_identity(model())
    cache = vector_cache() if key else None
    corpus = fingerprint(texts)
    facts = {"reused": False, "source": "encoded", **({"folder": str(cache.folder(key, corpus))} if cache else {})}
    read_by = None
    with engine_session(args):  # --engine ray: encoder actors, then the first search in Ray tasks
        if args.vectors is not None:  # embed's vectors of these texts, checked against their sha256 and the model
            try:
                points, queries = read_embedding_file(args.vectors, texts, model()), None
            except ValueError as error:
                raise CliError(f"--vectors: {error}") from None
            facts = {"reused": True, "source": "file", "file": str(args.vectors)}
        elif args.engine == "ray":
            saved = cache.load(key, texts, corpus) if cache is not None else None
            if saved is not None:
                (points, queries), read_by = saved.for_clustering(), "cache"
            else:
                (points, queries), read_by = ray_vectors(args, texts, unit=True), "driver"
                if queries is None and cache is not None:  # a two-tower model's rows are its towers mixed
                    cache.save(key, texts, CorpusVectors(points), corpus)
            facts.update(reused=saved is not None, source="cache" if saved is not None else "encoded")
        else:
            vectors = corpus_vectors(texts, model, cache, key, progress=TqdmCounter("encoding"))
            facts.update(reused=vectors.reused, source="cache" if vectors.reused else "encoded")
            points, queries = vectors.for_clustering()
            del vectors
        phases["encode"] = time.perf_counter() - started
        store = SavedIndex(cache_root() / "dedup", key, corpus, len(texts)) if key else None
        options = dict(k=args.neighbours, queries=queries, max_neighbourhood=args.max_neighbourhood,
                       index_kind=args.index, index_store=store)
        if args.engine == "ray":
            from core.inference.ray_engine import RayGraph

            graph = RayGraph(points, workers=args.workers, **options)
        else:  # on a CUDA --device the search is exact there, when the vectors fit (core.inference.search)
            graph = NeighbourGraph(points, progress=TqdmCounter("neighbours"), device=device, **options)
        del points, queries, options  # the graph holds them (in its index): a corpus's vectors are kept once
    phases["neighbours"] = time.perf_counter() - started - sum(phases.values())
    on_device = isinstance(graph.index, DeviceIndex)  # the store keeps FAISS indexes only
    index = {"kind": graph.kind, "reused": bool(store and store.reused and not on_device),
             "device": str(graph.index.device) if on_device else "cpu",
             **({"folder": str(store.folder(graph.kind))} if store and not on_device else {})}
    engine = {"engine": args.engine, **({"workers": args.workers, "read_by": read_by} if args.engine == "ray" else {})}
    if loaded.cache_info().currsize or args.backend == "onnx":
        config = loaded()[1]
    else:  # read without the weights
        config = zero_shot_config() if args.model == ZERO_SHOT else read_config(args.model)
    return graph, config, {"vectors": facts, "index": index, **engine}, phases


def _dedup(args, claim=None, out: Path | None = None):
    """Cluster ``args.questions`` into ``claim``'s temporary for ``out``: the run's summary; with ``--sweep``, (one
    row per threshold of ``args.sweep``, the summary), all from one graph."""
    from core.inference.dedup import clusters_frame, outsized_cluster_note, sweep_rows, write_csv_chunks
    from core.inference.dedup_graph import capped_note

    started = time.perf_counter()
    reranker, rerank_config = load_reranker(args)
    texts = load_corpus(args.questions)
    read = time.perf_counter() - started
    graph, config, reuse, phases = _graph(args, texts)
    phases = {"read": read, **phases}
    if args.threshold is not None:
        cosine, source = args.threshold, "given with --threshold"
    else:  # with --rerank, the model's pair threshold: the cross-encoder's own sets the precision
        from core.inference.calibration import clustering_threshold, pair_threshold  # brings scikit-learn

        calibrated = (pair_threshold if args.rerank else clustering_threshold)(config)
        cosine, source = calibrated.threshold, calibrated.source
    sweep = args.sweep is not None
    print(f"{'default ' if sweep else ''}threshold: {cosine:.4g} ({source})", file=sys.stderr)
    clustering = time.perf_counter()
    if sweep:
        rows = sweep_rows(graph, args.sweep, args.min_size, DEEPER_SEARCH_LIMIT)
        phases["cluster"] = time.perf_counter() - clustering
        return rows, {"questions": len(texts), "thresholds": len(rows), "min_size": args.min_size,
                      "default_threshold": float(cosine), "threshold_source": source,
                      **_run_facts(args, graph, reuse, started, phases)}
    _check_threshold(graph, cosine, config)
    if reranker is None:
        clusters = graph.cluster(cosine, args.min_size)
    else:
        clusters, reuse["rerank"] = _reranked(args, graph, texts, cosine, reranker, rerank_config)
    phases["cluster"] = time.perf_counter() - clustering
    largest = clusters[0].size if clusters else 0
    for note in (capped_note(graph.capped, graph.max_neighbourhood, cosine),
                 outsized_cluster_note(largest, len(texts), cosine)):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    frame = clusters_frame(clusters, texts)
    writing = time.perf_counter()
    with claim.open(out) as handle:
        write_csv_chunks(handle, frame)
    phases["write"] = time.perf_counter() - writing
    return {"out": str(out), "questions": len(texts), "clusters": len(clusters),
            "clustered_questions": int(len(frame)), "largest_cluster": largest,
            "threshold": float(cosine), "threshold_source": source, "min_size": args.min_size,
            "capped_questions": graph.capped, **_run_facts(args, graph, reuse, started, phases)}


def _run_facts(args, graph, reuse: dict, started: float, phases: dict) -> dict:
    """The summary's part shared by a clustering and a sweep: the search, what was reused, the time per phase."""
    return {"search": "exact" if graph.kind == "flat" else f"{graph.kind} (approximate)", **reuse,
            "backend": args.backend, "seconds": round(time.perf_counter() - started, 1),
            "phase_seconds": {name: round(seconds, 1) for name, seconds in phases.items()}}


def _reranked(args, graph, texts, cosine: float, reranker, config: dict):
    """(clusters, what the summary says of them) of ``--rerank``: the pairs above the bi-encoder's ``cosine`` are
    the candidates, the cross-encoder's clustering threshold decides (``core.inference.dedup``)."""
    from core.inference.calibration import clustering_threshold
    from core.inference.dedup import candidate_scores, confirmed_clusters

    decide = clustering_threshold(config)
    print(f"rerank threshold: {decide.threshold:.4g} ({decide.source})", file=sys.stderr)
    first, second, scores = candidate_scores(graph, texts, cosine, reranker, TqdmCounter("reranking", unit="pair"))
    clusters = confirmed_clusters(len(texts), first, second, scores, decide.threshold, args.min_size)
    return clusters, {"model": args.rerank, "candidate_pairs": len(scores),
                      "confirmed_pairs": int((scores > decide.threshold).sum()),
                      "threshold": float(decide.threshold), "threshold_source": decide.source}
