"""`dedup --rerank`: does a cross-encoder confirming the bi-encoder's candidate pairs give better clusters?

Quora part A, shuffled (seed 0): a cross-encoder is trained with the lab's defaults (`train --model
cross-encoder`, from the packaged MiniLM) on the first --train pairs; the corpus is the questions of the next
--corpus pairs that share no question with them. `dedup` clusters the corpus with zero-shot MiniLM alone (its
clustering threshold, the lab's default), then with `--rerank` at its default candidate threshold (MiniLM's pair
threshold), at the clustering threshold and at lower ones (--candidates). A labelled pair counts as predicted
"duplicate" when its two questions land in one cluster; precision, recall and pair F1 against the labels, and
each command's time (its JSON's seconds).

    .venv/bin/python bench/dedup_rerank.py [--quick] [--train 4000] [--corpus 2000] [--candidates 0.7,0.6]
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import REPO, header, load_real_pairs, parser  # noqa: E402
from bench.dedup_quality import scores  # noqa: E402

OUT = REPO / "bench" / "out" / "dedup_rerank"  # ignored: the trained cross-encoder and the corpus stay here


def split(train: int, corpus: int):
    """(training pairs, labelled corpus pairs sharing no question with them)."""
    pairs = load_real_pairs().sample(frac=1.0, random_state=0).reset_index(drop=True)
    training = pairs.iloc[:train]
    seen = set(training["question1"]) | set(training["question2"])
    rest = pairs.iloc[train:]
    unseen = rest[~rest["question1"].isin(seen) & ~rest["question2"].isin(seen)]
    return training, unseen.iloc[:corpus].reset_index(drop=True)


def lab(*argv: str) -> tuple[dict, float]:
    """(the command's JSON, its wall seconds), run as a user would."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "core", *argv], cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(argv[:1])} failed: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout), time.perf_counter() - started


def same_cluster(clusters_csv: Path, pairs) -> np.ndarray:
    """(N,) whether each pair's two questions are in one cluster of the dedup output."""
    import pandas as pd

    frame = pd.read_csv(clusters_csv, keep_default_na=False)
    cluster = dict(zip(frame["question"], frame["cluster_id"]))
    first = pairs["question1"].map(cluster)
    return (first.notna() & (first == pairs["question2"].map(cluster))).to_numpy()


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--train", type=int, default=4000, help="cross-encoder training pairs (--quick: 800)")
    p.add_argument("--corpus", type=int, default=2000, help="labelled pairs whose questions are the corpus (--quick: 400)")
    p.add_argument("--candidates", default="0.7,0.6", help="lower candidate thresholds to try with --rerank")
    args = p.parse_args()
    if args.quick:
        args.train, args.corpus = 800, 400
    header("dedup --rerank against the bi-encoder alone", args.quick)
    OUT.mkdir(parents=True, exist_ok=True)
    training, corpus = split(args.train, args.corpus)
    train_csv, corpus_csv, cross = OUT / f"train{args.train}.csv", OUT / f"corpus{args.corpus}.csv", OUT / f"cross{args.train}"
    training.to_csv(train_csv, index=False)
    corpus.to_csv(corpus_csv, index=False)
    truth = corpus["is_duplicate"].to_numpy().astype(bool)
    print(f"training pairs {len(training):,}; corpus: {len(corpus):,} labelled pairs ({truth.mean():.1%} duplicates)")
    if not (cross / "config.json").is_file():
        _, seconds = lab("train", "--model", "cross-encoder", "--data", str(train_csv), "--out", str(cross),
                         "--device", "cpu")
        print(f"cross-encoder trained in {seconds:.0f} s")
    validation = json.loads((cross / "config.json").read_text())["metrics"]["validation"]
    print(f"cross-encoder: validation ROC AUC {validation['roc_auc']:.4f} on its own split of the training pairs")
    alone, seconds = lab("dedup", "--model", "minilm", "--questions", str(corpus_csv), "--out",
                         str(OUT / "alone.csv"), "--overwrite")
    threshold = alone["threshold"]
    print(f"\n{alone['questions']:,} questions; MiniLM's clustering threshold {threshold:.4f} ({alone['threshold_source']})")
    print(f"{'bi-encoder alone':<40} {scores(same_cluster(OUT / 'alone.csv', corpus), truth)}  {seconds:.0f} s")
    for candidate in [None, threshold, *map(float, args.candidates.split(","))]:  # None: the lab's default
        out = OUT / f"reranked_{candidate or 0:.3f}.csv"
        given = [] if candidate is None else ["--threshold", f"{candidate:.6f}"]
        summary, seconds = lab("dedup", "--model", "minilm", "--questions", str(corpus_csv), "--out", str(out),
                               "--overwrite", *given, "--rerank", str(cross))
        rerank = summary["rerank"]
        label = f"+ rerank, candidates > {summary['threshold']:.3f}" + (" (default)" if candidate is None else "")
        print(f"{label:<40} {scores(same_cluster(out, corpus), truth)}  "
              f"{seconds:.0f} s ({rerank['candidate_pairs']:,} candidates, {rerank['confirmed_pairs']:,} confirmed "
              f"above {rerank['threshold']:.3f}: {rerank['threshold_source']})")


if __name__ == "__main__":
    main()
