"""The lab on data that is not Quora: what a user with their own labelled pairs gets, through the CLI.

For each dataset of ``bench/own_data_sets.py`` (official train / dev / test files, the dataset's own column
names and text labels, so ``--columns`` and ``--label-map`` are exercised), on its TEST file:

- TF-IDF cosine (``evaluate --model tfidf``; scikit-learn in this process, fitted on the train file and
  calibrated on the dev file, when this checkout's CLI has no TF-IDF model);
- zero-shot MiniLM at the lab's fixed threshold (``evaluate --model minilm``) and at a threshold calibrated
  on the dev file (``evaluate --model minilm --calibrate-on DEV``);
- each preset (``train --data TRAIN --val DEV --test TEST --preset P --max-minutes M``): the test metrics
  the training JSON reports, its training seconds, and the lab's own verdict against zero-shot MiniLM on
  the validation pairs (``quality.verdicts.zero_shot``);
- beside the lab's verdict, the test's: the run's and zero-shot MiniLM's similarities of every test pair
  (``score``), compared by ``core.inference.metrics.paired_verdict`` (seed 0), resampling groups of
  pairs that share a question.

Every figure comes from a subprocess running ``python -m core ...`` as a user would; a figure the CLI does
not print yet (an interval, a test split) is computed here from the scores ``score`` wrote, and the row
says so (``*_source``: "cli" or "bench"). ROC AUC, accuracy and F1 carry 95 % bootstrap intervals.
Rows are printed as a table per dataset and written to ``bench/out/own_data.json`` after every row.

    .venv/bin/python bench/own_data.py                       # both datasets, every preset (about 30 min each)
    .venv/bin/python bench/own_data.py --datasets sick --presets sample-demo
    .venv/bin/python bench/own_data.py --max-rows 200 --max-steps 3 --presets sample-demo   # smoke run

A checkout whose CLI lacks an option this needs (``train --val/--test``, ``--label-map``, ``evaluate
--calibrate-on``) gets an error row naming it; ``--allow-missing`` instead runs without the option and notes
what changed (``train`` then validates on its own split of TRAIN), and ``--binary-labels`` writes the
rule's 0/1 labels so no ``--label-map`` is needed: both are for smoke runs only.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.own_data_sets import SETS, counts, describe, prepare  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
RESULT = OUT / "own_data.json"
RUNS = OUT / "runs"  # one trained model folder per dataset x preset, replaced by the next run
WORK = OUT / "own_data"  # score files and subprocess logs
DEFAULT_PRESETS = ("sample-demo", "minilm-quora", "lstm-quora", "auto", "augmented")
# Recipes that are a model's defaults rather than a preset: trained as a user picking the model gets them.
RECIPES = {"cross-encoder": ["--model", "cross-encoder"],
           # MiniLM on the in-batch softmax with the labelled non-duplicates as hard negatives, four epochs
           "minilm-softmax-hard": ["--model", "minilm", "--loss", "softmax", "--hard-negatives", "--epochs", "4",
                                   "--lr", "2e-5", "--batch-size", "16", "--max-length", "128", "--patience", "0"]}
SEED = 0
GIANT_GROUP_SHARE = 0.5  # a group of pairs holding more than this share of them: resample single pairs instead


class Missing(Exception):
    """This checkout's CLI lacks an option (or a model) the benchmark needs."""


# ---- the CLI as a subprocess ----------------------------------------------------------------------
@dataclass
class Call:
    argv: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def problem(self) -> str:
        """The last lines of stderr (the CLI's one-line error, or a traceback's end)."""
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return " | ".join(lines[-3:]) if lines else f"exit status {self.returncode}"


