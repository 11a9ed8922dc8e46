"""The Trainer on a CUDA GPU against a bare PyTorch loop doing the same work, eager and compiled (issue 26).

MiniLM (pretrained, max length 40) with the contrastive loss (squared hinge, margin 1.0), as the
``minilm-quora`` and ``minilm-quora-gpu`` presets train it, on real Quora pairs. For each batch size
(64, 256, 1,024) and each of eager / ``torch.compile`` (mode reduce-overhead, CUDA graphs), both sides
start from the same weights and see the same batches (``PairTable.index_batches``, length-bucketed):

* the Trainer: ``Trainer.run()`` with ``precision`` / ``compile`` set, a step cap, no validation hook; it builds
  each batch (on its background thread, a few steps ahead), copies it to the GPU and reads the loss back every 50
  steps on CUDA;
* the bare loop: batches tokenised and copied to the GPU beforehand (padded to the same fixed widths when
  compiled), the same autocast plan (``core.training.trainer.autocast_plan``), a GradScaler where it needs one, fused AdamW,
  clipping, the same schedule, and no read-back of the loss until the end.

Both sides are timed over the same steps: from the end of the last warm-up step to the end of the last step, the
GPU synchronised at both ends. What the Trainer does once after its last step (the epoch's final validation, which
copies the weights to the host as the best so far, and their restore) is printed apart, as "run end".

The sides alternate run by run (``--rounds`` each); printed per setting: steps/s and pairs/s (medians),
the ratio Trainer / bare (goal >= 0.95), torch.cuda.max_memory_allocated per side, and the largest
difference of their mean losses over the run. On a machine without CUDA it says so and exits 0.

``--profile N`` times nothing: it runs ``torch.profiler`` over N steps after the warm-up, one run per side and
setting, and prints the host-side operators and Python functions that took the most CPU time on each side (what
the Trainer does per step that the bare loop does not is at the top of its table), with a Chrome trace of each run
in bench/out/ (open in chrome://tracing or https://ui.perfetto.dev).

    .venv/bin/python bench/gpu_train.py --quick
    .venv/bin/python bench/gpu_train.py
    .venv/bin/python bench/gpu_train.py --profile 20 --batch-sizes 64 --modes compiled
"""
from __future__ import annotations

import contextlib
import copy
import time
from pathlib import Path

try:
    from bench.common import header, load_real_pairs, median, parser, report
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import header, load_real_pairs, median, parser, report

