"""MiniLM fine-tuning speed: our Trainer vs sentence-transformers' SentenceTransformerTrainer, side by side.

Both fine-tune all-MiniLM-L6-v2 (loaded offline from the installed package) for 1 epoch on the same
N real Quora duplicate pairs, batch 32, max length 64, lr 2e-5, in-batch softmax with scale 20
(ours: `LossConfig("softmax", scale=20)`; theirs: `MultipleNegativesRankingLoss(scale=20)`), no
evaluation, no checkpoints, 2 torch threads.

Side by side, step by step: the two trainers run in two threads that hand a baton to each other
at every step end (our `on_batch_end`, their `on_step_end`), so the sides alternate ours, peer,
ours, peer, ... and never compute at the same time. A step's time is everything its loop does
between two hand-overs (the peer's collator tokenisation included). Each side's fixed costs
(ours: PairTable tokenisation + Trainer setup + batch order + end of run; theirs: trainer
construction, dataloader set-up, end of run) are timed in the same run. pairs/s =
pairs / (steps x median step + fixed costs). Model loading is outside the timer.

Also printed: where our step's time goes (batch build, forward, loss, backward, clipping, optimizer),
the padded widths and attention implementation of each side, and torch's AdamW foreach vs fused (what
our Trainer builds, as transformers' default "adamw_torch_fused" does) step time, alternated.

(`--prototype-fused`, a third side with a fused AdamW, is gone: the Trainer builds a fused AdamW itself now.)

    .venv/bin/python bench/finetune_vs_peer.py --quick     # 512 pairs
    .venv/bin/python bench/finetune_vs_peer.py             # 2,048 pairs
"""
from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import warnings

try:
    from bench.common import (
        alternate,
        header,
        load_real_pairs,
        median,
        parser,
        report,
        setup_torch,
    )
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import (
        alternate,
        header,
        load_real_pairs,
        median,
        parser,
        report,
        setup_torch,
    )

SEED = 0
BATCH = 32
MAX_LENGTH = 64
LR = 2e-5


class Baton:
    """Threads take turns in a fixed rotation: a side computes only while it holds the baton."""

    def __init__(self, order):
        self.order, self.turn, self.finished = list(order), order[0], set()
        self.cond = threading.Condition()

    def _next(self, me: str) -> str:
        start = self.order.index(me)
        for k in range(1, len(self.order) + 1):
            side = self.order[(start + k) % len(self.order)]
            if side not in self.finished:
                return side
        return me

    def wait(self, me: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.turn == me)

    def hand_over(self, me: str) -> None:
        with self.cond:
            self.turn = self._next(me)
            self.cond.notify_all()

    def finish(self, me: str) -> None:
        with self.cond:
            self.finished.add(me)
            self.turn = self._next(me)
            self.cond.notify_all()