def cli(argv: list[str], log_name: str, timeout: float, threads: int) -> Call:
    """``python -m core ARGV`` in the repository root; its stdout and stderr are also kept under WORK/logs."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as bench/common.py: spin-waiting on a shared 2-core machine
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "core", *argv], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=timeout)
        call = Call(argv, done.returncode, done.stdout, done.stderr, time.perf_counter() - started)
    except subprocess.TimeoutExpired as expired:
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
        call = Call(argv, 124, text(expired.stdout), text(expired.stderr) + f"\ntimed out after {timeout:.0f} s",
                    time.perf_counter() - started)
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{log_name}.txt").write_text(f"$ python -m core {' '.join(argv)}\n# exit {call.returncode}, "
                                          f"{call.seconds:.1f} s\n--- stdout\n{call.stdout}\n--- stderr\n{call.stderr}")
    return call


_HELP: dict[str, str] = {}


def help_text(command: str) -> str:
    """``python -m core COMMAND --help``'s text; a RuntimeError (not cached) when the CLI does not start."""
    if command not in _HELP:
        done = subprocess.run([sys.executable, "-m", "core", command, "--help"], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0 or not done.stdout.strip():
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise RuntimeError(f"`python -m core {command} --help` failed: "
                               + (lines[-1] if lines else f"exit {done.returncode}"))
        _HELP[command] = done.stdout
    return _HELP[command]


def supports(command: str, option: str) -> bool:
    """Whether ``python -m core COMMAND --help`` lists ``option`` (e.g. "--label-map")."""
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text(command)) is not None


def last_json(stdout: str):
    """The last JSON object in a command's stdout (the CLI prints one, possibly indented), or None."""
    decoder, found = json.JSONDecoder(), None
    for match in re.finditer(r"^\{", stdout, flags=re.MULTILINE):
        try:
            found, _ = decoder.raw_decode(stdout[match.start():])
        except ValueError:
            continue
    return found


# ---- reading what the CLI printed: kept in one place, to adjust as the CLI's JSON settles ---------------
METRICS = ("roc_auc", "accuracy", "f1")


def parse_metrics(block) -> dict:
    """``{"roc_auc", "accuracy", "f1", "threshold", "n", "intervals": {metric: [lo, hi]}}`` from a metrics dict
    of the CLI (``evaluate``'s output, or ``train``'s "validation"/"test"); missing values are None, and
    intervals are read from "intervals" or from "<metric>_interval"."""
    block = block if isinstance(block, dict) else {}
    number = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
    raw = block.get("intervals") if isinstance(block.get("intervals"), dict) else {}
    intervals = {}
    for name in METRICS:
        pair = raw.get(name, block.get(f"{name}_interval"))
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(number(v) is not None for v in pair):
            intervals[name] = [float(pair[0]), float(pair[1])]
    n = number(block.get("n", block.get("pairs")))
    return {**{name: number(block.get(name)) for name in METRICS}, "threshold": number(block.get("threshold")),
            "n": int(n) if n is not None else None, "intervals": intervals}


def parse_verdict(entry) -> dict | None:
    """``{"verdict", "difference", "interval", "pairs"}`` from a recorded verdict, or None when absent. Accepts
    the entry itself or a baseline entry that carries it under "verdict" (``quality.baselines``' form)."""
    if isinstance(entry, dict) and isinstance(entry.get("verdict"), dict):
        entry = entry["verdict"]
    if not isinstance(entry, dict) or not isinstance(entry.get("verdict"), str):
        return None
    interval = entry.get("interval")
    return {"verdict": entry["verdict"], "difference": entry.get("difference"),
            "interval": list(interval) if isinstance(interval, (list, tuple)) else None, "pairs": entry.get("pairs")}


def parse_train(payload) -> dict:
    """What a row needs from ``train``'s JSON: status, folder, seconds, threshold, validation and test metrics,
    and the lab's verdicts against zero-shot MiniLM and TF-IDF (``quality.verdicts``, else the verdicts under
    ``quality.baselines``)."""
    payload = payload if isinstance(payload, dict) else {}
    quality = payload.get("quality") if isinstance(payload.get("quality"), dict) else {}
    verdicts = quality.get("verdicts") if isinstance(quality.get("verdicts"), dict) else {}
    baselines = quality.get("baselines") if isinstance(quality.get("baselines"), dict) else {}
    thresholds = payload.get("thresholds") if isinstance(payload.get("thresholds"), dict) else {}
    test = parse_metrics(payload.get("test"))
    threshold = test["threshold"] if test["threshold"] is not None else thresholds.get("accuracy")
    return {"status": payload.get("status"), "folder": payload.get("folder"), "seconds": payload.get("seconds"),
            "threshold": threshold, "validation": parse_metrics(payload.get("validation")),
            "test": test if payload.get("test") is not None else None,
            "lab_verdict_zero_shot": parse_verdict(verdicts.get("zero_shot") or baselines.get("zero_shot")),
            "lab_verdict_tfidf": parse_verdict(verdicts.get("tfidf") or baselines.get("tfidf")),
            "quality_message": quality.get("message"),
            # auto's choice (core.training.auto_choice): every candidate with its validation figure, verdict and time
            "chosen": payload.get("chosen"), "candidates": payload.get("candidates"),
            # the augmented recipe's teacher and silver pairs (core.training.distillation); its "seconds" are the
            # bi-encoder's alone: the row's wall_seconds hold the whole chain
            "augmented": payload.get("augmented")}


