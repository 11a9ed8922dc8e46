"""Real-data quality on Quora pairs: every model x loss, baselines, and the peer, on one held-out set.

Protocol (issue 4):
- a random 10 % of the shared pairs is the held-out TEST split (seed 2026), never trained or tuned on;
  it is scored on a fixed random sample of ``--test-pairs`` of those pairs (all of them with 0);
- 5 % more is the VALIDATION split: early stopping and the calibrated threshold (best accuracy);
- the rest is training data (each run may use only the first ``train_rows`` of it);
- "unseen" = test pairs whose two questions occur nowhere in the training split.

Prints one markdown table (ROC AUC, AP, accuracy, F1, unseen ROC AUC, training time, pairs/s) and
writes the same rows as JSON to bench/out/, each trained row with its validation curve
(``validation_curve``: step, train_seconds, roc_auc per validation; ``--validate-every N`` validates
every N steps too, so a one-epoch run gives a curve; ``bench/plot_curves.py`` draws them).
``--quick`` runs every combination on small slices in a few minutes; the default budgets are the
ones in docs/BENCHMARKS.md.

    .venv/bin/python bench/quality.py --quick
    .venv/bin/python bench/quality.py --only lstm-quora,minilm-quora --peer
    .venv/bin/python bench/quality.py --only lstm-quora,minilm-quora --validate-every 250
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import data_path  # noqa: E402
from core.data import Splits, load_pairs, normalise_questions, split_pairs  # noqa: E402
from core.inference.analysis import SEEN_NEITHER, seen_in_training  # noqa: E402
from core.data.splitting import implied_pairs  # noqa: E402
from core.inference.metrics import evaluate_scores, ranking_metrics  # noqa: E402
from core.models import load_model  # noqa: E402
from core.training.pipeline import train_run, validation_curve  # noqa: E402
from core.training.presets import PRESETS  # noqa: E402
from core.training.specs import RunSpec, spec_from_options  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
LOSSES = {  # label -> (loss options of core.training.specs.spec_from_options, hard negatives)
    "triplet+hn": ({"loss": "triplet"}, True),
    "contrastive": ({"loss": "contrastive", "form": "squared_hinge"}, False),
    "contrastive-m2": ({"loss": "contrastive", "form": "margin_squared"}, False),
    "softmax+hn": ({"loss": "softmax"}, True),
    "cosent": ({"loss": "cosent"}, False),
    "multitask": ({"loss": "multitask"}, False),
}
# Levers (issue 14), item "model/loss:variant": a key of the budget (rows, epochs, lr, max_length, ...)
# replaces the budget's value; any other key is merged over the budget's model options.
VARIANTS = {
    "max-pool": {"pooling": "max"},
    "mean+max": {"pooling": "mean+max"},
    "wordpiece": {"tokens": "wordpiece"},
    "wordpiece-minilm": {"tokens": "wordpiece", "init_embeddings": "minilm"},
    "words-minilm": {"init_embeddings": "minilm"},
    # Issue 14, third round: the LSTM's size and its embedding table, each on top of wordpiece-minilm.
    "wpm-frozen": {"tokens": "wordpiece", "init_embeddings": "minilm", "freeze_embeddings": True},
    "wpm-emb256": {"tokens": "wordpiece", "init_embeddings": "minilm", "embedding_dim": 256},
    "wpm-h256": {"tokens": "wordpiece", "init_embeddings": "minilm", "hidden_size": 256},
    "len32": {"max_length": 32},
    "lr5e-5": {"lr": 5e-5},
    "2-epochs": {"epochs": 2},
    "2x-rows": {"rows_factor": 2},
    # Each duplicate pair's nearest non-duplicate question under zero-shot MiniLM (TopK-PercPos, 95 %),
    # added as a labelled non-duplicate pair (core.training.mining); the mining time counts as training time.
    "mined-negatives": {"mined_negatives": 1},
}
# Per model: training rows, epochs, batch, lr, model options; (full, quick). The grid rows compare
# losses at equal, modest budgets; the long recipes are the presets (--only lstm-quora, ...).
BUDGETS = {
    "lstm": ({"rows": 60000, "epochs": 3, "batch_size": 256, "lr": 2e-3,
              "options": {"embedding_dim": 128, "hidden_size": 128, "bidirectional": True}, "max_length": 32},
             {"rows": 8000, "epochs": 2, "batch_size": 128, "lr": 2e-3,
              "options": {"embedding_dim": 64, "hidden_size": 64}, "max_length": 32}),
    "dual-transformer": ({"rows": 30000, "epochs": 2, "batch_size": 64, "lr": 3e-4,
                          "options": {"d_model": 128, "num_heads": 4, "num_layers": 2, "ff_dim": 512,
                                      "projection_dim": 128}, "max_length": 32},
                         {"rows": 3000, "epochs": 1, "batch_size": 32, "lr": 3e-4,
                          "options": {"d_model": 64, "num_heads": 4, "num_layers": 1, "ff_dim": 128,
                                      "projection_dim": 64}, "max_length": 32}),
    "minilm": ({"rows": 5000, "epochs": 1, "batch_size": 64, "lr": 2e-5, "options": {}, "max_length": 40},
               {"rows": 400, "epochs": 1, "batch_size": 32, "lr": 2e-5, "options": {}, "max_length": 32}),
}


def implied_mask(train, pairs, seed: int = 0) -> np.ndarray:
    """(len(pairs),) True where a pair of ``pairs`` (in either order) is one that ``train``'s labels imply:
    a held-out pair that training on implied pairs may have seen with its label."""
    extra = implied_pairs(train, seed=seed)
    known = set(zip(normalise_questions(extra["question1"]), normalise_questions(extra["question2"])))
    return np.array([(a, b) in known or (b, a) in known
                     for a, b in zip(normalise_questions(pairs["question1"]), normalise_questions(pairs["question2"]))],
                    dtype=bool)


def protocol_splits(pairs, seed: int = 2026) -> Splits:
    return split_pairs(pairs, val_fraction=0.05, test_fraction=0.10, seed=seed)


def score_row(name: str, model, test, unseen, thresholds: dict, seconds: float, pairs_per_second: float) -> dict:
    from core.inference.metrics import pair_scores
    from core.text.pair_table import PairTable

    scores = pair_scores(model, PairTable(test, model.tokenizer))
    return metrics_row(name, test["is_duplicate"].to_numpy(), scores, unseen, thresholds.get("accuracy"),
                       seconds, pairs_per_second)


def metrics_row(name, labels, scores, unseen, threshold, seconds, pairs_per_second) -> dict:
    m = evaluate_scores(labels, scores, threshold)
    u = ranking_metrics(labels[unseen], scores[unseen])
    row = {"name": name, "roc_auc": m["roc_auc"], "average_precision": m["average_precision"],
           "accuracy": m["accuracy"], "f1": m["f1"], "threshold": m["threshold"],
           "unseen_roc_auc": u["roc_auc"], "unseen_n": int(unseen.sum()), "n": m["n"],
           "train_seconds": round(seconds, 1), "pairs_per_second": round(pairs_per_second, 1)}
    if NOT_IMPLIED is not None:
        # The test pairs the training labels do not imply (core.data.splitting): the fair column for a
        # run trained with implied_pairs, whose implied test pairs it may have seen labelled.
        k = evaluate_scores(labels[NOT_IMPLIED], scores[NOT_IMPLIED], threshold)
        row.update(not_implied_roc_auc=k["roc_auc"], not_implied_accuracy=k["accuracy"], not_implied_f1=k["f1"],
                   not_implied_n=int(NOT_IMPLIED.sum()))
    return row


def tfidf_row(splits: Splits, test, unseen) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(min_df=2, sublinear_tf=True)
    vectorizer.fit(np.concatenate([splits.train["question1"], splits.train["question2"]]))

    def cosine(frame):
        a, b = vectorizer.transform(frame["question1"]), vectorizer.transform(frame["question2"])
        return np.asarray(a.multiply(b).sum(axis=1)).ravel()  # rows are L2-normalised

    threshold = _calibrate(splits.val, cosine)
    return metrics_row("TF-IDF cosine", test["is_duplicate"].to_numpy(), cosine(test), unseen, threshold, 0, 0)


def _calibrate(val, score_fn) -> float:
    from core.inference.metrics import best_thresholds

    return best_thresholds(val["is_duplicate"].to_numpy(), score_fn(val))["accuracy"]


def zero_shot_row(splits: Splits, test, unseen, val_pairs: int) -> dict:
    model, _ = load_model("minilm")  # the zero-shot MiniLM
    val = splits.val.sample(n=min(val_pairs, len(splits.val)), random_state=0)
    threshold = _calibrate(val, lambda f: model.score_pairs(f["question1"].tolist(), f["question2"].tolist()))
    return score_row("MiniLM zero-shot", model, test, unseen, {"accuracy": threshold}, 0, 0)


def run_combination(model_name: str, loss_label: str, splits: Splits, test, unseen, quick: bool,
                    rows: int = 0, validate_every: int = 0, variant: str = "") -> dict:
    budget = dict(BUDGETS[model_name][1 if quick else 0])
    if rows:
        budget["rows"] = rows
    negatives_per_pair = 0
    for key, value in VARIANTS.get(variant, {}).items():
        if key == "rows_factor":
            budget["rows"] = budget["rows"] * value
        elif key == "mined_negatives":
            negatives_per_pair = value
        elif key in budget:
            budget[key] = value
        else:
            budget["options"] = {**budget["options"], key: value}
    train = splits.train if budget["rows"] is None else splits.train.iloc[: budget["rows"]]
    mining_seconds, mined = 0.0, 0
    if negatives_per_pair:
        train, mined, mining_seconds = with_mined_negatives(train, negatives_per_pair)
    name = f"{model_name} / {loss_label}" + (f" [{variant}]" if variant else "")
    row = train_and_score(name, budget_spec(model_name, loss_label, budget, quick, validate_every),
                          Splits(train, calibration_split(splits, model_name), splits.test[:0]), test, unseen)
    if negatives_per_pair:
        row.update(train_seconds=round(row["train_seconds"] + mining_seconds, 1), mining_seconds=round(mining_seconds, 1),
                   mined_pairs=mined)
    return row


def budget_spec(model_name: str, loss_label: str, budget: dict, quick: bool, validate_every: int = 0) -> RunSpec:
    loss_options, hard = LOSSES[loss_label]
    return spec_from_options(model=model_name, **loss_options, epochs=budget["epochs"],
                             batch_size=budget["batch_size"], lr=budget["lr"], patience=1,
                             max_val_pairs=1000 if quick else 3000, model_options=budget["options"],
                             max_length=budget["max_length"], hard_negatives=hard, validate_every=validate_every)


def with_mined_negatives(train, per_pair: int):
    """``train`` plus one mined non-duplicate pair per duplicate pair at most (zero-shot MiniLM, core.training.mining),
    the number mined and the seconds mining took."""
    import pandas as pd

    from core.training.mining import mine_hard_negatives

    started = time.perf_counter()
    miner, _ = load_model("minilm")
    mined = mine_hard_negatives(train, miner, k=per_pair)
    seconds = time.perf_counter() - started
    print(f"  mined {len(mined):,} hard negatives for {int(train['is_duplicate'].sum()):,} duplicate pairs "
          f"in {seconds:.0f} s", flush=True)
    return pd.concat([train, mined], ignore_index=True), len(mined), seconds


def teacher_rows(splits: Splits, test, unseen, quick: bool, validate_every: int = 0, teacher_pairs: int = 0) -> list[dict]:
    """Augmented SBERT as the `augmented` preset does it (core.training.distillation), on the MiniLM lever budget:
    the cross-encoder teacher trained on the budget's gold pairs (or the first ``teacher_pairs`` training pairs), as
    a row of its own, then MiniLM trained on the gold pairs plus silver pairs of their questions (neighbours under
    zero-shot MiniLM and random ones) labelled by the teacher at its calibrated threshold. The student row's time is
    the whole chain: teacher training, mining, labelling, student."""
    import pandas as pd

    from core.data import corpus_questions
    from core.training.distillation import silver_labels, silver_pairs

    budget = BUDGETS["minilm"][1 if quick else 0]
    gold = splits.train.iloc[: budget["rows"]].reset_index(drop=True)
    val = calibration_split(splits, "minilm")
    # The teacher is a run like any other (train --model cross-encoder); its threshold calibrated on the same pairs.
    teacher_spec = spec_from_options(model="cross-encoder", epochs=1, batch_size=32, max_length=budget["max_length"],
                                     patience=1, max_val_pairs=1000 if quick else 3000, validate_every=validate_every)
    fit = train_run(teacher_spec, Splits(splits.train.iloc[: teacher_pairs or len(gold)], val, splits.test[:0]),
                    save=False, callbacks=[EpochPrinter("cross-encoder teacher")])
    teacher = fit.model
    score = lambda frame: teacher.score_pairs(frame["question1"].tolist(), frame["question2"].tolist())  # noqa: E731
    threshold = _calibrate(val, score)
    started = time.perf_counter()
    test_scores = score(test)
    scoring = time.perf_counter() - started
    teacher_row = metrics_row("MiniLM cross-encoder (the teacher)", test["is_duplicate"].to_numpy(), test_scores,
                              unseen, threshold, fit.outcome.seconds, fit.outcome.pairs_per_second)
    teacher_row.update(train_pairs=fit.outcome.pairs_seen, test_pairs_per_second=round(len(test) / scoring, 1))
    print(table([teacher_row]).splitlines()[-1], flush=True)

    started = time.perf_counter()
    miner, _ = load_model("minilm")
    silver = silver_pairs(corpus_questions(gold), miner, gold, limit=len(gold))
    columns = ["question1", "question2", "is_duplicate"]
    silver = silver.assign(is_duplicate=silver_labels(teacher, silver, threshold))[columns]
    labelling = time.perf_counter() - started
    print(f"  {len(silver):,} silver pairs mined and labelled in {labelling:.0f} s "
          f"({silver['is_duplicate'].mean():.1%} called duplicates)", flush=True)
    spec = budget_spec("minilm", "contrastive", budget, quick, validate_every)
    row = train_and_score("minilm / gold + the teacher's silver pairs", spec,
                          Splits(pd.concat([gold[columns], silver], ignore_index=True), val, splits.test[:0]), test, unseen)
    row.update(student_seconds=row["train_seconds"], teacher_seconds=round(fit.outcome.seconds, 1),
               labelling_seconds=round(labelling, 1), silver_pairs=len(silver),
               train_seconds=round(row["train_seconds"] + fit.outcome.seconds + labelling, 1))
    return [teacher_row, row]


def calibration_split(splits: Splits, model_name: str):
    """The validation pairs a run calibrates its threshold on: all of them, or 3,000 for MiniLM,
    whose scoring of the whole 5 % split would take longer than its 20,000-pair training."""
    return splits.val.iloc[:3000] if model_name == "minilm" else splits.val


class EpochPrinter:
    """One line per epoch (and per validation inside one, with --validate-every), so a long run shows where it is."""

    def __init__(self, name: str):
        self.name, self.started = name, time.perf_counter()

    def on_epoch_end(self, trainer):
        m = trainer.epoch_results[-1].metrics
        print(f"  {self.name} epoch {trainer.epoch}: step {trainer.step}/{trainer.total_steps}, "
              f"val roc_auc {m.get('roc_auc', float('nan')):.4f}, {trainer.pairs_per_second:.0f} pairs/s, "
              f"{time.perf_counter() - self.started:.0f} s", flush=True)

    def on_validation_end(self, trainer):
        v = trainer.validations[-1]
        if trainer.config.validate_every and v.step != trainer.steps_per_epoch * v.epoch:  # not an epoch's end
            print(f"  {self.name} step {v.step}/{trainer.total_steps}: val roc_auc "
                  f"{v.metrics.get('roc_auc', float('nan')):.4f} after {v.train_seconds:.0f} s of training", flush=True)


SAVE_ROOT: Path | None = None  # --save-models: where each trained row's model folder goes
NOT_IMPLIED: np.ndarray | None = None  # (test pairs,) False where the training labels imply the pair


def train_and_score(name: str, spec: RunSpec, splits: Splits, test, unseen) -> dict:
    out_dir = None
    if SAVE_ROOT is not None:
        out_dir = SAVE_ROOT / "".join(c if c.isalnum() or c in "-+." else "_" for c in name).strip("_")
    result = train_run(spec, splits, out_dir=out_dir, save=out_dir is not None, callbacks=[EpochPrinter(name)])
    row = score_row(name, result.model, test, unseen, result.thresholds, result.outcome.seconds,
                    result.outcome.pairs_per_second)
    row.update(train_pairs=len(splits.train), epochs_run=len(result.outcome.epochs), status=result.outcome.status,
               stopped_early=result.outcome.stopped_early,
               validation_curve=validation_curve(result.outcome.validations),
               spec={"loss": dataclasses.asdict(spec.loss), "train": dataclasses.asdict(spec.train),
                     "model_options": spec.model_options, "max_length": spec.max_length,
                     "hard_negatives": spec.hard_negatives})
    return row


def preset_row(preset_name: str, splits: Splits, test, unseen, quick: bool, max_steps: int = 0,
               validate_every: int = 0, options: dict | None = None) -> dict:
    # --quick caps every preset at 30 steps; --preset-steps N at N; otherwise the recipe's own cap.
    overrides = {"max_steps": 30 if quick else max_steps} if (quick or max_steps) else {}
    if validate_every:  # else the recipe's own (once per epoch unless it says otherwise)
        overrides["validate_every"] = validate_every
    overrides.update(options or {})
    spec = spec_from_options(preset_name, **overrides)
    changed = ", ".join(f"{k}={v}" for k, v in (options or {}).items())
    row = train_and_score(f"preset {preset_name}" + (f" [{changed}]" if changed else ""), spec,
                           Splits(splits.train, calibration_split(splits, spec.model), splits.test[:0]), test, unseen)
    if spec.train.max_steps:  # the run saw only its first max_steps batches
        row["train_pairs"] = min(len(splits.train), spec.train.max_steps * spec.train.batch_size)
    return row


def saved_row(folder: str, test, unseen) -> dict:
    """A model trained earlier on this protocol (``--save-models``), scored again at its own calibrated
    threshold: new columns for an old run without training it again."""
    model, config = load_model(folder)
    training = config.get("training", {})
    row = score_row(f"saved {Path(folder).name}", model, test, unseen, config.get("thresholds", {}),
                    training.get("seconds", 0.0), training.get("pairs_per_second", 0.0))
    row["train_pairs"] = config.get("data", {}).get("train_pairs", "-")
    return row


def peer_rows(splits: Splits, test, unseen, quick: bool, validate_every: int = 0) -> list[dict]:
    """sentence-transformers' trainer vs ours on the same MiniLM, data, batch size and epochs."""
    from bench.peer import fine_tune_peer

    n = 400 if quick else 20000
    rows = []
    labelled = splits.train.iloc[:n]
    duplicates = splits.train[splits.train["is_duplicate"] == 1].iloc[:n]
    for peer_loss, our_loss, data in (("OnlineContrastiveLoss", "contrastive", labelled),
                                      ("MultipleNegativesRankingLoss", "softmax", duplicates)):
        model, seconds = fine_tune_peer(peer_loss, data, batch_size=64, epochs=1, lr=2e-5, max_length=40)
        row = score_row(f"peer ST {peer_loss}", model, test, unseen,
                        {"accuracy": _calibrate(calibration_split(splits, "minilm"), lambda f: model.score_pairs(
                            f["question1"].tolist(), f["question2"].tolist()))}, seconds, len(data) / seconds)
        row["train_pairs"] = len(data)
        rows.append(row)
        spec = spec_from_options(model="minilm", loss=our_loss, epochs=1, batch_size=64, lr=2e-5, patience=0,
                                 max_val_pairs=500, max_length=40, validate_every=validate_every)
        rows.append(train_and_score(f"ours {our_loss} (same data)", spec,
                                    Splits(data, calibration_split(splits, "minilm"), splits.test[:0]), test, unseen))
    return rows