class StepClock:
    """Per-step times of one side; hands the baton over at every step end."""

    def __init__(self, side: str, baton: Baton):
        self.side, self.baton = side, baton
        self.steps: list[float] = []
        self.created = self.began = self.mark = self.done = 0.0

    def begin(self) -> None:  # the loop is about to take its first batch
        self.began = self.mark = time.perf_counter()

    def step_end(self) -> None:
        now = time.perf_counter()
        self.steps.append(now - self.mark)
        self.baton.hand_over(self.side)
        self.baton.wait(self.side)
        self.mark = time.perf_counter()

    def fixed_seconds(self) -> float:
        """Set-up before the first batch plus wind-down after the last step's hand-over."""
        return (self.began - self.created) + (self.done - self.mark)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--pairs", type=int, help="duplicate pairs (default 512 quick / 2048)")
    p.add_argument("--profile-steps", type=int, help="steps in the timed breakdown (default 4 quick / 8)")
    args = p.parse_args()
    n_pairs = args.pairs or (512 if args.quick else 2048)
    profile_steps = args.profile_steps or (4 if args.quick else 8)
    header("finetune_vs_peer: MiniLM fine-tune, our Trainer vs SentenceTransformerTrainer", args.quick)
    setup_torch()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")

    import torch
    from datasets import Dataset, disable_progress_bars
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import (
        MultipleNegativesRankingLoss,
    )
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    from core.models import MiniLM
    from core.status import DONE
    from core.text.pair_table import PairTable
    from core.text.wordpiece_tokenizer import minilm_folder
    from core.training.objectives import LossConfig
    from core.training.trainer import TrainConfig, Trainer

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    disable_progress_bars()
    for name in ("transformers", "sentence_transformers", "accelerate", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)

    pairs = load_real_pairs(max_rows=20_000)
    duplicates = pairs[pairs["is_duplicate"] == 1].reset_index(drop=True)
    data = duplicates.head(n_pairs)
    folder = str(minilm_folder())
    objective = LossConfig("softmax", scale=20.0)
    config = TrainConfig(epochs=1, batch_size=BATCH, lr=LR, weight_decay=0.0, warmup_ratio=0.1,
                         grad_clip=1.0, seed=SEED, device="cpu", patience=0)
    tmp = tempfile.mkdtemp(prefix="bench_st_")
    facts: dict = {}
    errors: list[BaseException] = []

    class OurClock:
        def __init__(self, clock):
            self.clock = clock

        def on_train_start(self, trainer):
            self.clock.begin()

        def on_batch_end(self, trainer):
            self.clock.step_end()

    class PeerClock(TrainerCallback):
        def __init__(self, clock):
            self.clock = clock

        def on_train_begin(self, args, state, control, **kwargs):
            self.clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            self.clock.step_end()

    def run_ours(data, clock: StepClock, baton: Baton, ready: threading.Barrier | None = None) -> None:
        side = clock.side
        try:
            model = MiniLM.pretrained(max_length=MAX_LENGTH)
            if ready is not None:
                ready.wait()  # both models loaded before either side computes
            baton.wait(side)
            clock.created = time.perf_counter()
            table = PairTable(data, model.tokenizer)
            trainer = Trainer(model, objective, table, config, callbacks=[OurClock(clock)])
            outcome = trainer.run()
            clock.done = time.perf_counter()
            if outcome.status != DONE or outcome.stopped_early:
                raise RuntimeError(f"our run ended {outcome.status}: {outcome.message}")
            facts["ours attention"] = model.bert.config._attn_implementation
            facts[f"{side} pairs"], facts[f"{side} steps"] = trainer.pairs_seen, trainer.step
            facts["ours widths"] = [int(t.lengths[rows].max()) for rows in table.index_batches(objective.batch_kind, BATCH, SEED)
                                    for t in (table.first, table.second)]
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
            if ready is not None:
                ready.abort()  # never leave the other side waiting at the barrier
        finally:
            baton.finish(side)

    def run_peer(data, clock: StepClock, baton: Baton, ready: threading.Barrier | None = None) -> None:
        try:
            model = SentenceTransformer(folder, device="cpu")
            model.max_seq_length = MAX_LENGTH
            dataset = Dataset.from_dict({"anchor": data["question1"].tolist(), "positive": data["question2"].tolist()})
            training_args = SentenceTransformerTrainingArguments(
                output_dir=tmp, num_train_epochs=1, per_device_train_batch_size=BATCH, learning_rate=LR,
                save_strategy="no", eval_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
                dataloader_num_workers=0, seed=SEED, logging_strategy="no",
            )
            if ready is not None:
                ready.wait()
            baton.wait("peer")
            clock.created = time.perf_counter()
            trainer = SentenceTransformerTrainer(model=model, args=training_args, train_dataset=dataset,
                                                 loss=MultipleNegativesRankingLoss(model, scale=20.0),
                                                 callbacks=[PeerClock(clock)])
            output = trainer.train()
            clock.done = time.perf_counter()
            inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
            facts["peer optimizer"] = f"{training_args.optim} (fused={inner.defaults.get('fused')})"
            facts["peer attention"] = model[0].auto_model.config._attn_implementation
            facts["peer pairs"], facts["peer steps"] = len(dataset), output.global_step
            lengths = model.tokenizer(data["question1"].tolist() + data["question2"].tolist(), truncation=True,
                                      max_length=MAX_LENGTH)["input_ids"]
            facts["peer lengths"] = [len(x) for x in lengths]
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
            if ready is not None:
                ready.abort()  # never leave the other side waiting at the barrier
        finally:
            baton.finish("peer")

    # Untimed warm-ups, one side at a time (lazy imports, first allocations).
    warm = duplicates.iloc[n_pairs : n_pairs + 2 * BATCH]
    for side, run in (("ours", run_ours), ("peer", run_peer)):
        alone = Baton([side])
        run(warm, StepClock(side, alone), alone)
    if errors:
        raise errors[0]

    sides = ["ours", "peer"]
    baton = Baton(sides)
    clocks = {side: StepClock(side, baton) for side in sides}
    ready = threading.Barrier(len(sides))
    threads = [threading.Thread(target=run_ours, args=(data, clocks["ours"], baton, ready)),
               threading.Thread(target=run_peer, args=(data, clocks["peer"], baton, ready))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]

    figures = {}
    per_pair = {}
    for side in sides:
        clock = clocks[side]
        steps = clock.steps
        fixed = clock.fixed_seconds()
        n = facts[f"{side} pairs"]
        per_pair[side] = (len(steps) * median(steps) + fixed) / n
        figures[f"{side} step s (median; min..max)"] = f"{median(steps):.2f} ({min(steps):.2f}..{max(steps):.2f})"
        figures[f"{side} fixed costs s"] = fixed
        figures[f"{side} wall s (both sides interleaved)"] = clock.done - clock.created
        figures[f"{side} pairs/s"] = 1 / per_pair[side]
    figures["ratio ours/peer (goal >= 1.0)"] = per_pair["peer"] / per_pair["ours"]

    # Padded widths: ours pads each side of a batch to its longest question; the peer the same per column.
    report("setup", {
        "duplicate pairs": len(data), "batch": BATCH, "max length": MAX_LENGTH, "torch threads": torch.get_num_threads(),
        "attention ours / peer": f"{facts['ours attention']} / {facts['peer attention']}",
        "steps / pairs ours": f"{facts['ours steps']} / {facts['ours pairs']}",
        "steps / pairs peer": f"{facts['peer steps']} / {facts['peer pairs']}",
        "ours padded width, mean batch max": sum(facts["ours widths"]) / len(facts["ours widths"]),
        "token length mean (peer tokenizer)": sum(facts["peer lengths"]) / len(facts["peer lengths"]),
        "peer optimizer": facts["peer optimizer"],
        "ours optimizer": "torch.optim.AdamW, fused (core.training.trainer)",
    })
    report("finetune_vs_peer (step-interleaved in one run)", figures)

    # Where our step's time goes: the Trainer's step, phase by phase, on the same batches.
    torch.manual_seed(SEED)
    model = MiniLM.pretrained(max_length=MAX_LENGTH)
    model.train()
    started = time.perf_counter()
    table = PairTable(data, model.tokenizer)
    tokenise_s = time.perf_counter() - started
    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=LR)
    phases = {name: [] for name in ("batch build", "forward", "loss", "backward", "clip", "optimizer (foreach)")}
    for rows in table.index_batches(objective.batch_kind, BATCH, SEED)[:profile_steps]:
        marks = [time.perf_counter()]
        batch = table.batch(rows)
        marks.append(time.perf_counter())
        v1, v2, _ = model(batch.first, batch.second)
        marks.append(time.perf_counter())
        loss = objective(v1, v2, batch.labels)
        float(loss.detach())
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        marks.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        marks.append(time.perf_counter())
        optimizer.step()
        marks.append(time.perf_counter())
        for name, a, b in zip(phases, marks, marks[1:]):
            phases[name].append(b - a)
    breakdown = {f"{name}, ms": median(v) * 1e3 for name, v in phases.items()}
    breakdown["step total (sum of medians), ms"] = sum(median(v) for v in phases.values()) * 1e3
    breakdown[f"tokenise all {len(data)} pairs once (PairTable), s"] = tokenise_s

    # AdamW foreach (ours) vs fused (transformers' default on torch >= 2.8), alternated on the same grads.
    grads = [torch.randn_like(q) * 1e-3 for q in params]
    twins = [q.detach().clone().requires_grad_(True) for q in params]
    for q, twin, g in zip(params, twins, grads):
        q.grad, twin.grad = g.clone(), g.clone()
    foreach_opt = torch.optim.AdamW(params, lr=LR)
    fused_opt = torch.optim.AdamW(twins, lr=LR, fused=True)
    opt_times = alternate({"foreach": foreach_opt.step, "fused": fused_opt.step}, 6 if args.quick else 12)
    breakdown["AdamW.step foreach, ms (alternated)"] = median(opt_times["foreach"][1:]) * 1e3
    breakdown["AdamW.step fused, ms (alternated)"] = median(opt_times["fused"][1:]) * 1e3
    breakdown["fused saves, share of our step"] = (
        (median(opt_times["foreach"][1:]) - median(opt_times["fused"][1:])) / sum(median(v) for v in phases.values()))
    report(f"our step, phase by phase (median of {profile_steps} steps)", breakdown)


if __name__ == "__main__":
    main()