# ---- scores and figures computed here -------------------------------------------------------------
@dataclass
class Scored:
    """A model's similarity of every pair of one file, as ``score`` wrote them, with the rule's labels."""

    labels: np.ndarray  # (n,) 0/1
    scores: np.ndarray  # (n,) float, NaN where ``score`` left a pair unscored
    groups: np.ndarray  # (n,) id of the group of pairs sharing a question
    frame: pd.DataFrame


def read_scores(path: Path, dataset, binary_labels: bool) -> Scored:
    from core.data.splitting import question_groups

    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    raw = frame[dataset.label]
    labels = raw.astype(int).to_numpy() if binary_labels else np.array([dataset.binary(v) for v in raw], dtype=float)
    if np.isnan(labels.astype(float)).any():
        raise ValueError(f"{path.name}: a label outside the rule ({dataset.rule})")
    scores = pd.to_numeric(frame["similarity"], errors="coerce").to_numpy(dtype=float)
    if dataset.group_column:  # the dataset's own unit of dependent pairs
        groups = pd.factorize(frame[dataset.group_column])[0]
    else:
        pairs = pd.DataFrame({"question1": frame[dataset.question1], "question2": frame[dataset.question2]})
        groups = question_groups(pairs)
    return Scored(labels.astype(int), scores, groups, frame)


def resampling_groups(groups: np.ndarray, dataset) -> tuple[np.ndarray | None, str]:
    """The groups to resample (None: single pairs) and how, in words: whole groups of dependent pairs (the
    dataset's ``group_column``, else pairs linked by a shared question), unless one group holds most of the
    pairs (then the bootstrap would have almost nothing to draw)."""
    sizes = np.bincount(groups)
    unit = f"{dataset.group_column} groups" if dataset.group_column else "groups of pairs sharing a question"
    if sizes.max() > GIANT_GROUP_SHARE * len(groups):
        return None, f"single pairs (one of the {unit} holds {sizes.max():,} of {len(groups):,} pairs)"
    return groups, f"{len(sizes):,} {unit} (largest {sizes.max():,} pairs)"


def bench_metrics(scored: Scored, threshold: float, groups) -> dict:
    """``parse_metrics``' form, computed here from the scores at ``threshold`` (the scored pairs only)."""
    from core.inference.metrics import evaluate_scores
    from core.inference.metrics import metric_intervals

    keep = ~np.isnan(scored.scores)
    labels, scores = scored.labels[keep], scored.scores[keep]
    m = evaluate_scores(labels, scores, threshold)
    intervals = metric_intervals(labels, scores, threshold, groups=None if groups is None else groups[keep], seed=SEED)
    return {"roc_auc": m["roc_auc"], "accuracy": m["accuracy"], "f1": m["f1"], "threshold": float(threshold),
            "n": int(keep.sum()), "intervals": {k: list(v) for k, v in intervals.items()}}


def with_intervals(metrics: dict, scored: Scored | None, groups) -> tuple[dict, str]:
    """The CLI's metrics, with the intervals computed here from ``scored`` at the CLI's threshold where the CLI
    printed none; and where they came from ("cli" or "bench")."""
    if metrics["intervals"] or scored is None or metrics["threshold"] is None:
        return metrics, "cli"
    return {**metrics, "intervals": bench_metrics(scored, metrics["threshold"], groups)["intervals"]}, "bench"