def table(rows: list[dict]) -> str:
    head = ("| model / loss | ROC AUC | AP | accuracy | F1 | unseen ROC AUC | not-implied ROC AUC / accuracy | "
            "train pairs | train time (s) | pairs/s |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        implied = (f"{r['not_implied_roc_auc']:.4f} / {r['not_implied_accuracy']:.4f} (n={r['not_implied_n']})"
                   if "not_implied_roc_auc" in r else "-")
        lines.append(f"| {r['name']} | {r['roc_auc']:.4f} | {r['average_precision']:.4f} | {r['accuracy']:.4f} | "
                     f"{r['f1']:.4f} | {r['unseen_roc_auc']:.4f} (n={r['unseen_n']}) | {implied} | "
                     f"{r.get('train_pairs', '-')} | {r['train_seconds']:.0f} | {r['pairs_per_second']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    from bench.common import parser, setup_torch

    p = parser(__doc__)
    p.add_argument("--only", default="", help="comma-separated: model/loss (lstm/contrastive), model/loss:variant "
                                              "(a model-setting lever of VARIANTS), model/* (its every loss), "
                                              "preset names, saved:FOLDER (a model saved by --save-models, "
                                              "scored again), "
                                              "'baselines', 'peer', 'teacher' (cross-encoder teacher and its "
                                              "distilled MiniLM), or 'grid' (every model x loss)")
    p.add_argument("--peer", action="store_true", help="also run the sentence-transformers comparison")
    p.add_argument("--test-pairs", type=int, default=10000, help="scored sample of the held-out split (0 = all)")
    p.add_argument("--preset-steps", type=int, default=0, help="cap the presets' training steps (0 = the recipe's)")
    p.add_argument("--preset-options", type=json.loads, default=None,
                   help='JSON of run options laid over the presets\' own, e.g. \'{"implied_pairs": true, "epochs": 3}\'')
    p.add_argument("--rows", type=int, default=0, help="training pairs of the model x loss rows (0 = BUDGETS)")
    p.add_argument("--teacher-pairs", type=int, default=0,
                   help="training pairs of the 'teacher' item's cross-encoder (0 = the MiniLM lever budget's)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (1 lets two runs share the 2 cores)")
    p.add_argument("--validate-every", type=int, default=0,
                   help="also validate every N steps, for the rows' validation curves (0 = once per epoch; "
                        "each validation scores max_val_pairs pairs, so it adds time, never counted as training)")
    p.add_argument("--save-models", type=Path, default=None,
                   help="save each trained row's model in a folder of its own under this one (for dedup_scale.py ...)")
    args = p.parse_args()
    global SAVE_ROOT, NOT_IMPLIED
    SAVE_ROOT = args.save_models
    setup_torch(args.threads)
    pairs, _ = load_pairs(data_path())
    splits = protocol_splits(pairs)
    test = splits.test
    n_test = 2000 if args.quick else args.test_pairs
    if n_test and len(test) > n_test:
        test = test.sample(n=n_test, random_state=0).reset_index(drop=True)
    unseen = (seen_in_training(splits.train, test) == SEEN_NEITHER).to_numpy()
    NOT_IMPLIED = ~implied_mask(splits.train, test)
    print(f"train {len(splits.train):,} / val {len(splits.val):,} / test {len(splits.test):,} pairs; "
          f"scoring {len(test):,} test pairs ({unseen.sum():,} unseen, {NOT_IMPLIED.sum():,} not implied by the "
          f"training labels)", flush=True)

    wanted = [w for w in args.only.split(",") if w] or ["baselines", "grid"] + list(PRESETS)[:2]
    rows = []
    OUT.mkdir(exist_ok=True)
    out = OUT / f"quality-{'quick-' if args.quick else ''}{date.today()}-{int(time.time())}.json"

    def save() -> None:  # after every item, so a long run cut short keeps what it measured
        out.write_text(json.dumps({"date": str(date.today()), "argv": sys.argv[1:], "rows": rows}, indent=2,
                                  default=str))

    for item in wanted:
        started, before = time.perf_counter(), len(rows)
        if item == "baselines":
            rows.append(tfidf_row(splits, test, unseen))
            rows.append(zero_shot_row(splits, test, unseen, 1000 if args.quick else 3000))
        elif item == "grid" or item.endswith("/*"):  # every model x loss, or one model's every loss
            for model_name in (BUDGETS if item == "grid" else [item[:-2]]):
                for loss_label in LOSSES:
                    rows.append(run_combination(model_name, loss_label, splits, test, unseen, args.quick, args.rows,
                                                args.validate_every))
                    print(table(rows[-1:]).splitlines()[-1], flush=True)
                    before = len(rows)
        elif item in PRESETS:
            rows.append(preset_row(item, splits, test, unseen, args.quick, args.preset_steps, args.validate_every,
                                   args.preset_options))
        elif item.startswith("saved:"):
            rows.append(saved_row(item.removeprefix("saved:"), test, unseen))
        elif "/" in item:
            model_name, loss_label = item.split("/")
            loss_label, _, variant = loss_label.partition(":")
            if variant not in ("", *VARIANTS):
                sys.exit(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
            rows.append(run_combination(model_name, loss_label, splits, test, unseen, args.quick, args.rows,
                                        args.validate_every, variant))
        elif item == "teacher":
            rows.extend(teacher_rows(splits, test, unseen, args.quick, args.validate_every, args.teacher_pairs))
        elif item == "peer":
            rows.extend(peer_rows(splits, test, unseen, args.quick, args.validate_every))
        else:
            sys.exit(f"unknown item {item!r}")
        for line in table(rows[before:]).splitlines()[2:]:  # rows not printed yet
            print(line, flush=True)
        print(f"[{item}: {time.perf_counter() - started:.0f} s]", flush=True)
        save()
    if args.peer and "peer" not in wanted:
        rows.extend(peer_rows(splits, test, unseen, args.quick, args.validate_every))
    print()
    print(table(rows))
    save()
    print(f"\nrows written to {out}")


if __name__ == "__main__":
    main()
