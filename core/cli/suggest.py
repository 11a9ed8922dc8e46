"""``python -m core suggest``: the pairs of a corpus to label next, as a CSV: each question's nearest neighbours, less
the pairs already in ``--labels``, ``core.inference.candidates.choose_pairs`` picking N (``--rerank``: by the
cross-encoder's score)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from core.cli.common import (
    QUESTIONS_HELP, CliError, TqdmCounter, add_output_options, add_rerank_option,
    claimed_output, count, load_backend, load_corpus, load_reranker, model_command, number, output_path, print_json,
    refuse_without_vectors, threshold, vector_cache, vector_cache_key,
)


def add_parsers(sub):
    from core.inference.candidates import DEFAULT_K, RANDOM_SHARE, STRATEGIES

    suggest = model_command(sub, "suggest", "the pairs of a corpus to label next, as a CSV", cmd_suggest,
                            backend=True)
    option = suggest.add_argument
    option("--questions", required=True, help=QUESTIONS_HELP)
    option("--labels", default=None, help="the labels so far (a label database or a pairs CSV; may not exist yet)")
    option("--n", type=count, required=True, help="how many pairs to suggest")
    option("--strategy", choices=STRATEGIES, default="uncertainty",
           help="uncertainty: the pairs closest to the threshold, plus a random share; random: all at random")
    option("--threshold", type=threshold, default=None,
           help="the similarity the model is least sure about (default: its pair threshold, else one calibrated on "
                "the labels)")
    option("--random-share", type=number("between 0 and 1", 0, 1), default=RANDOM_SHARE,
           help="share of the N drawn at random with --strategy uncertainty")
    option("--seed", type=int, default=0, help="seed of the random draw")
    option("-k", "--neighbours", type=count, default=DEFAULT_K, help="neighbours of each question paired with it")
    add_output_options(suggest, help="output CSV: question1, question2, similarity, reason")
    add_rerank_option(suggest)
    return suggest


def _load_labels(path: str | None):
    """A ``LabelStore`` for a label database, a pairs frame for a pairs CSV, None when there is no file yet."""
    from core.data import DataError
    from core.saving.label_store import LabelStore, is_label_database, read_labels_csv

    if path is None:
        return None
    if not Path(path).exists() and not Path(path).is_symlink():
        print(f"labels: {path} does not exist yet; no pair is labelled", file=sys.stderr)
        return None
    try:
        if not is_label_database(path):
            return read_labels_csv(path)
        store = LabelStore(path)
        len(store)  # a database the lab cannot read is said here, before any work
        return store
    except DataError as error:
        raise _labels_error(path, error) from None


def _labels_error(path, error) -> CliError:
    message = str(error)
    return CliError(message if str(path) in message else f"--labels {path}: {message}")


def cmd_suggest(args) -> int:
    from core.data import DataError, pair_keys
    from core.device import resolve_device
    from core.inference.calibration import Calibrated, pair_threshold
    from core.inference.candidates import choose_pairs, distinct_questions, embed_corpus
    from core.inference.search import model_identity
    from core.saving.label_store import LabelStore
    from core.saving.safe_csv import safe_csv_text
    from core.training.active_rounds import labelled_threshold, unlabelled_candidates

    out = output_path(args.out, args.questions, args.labels)
    with claimed_output([out], args.overwrite) as claim:  # claimed before any work
        device = resolve_device(args.device)  # a GPU not here is refused first, and a model without vectors
        refuse_without_vectors(args.model)
        questions = distinct_questions(load_corpus(args.questions))
        if len(questions) < 2:
            raise CliError(f"{args.questions} holds one distinct question; pairs need at least two")
        labels = _load_labels(args.labels)
        reranker, rerank_config = load_reranker(args)
        model, config = load_backend(args)
        started = time.perf_counter()
        key = vector_cache_key(args) or model_identity(model)  # the vectors dedup and search keep, shared with them
        corpus = embed_corpus(model, questions, progress=TqdmCounter("encoding"),
                              cache=vector_cache() if key else None, model_key=key, device=device)
        encoded = time.perf_counter()
        # A database is read by queries (the labels between corpus questions for a threshold, which candidates it
        # holds); a pairs CSV is read whole, its keys a set.
        store = labels if isinstance(labels, LabelStore) else None
        try:
            if args.threshold is not None:
                chosen = Calibrated(args.threshold, "given with --threshold")
            elif reranker is not None:  # the cross-encoder's scores are the ones thresholded
                chosen = pair_threshold(rerank_config)
            elif labels is not None:  # labelled pairs of two corpus questions: scored without encoding
                chosen = labelled_threshold(config, corpus, labels)
            else:
                chosen = pair_threshold(config)
            print(f"threshold: {chosen.threshold:.4g} ({chosen.source})", file=sys.stderr)
            in_csv = set() if labels is None or store is not None else set(pair_keys(labels["question1"],
                                                                                      labels["question2"]))
            candidates = unlabelled_candidates(corpus, in_csv, store, args.neighbours)
            if reranker is not None:
                from core.inference.dedup import rescored

                candidates = rescored(candidates, reranker)
            labelled_count = 0 if labels is None else len(labels)
        except DataError as error:  # the database changed under the command: one line
            raise _labels_error(args.labels, error) from None
        picked = choose_pairs(candidates, args.n, chosen.threshold, args.strategy, args.random_share, args.seed)
        with claim.open(out, "w", encoding="utf-8", newline="") as handle:
            handle.write(safe_csv_text(picked))
        if len(picked) < args.n:
            print(f"warning: only {len(picked)} pairs of questions not yet asked in this round were left to "
                  "suggest", file=sys.stderr)
    print_json({"out": str(out), "questions": len(questions), "labelled": labelled_count,
                "candidates": len(candidates), "suggested": len(picked),
                "uncertain": int((picked["reason"] == "uncertain").sum()),
                "random": int((picked["reason"] == "random").sum()), "strategy": args.strategy,
                "threshold": float(chosen.threshold), "threshold_source": chosen.source, "seed": args.seed,
                "vectors": {"reused": corpus.reused}, "backend": args.backend, "rerank": args.rerank,
                "seconds": {"encode": round(encoded - started, 2), "choose": round(time.perf_counter() - encoded, 2)}})
    return 0