def test_verdict(run: Scored, zero_shot: Scored, groups) -> dict | None:
    """The run against zero-shot MiniLM on the test pairs both scored: ``paired_verdict``'s dict, or
    ``{"error": ...}`` while ``core.inference.metrics.paired_verdict`` is not there."""
    if len(run.labels) != len(zero_shot.labels) or not np.array_equal(run.labels, zero_shot.labels):
        return {"error": "the two score files do not hold the same pairs in the same order"}
    try:
        from core.inference.metrics import paired_verdict
    except ImportError as error:
        return {"error": f"paired_verdict unavailable: {error}"}
    keep = ~(np.isnan(run.scores) | np.isnan(zero_shot.scores))
    result = paired_verdict(run.labels[keep], run.scores[keep], zero_shot.scores[keep],
                            groups=None if groups is None else groups[keep], seed=SEED)
    if result is None:
        return None
    return {"verdict": result.verdict, "difference": result.difference, "interval": list(result.interval),
            "pairs": result.pairs}


# ---- one dataset ----------------------------------------------------------------------------------
class Bench:
    def __init__(self, args, save):
        self.args, self.save = args, save

    def data_options(self, command: str, dataset) -> tuple[list[str], list[str]]:
        """``--columns`` and ``--label-map`` for ``command``, and notes on what was left out."""
        options = ["--columns", dataset.columns]
        if self.args.binary_labels:
            return options, ["labels written as the rule's 0/1 (--binary-labels): no --label-map"]
        if not supports(command, "--label-map"):
            raise Missing(f"`{command}` has no --label-map (this dataset's labels are words: --binary-labels "
                          "runs without it)")
        return options + ["--label-map", dataset.label_map], []

    def need(self, command: str, option: str, notes: list[str], what_changes: str) -> bool:
        """True when ``command`` has ``option``; else raise Missing, or with --allow-missing note it and go on."""
        if supports(command, option):
            return True
        if not self.args.allow_missing:
            raise Missing(f"`{command}` has no {option}")
        notes.append(f"`{command}` has no {option}: {what_changes}")
        return False

    def timeout(self, training: bool) -> float:
        return ((self.args.max_minutes or 30) * 60 * 1.5 if training else 0) + self.args.call_timeout

    def score(self, name: str, model: str, path: Path, dataset, log: str) -> Scored:
        out = WORK / "scores" / name / f"{log}.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
        options, _ = self.data_options("score", dataset)
        call = cli(["score", "--model", model, "--pairs", str(path), "--out", str(out), "--overwrite", *options],
                   f"{name}-score-{log}", self.timeout(False), self.args.threads)
        if not call.ok:
            raise RuntimeError(f"score --model {model}: {call.problem()}")
        return read_scores(out, dataset, self.args.binary_labels)

    def run_dataset(self, name: str) -> dict:
        dataset = SETS[name]
        paths = prepare(name, self.args.max_rows, self.args.binary_labels)
        entry = {**describe(name), "files": {k: str(v.relative_to(REPO)) for k, v in paths.items()},
                 "counts": counts(name, paths), "rows": [], "started": time.strftime("%H:%M:%S")}
        self.save(name, entry)
        started = time.perf_counter()
        print(f"\n## {name}: {dataset.title}\n"
              + ", ".join(f"{s} {c['pairs']:,} pairs ({c['positive']:,} positive)" for s, c in entry["counts"].items()),
              flush=True)

        zero_shot, groups = None, None
        try:
            zero_shot = self.score(name, "minilm", paths["test"], dataset, "zero-shot-test")
            groups, how = resampling_groups(zero_shot.groups, dataset)
            entry["resampled"] = how
            print(f"bootstrap resamples {how}", flush=True)
        except (RuntimeError, Missing, ValueError) as error:
            entry["zero_shot_scores_error"] = str(error)
            print(f"zero-shot scores of the test pairs: {error}", flush=True)

        for row_fn in (self.tfidf_row, self.zero_shot_row, self.calibrated_row):
            self.add(entry, name, row_fn(name, dataset, paths, zero_shot, groups))
        for preset in self.args.presets:
            self.add(entry, name, self.preset_row(name, dataset, paths, preset, zero_shot, groups))
        entry["seconds"] = round(time.perf_counter() - started, 1)
        self.save(name, entry)
        print(f"[{name}: {entry['seconds'] / 60:.1f} min]", flush=True)
        return entry

    def add(self, entry: dict, name: str, row: dict) -> None:
        entry["rows"].append(row)
        self.save(name, entry)
        print(table([row], header=not entry.get("printed_header")), flush=True)
        entry["printed_header"] = True

    # -- the rows --
    def evaluate_row(self, label: str, name: str, dataset, argv: list[str], log: str, scored: Scored | None,
                     groups, notes: list[str]) -> dict:
        row = {"name": label, "kind": "baseline", "notes": notes}
        options, more = self.data_options("evaluate", dataset)
        notes.extend(more)
        call = cli(["evaluate", *argv, *options], f"{name}-{log}", self.timeout(False), self.args.threads)
        row["command"] = "python -m core evaluate " + " ".join(argv)
        if not call.ok:
            return {**row, "error": call.problem()}
        metrics, source = with_intervals(parse_metrics(last_json(call.stdout)), scored, groups)
        return {**row, "test": metrics, "test_source": "cli", "intervals_source": source,
                "seconds": round(call.seconds, 1)}

    def tfidf_row(self, name, dataset, paths, zero_shot, groups) -> dict:
        label, notes = "TF-IDF cosine", []
        try:
            if "tfidf" in help_text("evaluate"):
                argv = ["--model", "tfidf", "--data", str(paths["test"])]
                if supports("evaluate", "--calibrate-on"):
                    argv += ["--calibrate-on", str(paths["val"])]
                row = self.evaluate_row(label, name, dataset, argv, "tfidf", None, groups, notes)
                if "error" not in row:
                    return row
                notes.append(f"evaluate --model tfidf failed ({row['error']}): computed here instead")
            else:
                notes.append("`evaluate` has no tfidf model: computed here (fit on train, calibrated on dev)")
            return {"name": label, "kind": "baseline", "notes": notes,
                    **self.tfidf_here(dataset, paths, zero_shot, groups)}
        except (Missing, RuntimeError) as error:
            return {"name": label, "kind": "baseline", "error": str(error), "notes": notes}

    def tfidf_here(self, dataset, paths, zero_shot, groups) -> dict:
        """scikit-learn TF-IDF as the lab's baseline does it (core.inference.tfidf_scorer.TfidfScorer): fitted on
        the train file's questions, threshold of best accuracy on the dev file."""
        from core.inference.tfidf_scorer import TfidfScorer
        from core.inference.metrics import best_thresholds

        def frame(split):
            f = pd.read_csv(paths[split], sep="\t" if paths[split].suffix == ".tsv" else ",", dtype=str,
                            keep_default_na=False)
            labels = f[dataset.label].astype(int) if self.args.binary_labels else f[dataset.label].map(dataset.binary)
            return f[dataset.question1].tolist(), f[dataset.question2].tolist(), labels.to_numpy(dtype=int)

        train_q1, train_q2, _ = frame("train")
        fit = TfidfScorer.fit(train_q1 + train_q2)
        val_q1, val_q2, val_labels = frame("val")
        threshold = best_thresholds(val_labels, fit.score_pairs(val_q1, val_q2))["accuracy"]
        test_q1, test_q2, test_labels = frame("test")
        scores = fit.score_pairs(test_q1, test_q2)
        scored = Scored(test_labels, scores, groups if groups is not None else np.arange(len(scores)), pd.DataFrame())
        row = {"test": bench_metrics(scored, threshold, groups), "test_source": "bench", "intervals_source": "bench"}
        if zero_shot is not None and len(zero_shot.labels) == len(test_labels):
            row["test_verdict_zero_shot"] = test_verdict(scored, zero_shot, groups)
        return row

    def zero_shot_row(self, name, dataset, paths, zero_shot, groups) -> dict:
        try:
            return self.evaluate_row("MiniLM zero-shot, fixed threshold", name, dataset,
                                     ["--model", "minilm", "--data", str(paths["test"])], "zero-shot-fixed",
                                     zero_shot, groups, [])
        except (Missing, RuntimeError) as error:
            return {"name": "MiniLM zero-shot, fixed threshold", "kind": "baseline", "error": str(error)}

    def calibrated_row(self, name, dataset, paths, zero_shot, groups) -> dict:
        label, notes = "MiniLM zero-shot, calibrated on dev", []
        try:
            if self.need("evaluate", "--calibrate-on", notes, "threshold of best accuracy on the dev file's "
                                                               "zero-shot scores, computed here"):
                return self.evaluate_row(label, name, dataset, ["--model", "minilm", "--data", str(paths["test"]),
                                                                "--calibrate-on", str(paths["val"])],
                                         "zero-shot-calibrated", zero_shot, groups, notes)
            from core.inference.metrics import best_thresholds

            dev = self.score(name, "minilm", paths["val"], dataset, "zero-shot-dev")
            keep = ~np.isnan(dev.scores)
            threshold = best_thresholds(dev.labels[keep], dev.scores[keep])["accuracy"]
            if zero_shot is None:
                raise RuntimeError("no zero-shot scores of the test pairs")
            return {"name": label, "kind": "baseline", "notes": notes,
                    "test": bench_metrics(zero_shot, threshold, groups), "test_source": "bench",
                    "intervals_source": "bench"}
        except (Missing, RuntimeError) as error:
            return {"name": label, "kind": "baseline", "error": str(error), "notes": notes}

    def preset_row(self, name, dataset, paths, preset, zero_shot, groups) -> dict:
        row = {"name": f"preset {preset}", "kind": "preset", "preset": preset, "notes": []}
        notes = row["notes"]
        folder = RUNS / f"{name}-{preset}"
        try:
            options, more = self.data_options("train", dataset)
            notes.extend(more)
            argv = ["train", "--data", str(paths["train"])]
            if self.need("train", "--val", notes, "the lab validates on its own split of the train file"):
                argv += ["--val", str(paths["val"])]
            if self.need("train", "--test", notes, "test metrics computed here from `score`'s similarities"):
                argv += ["--test", str(paths["test"])]
            argv += [*RECIPES.get(preset, ["--preset", preset]), "--out", str(folder), "--overwrite"]
            if self.args.max_minutes:  # by default each recipe keeps its own time cap, as a user gets it
                argv += ["--max-minutes", f"{self.args.max_minutes:g}"]
            if self.args.max_steps:
                argv += ["--max-steps", str(self.args.max_steps)]
            argv += options
        except (Missing, RuntimeError) as error:
            return {**row, "error": str(error)}
        row["command"] = "python -m core " + " ".join(argv)
        print(f"  training {preset} ...", flush=True)
        call = cli(argv, f"{name}-train-{preset}", self.timeout(True), self.args.threads)
        row["wall_seconds"] = round(call.seconds, 1)
        payload = last_json(call.stdout)
        if payload is None:
            return {**row, "error": call.problem()}
        parsed = parse_train(payload)
        row.update(status=parsed["status"], train_seconds=parsed["seconds"], validation=parsed["validation"],
                   lab_verdict_zero_shot=parsed["lab_verdict_zero_shot"], lab_verdict_tfidf=parsed["lab_verdict_tfidf"],
                   quality_message=parsed["quality_message"])
        if parsed["candidates"]:
            row.update(chosen=parsed["chosen"], candidates=parsed["candidates"])
        if parsed["augmented"]:
            row["augmented"] = parsed["augmented"]
        if not call.ok:
            row["error"] = call.problem()
        model = parsed["folder"] or (str(folder) if (folder / "config.json").is_file() else None)
        if model is None:
            row.setdefault("error", "the run saved no model folder")
            return row
        try:
            scored = self.score(name, model, paths["test"], dataset, f"preset-{preset}-test")
        except (RuntimeError, Missing, ValueError) as error:
            row["scores_error"] = str(error)
            scored = None
        if parsed["test"] is not None:
            row["test"], row["test_source"] = with_intervals(parsed["test"], scored, groups)[0], "cli"
            row["intervals_source"] = "cli" if parsed["test"]["intervals"] else "bench"
        elif scored is not None and parsed["threshold"] is not None:
            row["test"], row["test_source"], row["intervals_source"] = (
                bench_metrics(scored, parsed["threshold"], groups), "bench", "bench")
        if scored is not None:  # a check of the CLI's figures, from the same model's scores of the same file
            keep = ~np.isnan(scored.scores)
            from core.inference.metrics import ranking_metrics

            row["rescored_roc_auc"] = ranking_metrics(scored.labels[keep], scored.scores[keep])["roc_auc"]
            if zero_shot is not None:
                row["test_verdict_zero_shot"] = test_verdict(scored, zero_shot, groups)
        return row


