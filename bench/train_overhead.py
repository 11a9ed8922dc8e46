"""Trainer overhead: core.training.trainer.Trainer vs a bare PyTorch loop doing the same work, side by side.

Siamese LSTM (embedding 128, hidden 128), triplet loss (margin 0.25), batch 256, AdamW, clipping 1.0,
the same warm-up/decay schedule, on real Quora duplicate pairs (first 40,000 rows; the table holds
`steps x 256` duplicate pairs so one epoch is about `steps` steps). Both sides start from the same
weights and see the same batches (`PairTable.index_batches`, i.e. `duplicate_free_batches`), so their
per-step losses must agree exactly -- the script checks it. The Trainer side builds each batch from
the TokenTable and runs a tqdm progress callback (`core.cli.train.TqdmProgress` writing to a StringIO);
the bare loop iterates pre-built tensors. Validation is off (no validate hook, epochs=1).

Two side-by-side measurements:
  1. step-interleaved: one Trainer run whose on_batch_end callback runs one bare step on a twin
     model, so the sides alternate every step (A, B, A, B, ...). "Ours" per step is everything
     between two callbacks: loop bookkeeping, batch building, the step, the tqdm callback.
     The per-epoch costs (batch order, best-state copy) are measured alone and amortised.
  2. whole runs: Trainer.run() wall time vs the bare loop's, alternated run by run.
Also printed: the Trainer extras timed alone, AdamW foreach (what the Trainer builds) vs fused, and
a prototype that packs the unidirectional LSTM (core packs only the bidirectional one). Packing
turned out slower on CPU: it is kept here as the evidence, not as a proposal.

With ``--tiny``, only the Trainer's own per-step host work is measured instead, on an encoder that computes almost
nothing (each text the mean of its token embeddings, MiniLM's WordPiece vocabulary, 8 dimensions), so that what the
Trainer adds shows above the noise of a shared machine: the contrastive loss at batch 64 and 256, set up as a
compiled CUDA run is (batches padded to the fixed widths, the loss read every 50 steps) but eager on the CPU. The bare loop takes the same batches pre-built, so the difference per step is what the Trainer adds around
a step: building the batch, control checks, bookkeeping, callbacks. The Trainer runs twice: as it is (batches built
ahead on its background thread) and with each batch built in its loop (``batches_ahead = 0``). Printed per batch
size and variant: the step-interleaved medians (wall time, and CPU time of the thread running the steps), whole runs
alternated (timed from the first step to the last, as bench/gpu_train.py times steps), and the largest weight
difference between the two sides after the run (the same work: 0 up to rounding). The CPU steps also carry hooks
that the CUDA steps do not (core.training.trainer.StepStop).

    .venv/bin/python bench/train_overhead.py --quick     # 20 steps per run, 2 whole runs per side
    .venv/bin/python bench/train_overhead.py             # 60 steps per run, 3 whole runs per side
    .venv/bin/python bench/train_overhead.py --tiny      # 400 steps per run, 5 whole runs per side (--quick: 150, 3)
"""
from __future__ import annotations