SEED = 0
LR = 1e-4
MAX_LENGTH = 40
BATCH_SIZES = (64, 256, 1024)
OUT = Path(__file__).resolve().parent / "out"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "fp16"))
    p.add_argument("--rounds", type=int, help="runs per side and setting (default 1 quick / 2)")
    # The warm-up should meet every fixed width once: a compiled step records a CUDA graph per width it meets.
    p.add_argument("--warm", type=int, help="untimed steps at the start of each run (default 5 quick / 60)")
    p.add_argument("--steps", type=int, help="timed steps per run (default 10 quick / 200)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    p.add_argument("--modes", nargs="+", default=["eager", "compiled"], choices=("eager", "compiled"),
                   help="which steps to time (a lease short of device time may take only the compiled ones)")
    p.add_argument("--batches-ahead", type=int, metavar="N",
                   help="batches the Trainer builds ahead on its thread (default: its own; 0: in its loop)")
    p.add_argument("--profile", type=int, metavar="N",
                   help="time nothing: profile N steps after the warm-up on each side and print the top host-side work")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing measured")
        return
    rounds = args.rounds or (1 if args.quick else 2)
    warm = args.warm or (5 if args.quick else 60)
    steps = args.profile or args.steps or (10 if args.quick else 200)  # a profiled run stops where its profile does
    header(f"gpu_train: Trainer vs bare loop on {torch.cuda.get_device_name(0)} (MiniLM, contrastive)", args.quick)

    from core.models import MiniLM
    from core.status import DONE
    from core.text.pair_table import PairTable
    from core.text.token_table import pad_widths
    from core.training.objectives import LossConfig
    from core.training.trainer import (TrainConfig, Trainer, autocast_plan, compile_mode,
                                       warmup_then_linear_decay)

    device = torch.device("cuda")
    plan = autocast_plan("cuda", args.precision, torch.cuda.is_bf16_supported())
    objective = LossConfig("contrastive")  # squared hinge, margin 1.0
    pairs = load_real_pairs(max_rows=max(args.batch_sizes) * (warm + steps) + 1000)
    base = MiniLM.pretrained(max_length=MAX_LENGTH)
    initial = copy.deepcopy(base.state_dict())
    table = PairTable(pairs, base.tokenizer)
    batches_ahead = Trainer.batches_ahead_on_cuda if args.batches_ahead is None else args.batches_ahead
    report("setup", {"GPU": torch.cuda.get_device_name(0), "torch": torch.__version__, "pairs": len(table),
                     "precision": args.precision, "autocast dtype": str(plan.dtype), "GradScaler": plan.use_scaler,
                     "warm-up steps": warm, "timed steps": steps, "runs per side": rounds,
                     "Trainer batches ahead": batches_ahead})

    def fresh_model():
        model = copy.deepcopy(base)
        model.load_state_dict(initial)
        return model

    def config(batch: int, compiled: bool) -> TrainConfig:
        return TrainConfig(epochs=1, batch_size=batch, lr=LR, weight_decay=0.0, warmup_ratio=0.1,
                           grad_clip=1.0, seed=SEED, device="cuda", precision=args.precision, compile=compiled,
                           patience=0, max_steps=warm + steps)

    class RunClock:
        """The time at the end of the last warm-up step, of the last step and of the run, the GPU synchronised."""

        def __init__(self):
            self.start = self.end = self.run_end = 0.0

        def on_batch_end(self, trainer):
            if trainer.step in (warm, warm + steps):
                torch.cuda.synchronize()
                if trainer.step == warm:
                    self.start = time.perf_counter()
                else:
                    self.end = time.perf_counter()

        def on_train_end(self, trainer):
            torch.cuda.synchronize()
            self.run_end = time.perf_counter()

    class StepProfile:
        """torch.profiler over the steps after the warm-up, started and stopped at step ends, the GPU synchronised."""

        def __init__(self, count: int):
            from torch.profiler import ProfilerActivity, profile

            self.count = count
            # with_stack: Python functions appear in the tables too, not only operators
            self.profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True)

        def at_step_end(self, done: int) -> None:
            """Call after each step with the steps done so far."""
            if done in (warm, warm + self.count):
                torch.cuda.synchronize()
                (self.profiler.start if done == warm else self.profiler.stop)()

        def on_batch_end(self, trainer):  # as a Trainer callback
            self.at_step_end(trainer.step)

        def print_top(self, title: str, trace: Path) -> None:
            events = self.profiler.key_averages()
            print(f"\n== {title}: {self.count} steps, the 30 largest by host (CPU) self time, all threads ==")
            print(events.table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70))
            trace.parent.mkdir(parents=True, exist_ok=True)
            self.profiler.export_chrome_trace(str(trace))
            print(f"Chrome trace: {trace}")

    def trainer_side(batch: int, compiled: bool, profile: StepProfile | None = None) -> dict:
        torch._dynamo.reset()  # a fresh model per run: never hit the recompile limit and fall back to eager
        torch.cuda.reset_peak_memory_stats()
        clock = RunClock()
        callbacks = [clock] if profile is None else [clock, profile]
        trainer = Trainer(fresh_model(), objective, table, config(batch, compiled), callbacks=callbacks)
        trainer.batches_ahead = batches_ahead
        outcome = trainer.run()
        if outcome.status != DONE:
            raise SystemExit(f"trainer run ended {outcome.status}: {outcome.message}")
        return {"seconds": clock.end - clock.start, "run end seconds": clock.run_end - clock.end,
                "memory": torch.cuda.max_memory_allocated(), "mean loss": outcome.epochs[0].train_loss}

    def bare_side(batch: int, compiled: bool, profile: StepProfile | None = None) -> dict:
        torch._dynamo.reset()
        torch.cuda.reset_peak_memory_stats()
        c = config(batch, compiled)
        rows = table.index_batches(objective.batch_kind, batch, c.seed, c.length_buckets)[: warm + steps]
        table_width = max(table.first.ids.shape[1], table.second.ids.shape[1])
        widths = pad_widths(table_width) if compiled else None  # the Trainer's fixed widths for a compiled step
        batches = [table.batch(r, widths).to(device) for r in rows]  # on the GPU before the clock starts
        torch.manual_seed(c.seed)
        model = fresh_model().to(device).train()
        step_model = torch.compile(model, mode=compile_mode("cuda"), dynamic=True) if compiled else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay, fused=True)
        scheduler = warmup_then_linear_decay(optimizer, len(batches), c.warmup_ratio)
        scaler = torch.amp.GradScaler("cuda") if plan.use_scaler else None
        losses = []
        started = 0.0
        for index, b in enumerate(batches):
            if index == warm:
                torch.cuda.synchronize()
                started = time.perf_counter()
            if compiled:
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast("cuda", dtype=plan.dtype) if plan.enabled else contextlib.nullcontext():
                v1, v2, _ = step_model(b.first, b.second, b.negatives)
                loss = objective(v1.float(), v2.float(), b.labels, None)
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            losses.append(loss.detach())
            if profile is not None:
                profile.at_step_end(index + 1)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "memory": torch.cuda.max_memory_allocated(),
                "mean loss": float(torch.stack(losses).float().mean())}

    def profile_both(batch: int, compiled: bool) -> None:
        mode = "compiled" if compiled else "eager"
        for side, run in (("bare", bare_side), ("trainer", trainer_side)):
            profile = StepProfile(steps)
            run(batch, compiled, profile)
            profile.print_top(f"{side}, batch {batch}, {mode}", OUT / f"gpu_train-profile-{side}-{batch}-{mode}.json")

    for batch in args.batch_sizes:
        for compiled in [mode == "compiled" for mode in args.modes]:
            if args.profile:
                profile_both(batch, compiled)
                continue
            runs = {"bare": [], "trainer": []}
            for _ in range(rounds):  # alternated: bare, trainer, bare, trainer, ...
                runs["bare"].append(bare_side(batch, compiled))
                runs["trainer"].append(trainer_side(batch, compiled))
            seconds = {side: median([r["seconds"] for r in results]) for side, results in runs.items()}
            timed_rows = table.index_batches(objective.batch_kind, batch, SEED, True)[warm: warm + steps]
            timed_pairs = sum(len(r) for r in timed_rows)  # the same batches on both sides
            loss_diff = abs(runs["bare"][0]["mean loss"] - runs["trainer"][0]["mean loss"])
            report(f"batch {batch}, {'compiled (' + compile_mode('cuda') + ')' if compiled else 'eager'}", {
                "bare steps/s": steps / seconds["bare"],
                "Trainer steps/s": steps / seconds["trainer"],
                "bare pairs/s": timed_pairs / seconds["bare"],
                "Trainer pairs/s": timed_pairs / seconds["trainer"],
                "ratio Trainer / bare (goal >= 0.95)": seconds["bare"] / seconds["trainer"],
                "bare max_memory_allocated, GiB": max(r["memory"] for r in runs["bare"]) / 2**30,
                "Trainer max_memory_allocated, GiB": max(r["memory"] for r in runs["trainer"]) / 2**30,
                "|mean loss Trainer - mean loss bare|, first runs": loss_diff,
                "Trainer run end (final validation, best-weights copy and restore), s":
                    median([r["run end seconds"] for r in runs["trainer"]]),
            })


if __name__ == "__main__":
    main()
