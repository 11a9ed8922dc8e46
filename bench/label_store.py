"""The label database at scale: a Label page run's reads, an answer's save, and ``suggest --labels`` in a 2.5 GB
address space, with 2,000,000 labels.

    .venv/bin/python bench/label_store.py [--labels 2000000] [--adds 1000] [--runs 20] [--folder DIR] [--keep]

Fills a new label database with ``--labels`` made-up labels: the first answer through ``LabelStore.add`` (the lab
makes the schema), the rest written straight into that schema in one transaction, as answers given one by one
would leave them (keys, bucket, labellers; the first ``CORPUS // 2`` are pairs of corpus questions). Then:

* a page run, in a fresh process (its peak memory is the process's): the reads one run of the Label page makes
  (``pages/9_Label.py``, ``lab/label_view.py``): the share counts (the count line and
  the retrain blocker), the watched answers' labels (``show_notices``), the round's keys asked of the database
  (``pending_pair``, ``round_progress``), Undo's ``recent(1, labelled_by=...)`` and the last answers
  (``show_recent``). Kept round: most runs. New round: every ``ROUND_SIZE`` answers, the candidates asked of the
  database, with a model that has its own threshold and with zero-shot MiniLM (whose threshold is calibrated on
  the labels of pairs of corpus questions, asked of the database). The first run opens the connection; the
  page's store is kept per server;
* saving: ``--adds`` new answers and as many corrections (``LabelStore.add``, each its own fsynced transaction);
* ``python -m core suggest --labels`` on the corpus, in a child process whose address space is capped at 2.5 GB
  (``ulimit -v 2500000``, ``RLIMIT_AS``), with a tiny Siamese LSTM (trained here on the bundled sample, 1 epoch)
  and with zero-shot MiniLM (``--model minilm``, its threshold calibrated on the labels).

Prints each figure; times in milliseconds (median, p99, max). The folder defaults to a temporary one under the
runs folder's file system (the system temporary folder may be a RAM disk, where fsync costs nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.data.questions import pair_key, pair_keys  # noqa: E402
from core.saving.label_store import LabelStore, pair_bucket  # noqa: E402

CORPUS = 2_000  # distinct questions of the corpus the page and suggest pair
ADDRESS_SPACE_KIB = 2_500_000  # ulimit -v
PAGE_SESSION = "workspace-bench/session-page"  # the page's labeller: a few answers, among the last
ROUND_SIZE = 10


def corpus_questions() -> list[str]:
    return [f"How do I make made-up question number {i} work?" for i in range(CORPUS)]


def made_up_pair(i: int, corpus: list[str]) -> tuple[str, str]:
    if i < CORPUS // 2:
        return corpus[2 * i], corpus[2 * i + 1]
    return f"Question {i} made up?", f"Its pair {i}, also made up?"


def fill(path: Path, n: int, corpus: list[str]) -> None:
    store = LabelStore(path)
    store.add(*made_up_pair(0, corpus), 0, labelled_by="workspace-bench/session-0")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    when = "2026-12-01T00:00:00.000+00:00"
    for start in range(1, n, 100_000):
        answers, labels = [], []
        for i in range(start, min(n, start + 100_000)):
            question1, question2 = made_up_pair(i, corpus)
            key, label = pair_key(question1, question2), i % 2
            by = PAGE_SESSION if i > n - 20 and i % 4 == 0 else f"workspace-bench/session-{i % 97}"
            answers.append((i + 1, *key, question1, question2, label, by, when))
            labels.append((*key, i + 1, label, pair_bucket(*key)))
        db.executemany("INSERT INTO answers (id, key1, key2, question1, question2, is_duplicate, labelled_by, "
                       "labelled_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", answers)
        db.executemany("INSERT INTO labels (key1, key2, answer_id, is_duplicate, bucket) VALUES (?, ?, ?, ?, ?)",
                       labels)
    db.execute("COMMIT")
    db.close()


def summary(name: str, ms: list[float]) -> str:
    values = np.array(ms)
    return (f"{name}: median {np.median(values):.1f} ms, p99 {np.percentile(values, 99):.1f} ms, "
            f"max {values.max():.1f} ms ({len(values):,} timed)")


# ---- a page run, in a fresh process --------------------------------------------------------------------------
def page_runs(path: Path, runs: int) -> dict:
    from core.inference.candidates import EmbeddedCorpus
    from core.training import active_rounds

    store = LabelStore(path)
    questions = corpus_questions()
    vectors = np.random.default_rng(0).normal(size=(CORPUS, 32)).astype(np.float32)
    corpus = EmbeddedCorpus(questions, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    corpus.neighbours(10)  # searched once per model and kept with the corpus, as the page keeps it
    watched = [made_up_pair(i, questions) for i in range(0, 40, 2)]  # this session's last 20 answers
    skipped = {pair_key(*made_up_pair(i, questions)) for i in (1, 3)} | {("never", "labelled")}
    own = {"model_type": "lstm", "thresholds": {"accuracy": 0.1}}
    zero_shot = {"model_type": "minilm", "zero_shot": True}
    round_keys: list = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # imports, the corpus and its neighbours

    def run(new_round: dict | None) -> None:
        nonlocal round_keys
        shares = active_rounds.share_counts(store)  # the count line and the retrain blocker
        active_rounds.retrain_problem(shares)
        for question1, question2 in watched:  # show_notices
            store.label_of(question1, question2)
        if new_round is not None:  # pending_pair when the round is all answered
            threshold = active_rounds.labelled_threshold(new_round, corpus, store).threshold
            given = len(store)
            done = given + len(skipped - store.labelled_among(skipped))
            chosen = active_rounds.next_round(corpus, threshold, skipped, ROUND_SIZE, seed=given + done,
                                              labels=store)
            round_keys = pair_keys(chosen["question1"], chosen["question2"])
        store.labelled_among(round_keys)  # pending_pair
        store.labelled_among(round_keys)  # round_progress
        store.recent(1, labelled_by=PAGE_SESSION)  # can_undo
        store.recent(5)  # show_recent

    timed = {}
    for name, config in (("first run (opens the connection; a new round, own threshold)", own),
                         ("kept round", None), ("new round, a model with its own threshold", own),
                         ("new round, zero-shot MiniLM (the corpus pairs' labels read for its threshold)", zero_shot)):
        times = []
        for _ in range(1 if name.startswith("first") else runs if config is None else max(3, runs // 5)):
            started = time.perf_counter()
            run(config)
            times.append((time.perf_counter() - started) * 1000)
        timed[name] = times
    return {"times": timed, "rss_before_mib": before, "labels": len(store),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# ---- suggest in a capped address space -------------------------------------------------------------------------
def tiny_lstm(folder: Path) -> Path:
    existing = sorted(folder.glob("*/config.json"))
    if existing:
        return existing[0].parent
    from core.data import load_pairs
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    pairs, _ = load_pairs(ROOT / "assets" / "sample_pairs.csv")
    spec = spec_from_options(model="lstm", loss="triplet", epochs=1, batch_size=32, device="cpu", max_length=16,
                             model_options=dict(embedding_dim=12, hidden_size=10, num_layers=1),
                             data_name="bundled sample", split_by="pair")
    return train_run(spec, pairs, runs_root=folder).folder


def capped() -> None:
    limit = ADDRESS_SPACE_KIB * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def suggest(model: str, questions: Path, labels: Path, out: Path, cache: Path) -> dict:
    command = [sys.executable, "-m", "core", "suggest", "--model", model, "--questions", str(questions),
               "--labels", str(labels), "--n", "20", "--out", str(out), "--overwrite"]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(command, cwd=ROOT, stdout=stdout, stderr=stderr, preexec_fn=capped,
                                 env={**os.environ, "SIAMESE_LAB_CACHE": str(cache), "OMP_WAIT_POLICY": "PASSIVE"})
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak memory
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        printed, said = stdout.read(), stderr.read()
    result = {"exit": child.returncode, "seconds": round(time.perf_counter() - started, 1),
              "peak_rss_mib": round(usage.ru_maxrss / 1024)}
    if child.returncode == 0:
        answer = json.loads(printed)
        result.update({key: answer[key] for key in ("labelled", "candidates", "suggested", "threshold_source")})
    else:
        result["stderr_tail"] = said.strip().splitlines()[-3:]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=2_000_000, help="labels in the database before timing")
    parser.add_argument("--adds", type=int, default=1000, help="new answers timed (and as many corrections)")
    parser.add_argument("--runs", type=int, default=20, help="page runs timed on a kept round")
    parser.add_argument("--folder", default=None, help="where the database is written (removed after)")
    parser.add_argument("--keep", action="store_true", help="keep the folder (a later run with --folder reuses it)")
    parser.add_argument("--fill-only", action="store_true", help="write the database, time nothing (with --keep)")
    parser.add_argument("--page-runs", default=None, help=argparse.SUPPRESS)  # the child process's part
    args = parser.parse_args()
    if args.page_runs:
        print(json.dumps(page_runs(Path(args.page_runs), args.runs)))
        return
    parent = Path(args.folder) if args.folder else ROOT / "runs"
    parent.mkdir(parents=True, exist_ok=True)
    folder = parent if args.folder and args.keep else Path(tempfile.mkdtemp(prefix=".bench-labels-", dir=parent))
    try:
        path = folder / "labels.sqlite3"
        questions = folder / "corpus.txt"
        questions.write_text("\n".join(corpus_questions()) + "\n", encoding="utf-8")
        if not path.exists() or len(LabelStore(path)) < args.labels:
            path.unlink(missing_ok=True)
            started = time.perf_counter()
            fill(path, args.labels, corpus_questions())
            print(f"{args.labels:,} labels written in {time.perf_counter() - started:.0f} s "
                  f"({path.stat().st_size / 2**20:,.0f} MiB)", flush=True)
        if args.fill_only:
            return
        child = subprocess.run([sys.executable, __file__, "--page-runs", str(path), "--runs", str(args.runs)],
                               capture_output=True, text=True, check=True)
        page = json.loads(child.stdout)
        print(f"a Label page run's reads with {page['labels']:,} labels (that process's peak memory: "
              f"{page['rss_before_mib']:.0f} MiB before the runs, imports and corpus; {page['peak_rss_mib']:.0f} MiB "
              "after them):")
        for name, times in page["times"].items():
            print("  " + summary(name, times))
        store = LabelStore(path)
        adds, corrections = [], []
        for i in range(args.adds):
            started = time.perf_counter()
            replaced = store.add(f"New question number {i} about something?", f"Its pair {i}?", i % 2, "bench")
            adds.append((time.perf_counter() - started) * 1000)
            assert replaced is None
            started = time.perf_counter()
            replaced = store.add(*made_up_pair(CORPUS + i, []), 1 - i % 2, "bench")
            corrections.append((time.perf_counter() - started) * 1000)
            assert replaced is not None
        print(summary(f"saving a new answer with {args.labels:,}+ labels", adds))
        print(summary("saving a correction", corrections))
        for i in range(args.adds):  # the database as it was, for a later run with --keep
            store.undo_last("bench")
            store.undo_last("bench")
        cache = Path(tempfile.mkdtemp(prefix=".bench-cache-", dir=folder))
        for model in (str(tiny_lstm(folder / "models")), "minilm"):
            result = suggest(model, questions, path, folder / "suggested.csv", cache)
            print(f"suggest --labels under ulimit -v {ADDRESS_SPACE_KIB:,} ({Path(model).name}): {json.dumps(result)}",
                  flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
