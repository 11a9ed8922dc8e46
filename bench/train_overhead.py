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

    .venv/bin/python bench/train_overhead.py --quick     # 20 steps per run, 2 whole runs per side
    .venv/bin/python bench/train_overhead.py             # 60 steps per run, 3 whole runs per side
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
    args = p.parse_args()
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
    from core.training.objectives import LossConfig, Objective
    from core.training.specs import spec_from_options
    from core.training.train_config import TrainConfig
    from core.training.trainer import Trainer

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
    config = TrainConfig(epochs=1, batch_size=BATCH, lr=2e-3, weight_decay=0.0, optimizer="adamw", warmup_ratio=0.1,
                         grad_clip=1.0, seed=SEED, device="cpu", patience=0)
    objective = Objective(LossConfig("triplet"))
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
            v1, v2 = self.net.embed_pair(batch.first, batch.second)  # (B, d), (B, d)
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


if __name__ == "__main__":
    main()