# ---- output ---------------------------------------------------------------------------------------
def _figure(metrics: dict | None, name: str) -> str:
    if not metrics or metrics.get(name) is None:
        return "-"
    interval = metrics.get("intervals", {}).get(name)
    return f"{metrics[name]:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def _verdict(v) -> str:
    if not v:
        return "-"
    if "error" in v:
        return f"({v['error']})"
    interval = v.get("interval") or [float("nan")] * 2
    difference = v.get("difference")
    return (f"{v['verdict']} ({difference:+.3f} [{interval[0]:+.3f}, {interval[1]:+.3f}], n={v.get('pairs')})"
            if isinstance(difference, (int, float)) else str(v["verdict"]))


def table(rows: list[dict], header: bool = True) -> str:
    lines = ["| model | test ROC AUC [95 %] | accuracy [95 %] | F1 [95 %] | threshold | train s | "
             "lab: vs zero-shot (validation) | test: vs zero-shot |", "|" + "---|" * 8] if header else []
    for r in rows:
        if "test" not in r and "error" in r:
            lines.append(f"| {r['name']} | error: {r['error']} |" + " |" * 6)
            continue
        test = r.get("test") or {}
        threshold = f"{test['threshold']:.3f}" if test.get("threshold") is not None else "-"
        seconds = r.get("train_seconds")
        lines.append(f"| {r['name']} | {_figure(test, 'roc_auc')} | {_figure(test, 'accuracy')} | "
                     f"{_figure(test, 'f1')} | "
                     f"{threshold} | {f'{seconds:.0f}' if isinstance(seconds, (int, float)) else '-'} | "
                     f"{_verdict(r.get('lab_verdict_zero_shot'))} | {_verdict(r.get('test_verdict_zero_shot'))} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default=",".join(SETS), help=f"comma-separated: {', '.join(SETS)}")
    p.add_argument("--presets", default=",".join(DEFAULT_PRESETS),
                   help=f"comma-separated presets (or {', '.join(RECIPES)}) to train ('' for the baselines only)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="a time cap for every training, passed as train --max-minutes (default: each recipe's own)")
    p.add_argument("--max-rows", type=int, default=None, help="smoke runs: a seeded sample of N pairs of each split")
    p.add_argument("--max-steps", type=int, default=None, help="smoke runs: passed as train --max-steps")
    p.add_argument("--threads", type=int, default=2, help="OMP/MKL threads of each subprocess")
    p.add_argument("--call-timeout", type=float, default=1800,
                   help="seconds a command may take beyond its training cap before it is stopped")
    p.add_argument("--allow-missing", action="store_true",
                   help="smoke runs: go on without CLI options this checkout lacks, noting what changed")
    p.add_argument("--binary-labels", action="store_true",
                   help="smoke runs: files with the rule's 0/1 labels, so no --label-map is needed")
    p.add_argument("--out", type=Path, default=RESULT, help="the JSON written after every row")
    args = p.parse_args()
    args.presets = [x for x in args.presets.split(",") if x]
    names = [n for n in args.datasets.split(",") if n]
    unknown = [n for n in names if n not in SETS]
    if unknown:
        sys.exit(f"unknown dataset(s) {', '.join(unknown)}; expected {', '.join(SETS)}")
    load = os.getloadavg()
    print(f"# own data -- {date.today()} -- datasets {', '.join(names)} -- presets {', '.join(args.presets) or 'none'} "
          f"-- {args.max_minutes or 'recipe'} min cap per training -- {args.threads} threads -- cpus={os.cpu_count()} -- "
          f"load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
          + (f" -- SMOKE: {args.max_rows} rows" if args.max_rows else ""),
          flush=True)
    document = {"date": str(date.today()), "argv": sys.argv[1:], "cpus": os.cpu_count(), "load_avg": list(load),
                "settings": {"presets": args.presets, "max_minutes": args.max_minutes, "max_rows": args.max_rows,
                             "max_steps": args.max_steps, "threads": args.threads, "allow_missing": args.allow_missing,
                             "binary_labels": args.binary_labels, "seed": SEED},
                "datasets": {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(name: str, entry: dict) -> None:
        document["datasets"][name] = {k: v for k, v in entry.items() if k != "printed_header"}
        temporary = args.out.with_name(args.out.name + ".tmp")
        temporary.write_text(json.dumps(document, indent=2, default=str))
        temporary.replace(args.out)

    bench = Bench(args, save)
    for name in names:
        bench.run_dataset(name)
    print(f"\nrows written to {args.out}")


if __name__ == "__main__":
    main()