import copy
import io
import time

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
BATCH = 256
ROWS = 40_000


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--steps", type=int, help="steps per run (default 20 quick / 60)")
    p.add_argument("--rounds", type=int, help="whole runs per side (default 2 quick / 3)")
    p.add_argument("--tiny", action="store_true", help="only the Trainer's per-step host work, on a tiny model")
    args = p.parse_args()
    if args.tiny:
        tiny_host_overhead(args.steps or (150 if args.quick else 400), args.rounds or (3 if args.quick else 5),
                           args.quick)
        return
    steps = args.steps or (20 if args.quick else 60)
    rounds = args.rounds or (2 if args.quick else 3)
    header("train_overhead: Trainer vs bare loop (Siamese LSTM, triplet, batch 256)", args.quick)
    setup_torch()

    import torch

    from core.cli.train import TqdmProgress
    from core.losses import triplet_loss
    from core.models import build_model
    from core.status import DONE
    from core.text.pair_table import PairTable
    from core.training.objectives import LossConfig
    from core.training.specs import spec_from_options
    from core.training.trainer import TrainConfig, Trainer

    pairs = load_real_pairs(max_rows=ROWS)
    spec = spec_from_options(model="lstm", model_options=dict(embedding_dim=128, hidden_size=128))
    torch.manual_seed(SEED)
    train_texts = pairs["question1"].tolist() + pairs["question2"].tolist()
    model = build_model(spec, train_texts)  # word vocabulary from the 40k rows
    twin = copy.deepcopy(model)  # the bare loop's model in the interleaved measurement
    initial = copy.deepcopy(model.state_dict())
    # Only duplicate pairs reach triplet batches; this many of them make one epoch about `steps` batches.
    subset = pairs[pairs["is_duplicate"] == 1].head(steps * BATCH)
    table = PairTable(subset, model.tokenizer)
    config = TrainConfig(epochs=1, batch_size=BATCH, lr=2e-3, weight_decay=0.0, warmup_ratio=0.1,
                         grad_clip=1.0, seed=SEED, device="cpu", patience=0)
    objective = LossConfig("triplet")
    margin = objective.config.margin
    index_batches = table.index_batches(objective.batch_kind, BATCH, SEED, config.length_buckets)  # the Trainer's epoch-1 order
    prebuilt = [table.batch(rows) for rows in index_batches]
    n_steps = len(prebuilt)
    n_pairs = sum(len(b) for b in prebuilt)
    widths = [b.first[0].shape[1] for b in prebuilt]

    class BareLoop:
        """The plain PyTorch loop, one step at a time."""

        def __init__(self, net):
            net.load_state_dict(initial)
            net.train()
            self.net = net
            params = [q for q in net.parameters() if q.requires_grad]
            self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
            warmup, total = int(config.warmup_ratio * n_steps), n_steps

            def factor(step):
                return (step + 1) / warmup if step < warmup else max(0.0, (total - step) / max(1, total - warmup))

            self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
            self.losses = []

        def step(self, batch) -> None:
            v1, v2, _ = self.net(batch.first, batch.second)  # (B, d), (B, d)
            loss = triplet_loss(v1, v2, margin=margin)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), config.grad_clip)
            self.optimizer.step()
            self.scheduler.step()
            self.losses.append(loss.detach())

    class Interleave:
        """Trainer callback: after each Trainer step, one bare step on the twin, timed apart."""

        def on_train_start(self, trainer):
            self.bare = BareLoop(twin)
            self.ours_s, self.bare_s, self.losses = [], [], []
            self.mark = time.perf_counter()

        def on_batch_end(self, trainer):
            now = time.perf_counter()
            self.ours_s.append(now - self.mark)  # loop + batch build + step + tqdm since the last bare step
            self.losses.append(trainer.loss)
            self.bare.step(prebuilt[trainer.step - 1])
            self.mark = time.perf_counter()
            self.bare_s.append(self.mark - now)

    def trainer_run(callbacks):
        model.load_state_dict(initial)
        trainer = Trainer(model, objective, table, config, callbacks=[TqdmProgress(io.StringIO()), *callbacks])
        outcome = trainer.run()
        if outcome.status != DONE or outcome.stopped_early:
            raise SystemExit(f"trainer run ended {outcome.status}: {outcome.message}")
        return trainer

    # Warm-up: the first LSTM / AdamW calls allocate.
    warm = BareLoop(twin)
    for batch in prebuilt[:3]:
        warm.step(batch)

    # 1. step-interleaved
    interleave = Interleave()
    trainer = trainer_run([interleave])
    step_ours, step_bare = median(interleave.ours_s), median(interleave.bare_s)
    loss_diff = max(abs(a - float(b)) for a, b in zip(interleave.losses, interleave.bare.losses))

    # Per-epoch Trainer costs, measured alone and amortised over this epoch's steps.
    t = time.perf_counter()
    for _ in range(3):
        table.index_batches(objective.batch_kind, BATCH, SEED)
    index_s = (time.perf_counter() - t) / 3
    t = time.perf_counter()
    {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    state_s = time.perf_counter() - t
    t = time.perf_counter()
    for rows in index_batches:
        table.batch(rows)
    batch_s = (time.perf_counter() - t) / n_steps
    bar = TqdmProgress(io.StringIO())
    bar.on_train_start(trainer)
    t = time.perf_counter()
    for _ in range(2000):
        bar.on_batch_end(trainer)
    tqdm_s = (time.perf_counter() - t) / 2000
    bar.on_train_end(trainer)
    amortised_ours = step_ours + (index_s + state_s) / n_steps

    # Not overhead but a cheap win: AdamW foreach (what the Trainer builds) vs fused, same grads, alternated.
    params = [q for q in model.parameters() if q.requires_grad]
    twins = [q.detach().clone().requires_grad_(True) for q in params]
    for q, twin in zip(params, twins):
        q.grad = torch.randn_like(q) * 1e-3
        twin.grad = q.grad.clone()
    opt_times = alternate({"foreach": torch.optim.AdamW(params, lr=config.lr).step,
                           "fused": torch.optim.AdamW(twins, lr=config.lr, fused=True).step}, 11)
    foreach_s, fused_s = median(opt_times["foreach"][1:]), median(opt_times["fused"][1:])

    # Prototype of a core fix: pack the unidirectional LSTM too (core packs only when bidirectional),
    # so the LSTM runs over real tokens instead of every padded position. Same batches, alternated.
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    def packed_embed(net, input_ids, attention_mask):
        x = net.dropout(net.embedding(input_ids))  # (B, T, E)
        lengths = attention_mask.sum(1).clamp(min=1).cpu()
        h, _ = net.lstm(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])  # (B, T, H)
        m = attention_mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1.0), dim=-1)

    def forward_backward(embed, batch):
        v1, v2 = embed(*batch.first), embed(*batch.second)
        triplet_loss(v1, v2, margin=margin).backward()
        return v1.detach()

    padded_s, packed_s, embed_diff = [], [], 0.0
    for batch in prebuilt[: min(len(prebuilt), 12 if args.quick else 30)]:
        for name, embed in (("padded", model.embed), ("packed", lambda i, m: packed_embed(model, i, m))):
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            vectors = forward_backward(embed, batch)
            (padded_s if name == "padded" else packed_s).append(time.perf_counter() - started)
            if name == "padded":
                reference = vectors
            else:
                embed_diff = max(embed_diff, float((vectors - reference).abs().max()))
    real_tokens = sum(int(b.first[1].sum() + b.second[1].sum()) for b in prebuilt)
    padded_tokens = sum(b.first[1].numel() + b.second[1].numel() for b in prebuilt)

    # 2. whole runs, alternated
    losses = {}

    def bare_run() -> float:
        loop = BareLoop(model)
        started = time.perf_counter()
        for batch in prebuilt:
            loop.step(batch)
        seconds = time.perf_counter() - started
        losses["bare"] = [float(v) for v in loop.losses]
        return seconds

    def ours_run() -> float:
        started = time.perf_counter()
        trainer_run([])
        return time.perf_counter() - started

    runs = alternate({"bare": bare_run, "ours": ours_run}, rounds)

    report("setup", {
        "data rows loaded": len(pairs), "duplicate pairs in the table": len(table),
        "vocab size": model.tokenizer.vocab_size, "steps per run": n_steps, "pairs per run": n_pairs,
        "padded width min/median/max": (min(widths), int(median(widths)), max(widths)),
        "torch threads": torch.get_num_threads(),
    })
    report("1. step-interleaved, one Trainer run (median per step)", {
        "bare step ms": step_bare * 1e3,
        "Trainer step ms (incl. batch build + tqdm)": step_ours * 1e3,
        "Trainer step ms + per-epoch costs amortised": amortised_ours * 1e3,
        "bare pairs/s": BATCH / step_bare,
        "Trainer pairs/s": BATCH / amortised_ours,
        "ratio ours/bare (goal >= 0.90)": step_bare / amortised_ours,
        "median of per-step paired ratios": median([b / o for b, o in zip(interleave.bare_s, interleave.ours_s)]),
        "max |loss_ours - loss_bare| over steps": loss_diff,
    })
    report(f"2. whole runs, alternated ({rounds} per side)", {
        "bare loop seconds per run": runs["bare"],
        "Trainer.run() seconds per run": runs["ours"],
        "bare pairs/s": n_pairs / median(runs["bare"]),
        "Trainer pairs/s": n_pairs / median(runs["ours"]),
        "ratio ours/bare (goal >= 0.90)": median(runs["bare"]) / median(runs["ours"]),
    })
    report("Trainer extras, each measured alone", {
        "PairTable.batch per step, ms": batch_s * 1e3,
        "TqdmProgress.on_batch_end per call, ms": tqdm_s * 1e3,
        "index_batches (duplicate_free_batches) per epoch, ms": index_s * 1e3,
        "best-state copy per epoch, ms": state_s * 1e3,
        "extras as share of a bare step": (batch_s + tqdm_s + (index_s + state_s) / n_steps) / step_bare,
    })
    report("prototype: packed unidirectional LSTM, forward+backward per step (alternated per batch)", {
        "real tokens / padded positions": real_tokens / padded_tokens,
        "padded (core today), ms": median(padded_s) * 1e3,
        "packed, ms": median(packed_s) * 1e3,
        "speed-up padded/packed": median(padded_s) / median(packed_s),
        "max |embedding difference|": embed_diff,
    })
    report("AdamW step on this model (alternated, 10 each)", {
        "parameters": sum(q.numel() for q in params),
        "foreach (Trainer today), ms": foreach_s * 1e3,
        "fused=True, ms": fused_s * 1e3,
        "saving as share of a bare step": (foreach_s - fused_s) / step_bare,
    })


TINY_BATCHES = (64, 256)
TINY_DIMENSIONS = 8
TINY_MAX_LENGTH = 40  # MiniLM's in bench/gpu_train.py: the same fixed widths


def tiny_host_overhead(steps: int, rounds: int, quick: bool) -> None:
    """What the Trainer adds around each step, with a model whose step computes little (see the module doc)."""
    header("train_overhead --tiny: the Trainer's per-step host work (mean-of-embeddings encoder, contrastive)", quick)
    setup_torch()
    import torch

    from core.status import DONE
    from core.text.pair_table import PairTable
    from core.text.token_table import pad_widths
    from core.text.wordpiece_tokenizer import bert_wordpiece
    from core.training.objectives import LossConfig
    from core.training.trainer import TrainConfig, Trainer, warmup_then_linear_decay

    pairs = load_real_pairs(max_rows=max(TINY_BATCHES) * steps + 1000)
    tokenizer = bert_wordpiece(TINY_MAX_LENGTH)  # MiniLM's vocabulary: the widths of bench/gpu_train.py's batches

    class MeanOfEmbeddings(torch.nn.Module):
        """A pair encoder that computes almost nothing: each text is the mean of its token embeddings."""

        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(tokenizer.vocab_size, TINY_DIMENSIONS)

        def embed(self, ids, mask):  # (B, T), (B, T) -> (B, d)
            weights = mask.unsqueeze(-1).float()
            return (self.embedding(ids) * weights).sum(1) / weights.sum(1).clamp(min=1.0)

        def forward(self, first, second, negatives=None):
            return self.embed(*first), self.embed(*second), None if negatives is None else self.embed(*negatives)

    torch.manual_seed(SEED)
    model = MeanOfEmbeddings()
    twin = copy.deepcopy(model)
    initial = copy.deepcopy(model.state_dict())
    table = PairTable(pairs, tokenizer)
    objective = LossConfig("contrastive")
    widths = pad_widths(max(table.first.ids.shape[1], table.second.ids.shape[1]))

    class FixedWidths(Trainer):
        """The batches of a compiled step (fixed widths), the step itself eager: Inductor is not under test."""

        def _batch_widths(self):
            return widths

    def config(batch: int) -> TrainConfig:
        return TrainConfig(epochs=1, batch_size=batch, lr=1e-3, weight_decay=0.0, warmup_ratio=0.1,
                           grad_clip=1.0, seed=SEED, device="cpu", patience=0, max_steps=steps,
                           read_loss_every=50)  # CUDA's auto; the CPU's reads every step

    class BareLoop:
        """The plain loop on pre-built batches: fused AdamW (the Trainer's on the CPU), clipping, the schedule."""

        def __init__(self, net, c: TrainConfig):
            net.load_state_dict(initial)
            net.train()
            self.net, self.clip = net, c.grad_clip
            self.optimizer = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=c.weight_decay, fused=True)
            self.scheduler = warmup_then_linear_decay(self.optimizer, steps, c.warmup_ratio)
            self.losses = []

        def step(self, b) -> None:
            v1, v2, _ = self.net(b.first, b.second, b.negatives)
            loss = objective(v1.float(), v2.float(), b.labels, None)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.clip)
            self.optimizer.step()
            self.scheduler.step()
            self.losses.append(loss.detach())

    class StepClock:
        """From the start of the first step to the end of the last (the run's set-up and end left out)."""

        def on_train_start(self, trainer):
            self.started = time.perf_counter()

        def on_batch_end(self, trainer):
            self.ended = time.perf_counter()

    class Interleave:
        """After each Trainer step, one bare step on the twin, timed apart: wall time, and the CPU time of the
        thread that runs the steps (on a busy shared machine the steadier of the two; work moved to another
        thread leaves it)."""

        def __init__(self, bare: BareLoop, prebuilt: list):
            self.bare, self.prebuilt = bare, prebuilt
            self.ours_s, self.bare_s, self.ours_cpu_s, self.bare_cpu_s = [], [], [], []

        def on_train_start(self, trainer):
            self.mark, self.mark_cpu = time.perf_counter(), time.thread_time()

        def on_batch_end(self, trainer):
            now, now_cpu = time.perf_counter(), time.thread_time()
            self.ours_s.append(now - self.mark)
            self.ours_cpu_s.append(now_cpu - self.mark_cpu)
            self.bare.step(self.prebuilt[trainer.step - 1])
            self.mark, self.mark_cpu = time.perf_counter(), time.thread_time()
            self.bare_s.append(self.mark - now)
            self.bare_cpu_s.append(self.mark_cpu - now_cpu)

    def trainer_run(c: TrainConfig, callbacks, ahead: int) -> Trainer:
        model.load_state_dict(initial)
        trainer = FixedWidths(model, objective, table, c, callbacks=callbacks)
        trainer.batches_ahead = ahead
        outcome = trainer.run()
        if outcome.status != DONE or trainer.step != steps:
            raise SystemExit(f"trainer run ended {outcome.status} at step {trainer.step}: {outcome.message}")
        return trainer

    def largest_weight_difference(a, b) -> float:
        return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a.state_dict().values(),
                                                                               b.state_dict().values()))

    # The Trainer as it runs (its batches built ahead on a thread) and with each batch built in its loop.
    variants = {"built ahead": Trainer.batches_ahead_on_cuda, "built in the loop": 0}
    report("setup", {"pairs": len(table), "vocab size": tokenizer.vocab_size, "fixed widths": widths,
                     "steps per run": steps, "whole runs per side": rounds, "torch threads": torch.get_num_threads(),
                     "parameters": sum(q.numel() for q in model.parameters()),
                     "Trainer variants (batches ahead)": variants})
    for batch in TINY_BATCHES:
        c = config(batch)
        rows = table.index_batches(objective.batch_kind, batch, c.seed, c.length_buckets)[:steps]
        prebuilt = [table.batch(r, widths) for r in rows]
        started = time.perf_counter()
        for r in rows:
            table.batch(r, widths)
        figures = {"PairTable.batch alone, ms per step": (time.perf_counter() - started) / len(rows) * 1e3}

        skip = min(5, steps // 4)  # the first steps allocate
        for name, ahead in variants.items():
            interleave = Interleave(BareLoop(twin, c), prebuilt)
            trainer_run(c, [interleave], ahead)  # the Trainer's weights end in `model`, the bare loop's in `twin`
            step_ours, step_bare = median(interleave.ours_s[skip:]), median(interleave.bare_s[skip:])
            cpu_ours, cpu_bare = median(interleave.ours_cpu_s[skip:]), median(interleave.bare_cpu_s[skip:])
            figures.update({
                f"interleaved, {name}: step ms, bare / Trainer (medians)": (step_bare * 1e3, step_ours * 1e3),
                f"interleaved, {name}: Trainer - bare, ms per step": (step_ours - step_bare) * 1e3,
                f"interleaved, {name}: step thread's CPU ms, bare / Trainer": (cpu_bare * 1e3, cpu_ours * 1e3),
                f"interleaved, {name}: step thread's CPU, Trainer - bare, ms": (cpu_ours - cpu_bare) * 1e3,
                f"interleaved, {name}: max |weight Trainer - weight bare|": largest_weight_difference(model, twin),
            })

        def bare_run() -> float:
            loop = BareLoop(twin, c)
            started = time.perf_counter()
            for b in prebuilt:
                loop.step(b)
            return time.perf_counter() - started

        def trainer_side(ahead: int):
            def timed_run() -> float:
                clock = StepClock()
                trainer_run(c, [clock], ahead)
                return clock.ended - clock.started

            return timed_run

        runs = alternate({"bare": bare_run, **{name: trainer_side(ahead) for name, ahead in variants.items()}}, rounds)
        figures["whole runs: bare ms per step"] = [t / steps * 1e3 for t in runs["bare"]]
        for name in variants:
            figures[f"whole runs, {name}: Trainer ms per step"] = [t / steps * 1e3 for t in runs[name]]
            figures[f"whole runs, {name}: ratio Trainer / bare speed (medians)"] = median(runs["bare"]) / median(
                runs[name])
        report(f"batch {batch}", figures)

if __name__ == "__main__":
    main()
