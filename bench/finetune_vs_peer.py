"""MiniLM fine-tuning speed: our Trainer vs sentence-transformers' SentenceTransformerTrainer, side by side.

Both fine-tune all-MiniLM-L6-v2 (loaded offline from the installed package) for 1 epoch on the same
N real Quora duplicate pairs, batch 32, max length 64, lr 2e-5, in-batch softmax with scale 20
(ours: `LossConfig("softmax", scale=20)`; theirs: `MultipleNegativesRankingLoss(scale=20)`), no
evaluation, no checkpoints. Each side's time is its wall time from raw text to a trained model:
ours = PairTable (tokenise once) + Trainer + run(); theirs = SentenceTransformerTrainer(...) + train()
(it tokenises each batch in its collator). Model loading is outside the timer. The sides are
alternated run by run (ours, peer, ours, peer, ...) after an untimed warm-up of each.

Also printed: where our step's time goes (batch build, forward, loss, backward, clipping, optimizer),
the peer's per-batch tokenisation time and padded widths, the attention implementation of each,
and torch's AdamW foreach (ours) vs fused (transformers' default "adamw_torch_fused") step time.

    .venv/bin/python bench/finetune_vs_peer.py --quick     # 512 pairs, 2 runs per side
    .venv/bin/python bench/finetune_vs_peer.py             # 2,048 pairs, 2 runs per side
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
import warnings

try:
    from bench.common import alternate, header, load_real_pairs, median, parser, report, setup_torch
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import alternate, header, load_real_pairs, median, parser, report, setup_torch

SEED = 0
BATCH = 32
MAX_LENGTH = 64
LR = 2e-5


class RecordingCollator:
    """Wraps the peer's data collator to time its tokenisation and record the padded widths."""

    def __init__(self, inner):
        self.inner, self.seconds, self.widths = inner, [], []

    def __call__(self, features):
        started = time.perf_counter()
        batch = self.inner(features)
        self.seconds.append(time.perf_counter() - started)
        self.widths.extend(int(v.shape[1]) for k, v in batch.items() if k.endswith("input_ids"))
        return batch

    def __getattr__(self, name):
        return getattr(self.inner, name)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--pairs", type=int, help="duplicate pairs per run (default 512 quick / 2048)")
    p.add_argument("--rounds", type=int, default=2, help="runs per side (default 2)")
    p.add_argument("--profile-steps", type=int, help="steps in the timed breakdown (default 4 quick / 8)")
    args = p.parse_args()
    n_pairs = args.pairs or (512 if args.quick else 2048)
    profile_steps = args.profile_steps or (4 if args.quick else 8)
    header("finetune_vs_peer: MiniLM fine-tune, our Trainer vs SentenceTransformerTrainer", args.quick)
    setup_torch()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    for name in ("transformers", "sentence_transformers", "accelerate", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)

    import torch
    from datasets import Dataset, disable_progress_bars
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments)
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers.utils import logging as hf_logging

    from core.losses import in_batch_softmax_loss
    from core.models import MiniLM
    from core.objectives import LossConfig, Objective
    from core.pair_table import PairTable
    from core.tokenizers import minilm_folder
    from core.trainer import TrainConfig, Trainer

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    disable_progress_bars()

    pairs = load_real_pairs(max_rows=20_000)
    duplicates = pairs[pairs["is_duplicate"] == 1].reset_index(drop=True)
    data = duplicates.head(n_pairs)
    warm = duplicates.iloc[n_pairs : n_pairs + 2 * BATCH]
    folder = str(minilm_folder())
    objective = Objective(LossConfig("softmax", scale=20.0))
    config = TrainConfig(epochs=1, batch_size=BATCH, lr=LR, weight_decay=0.0, optimizer="adamw", warmup_ratio=0.1,
                         grad_clip=1.0, seed=SEED, device="cpu", patience=0)
    tmp = tempfile.mkdtemp(prefix="bench_st_")
    facts: dict = {}

    def ours(frame) -> float:
        torch.manual_seed(SEED)
        model = MiniLM.pretrained(max_length=MAX_LENGTH)
        facts["ours attention"] = model.bert.config._attn_implementation
        started = time.perf_counter()
        table = PairTable(frame, model.tokenizer)
        trainer = Trainer(model, objective, table, None, config)
        outcome = trainer.run()
        seconds = time.perf_counter() - started
        if outcome.status != "completed":
            raise SystemExit(f"our run ended {outcome.status}: {outcome.message}")
        facts["ours pairs"], facts["ours steps"] = trainer.pairs_seen, trainer.step
        batches = table.index_batches(objective.batch_kind, BATCH, SEED)
        facts["ours widths"] = [w for rows in batches for w in (int(table.first.lengths[rows].max()),
                                                                 int(table.second.lengths[rows].max()))]
        return seconds

    def peer(frame) -> float:
        model = SentenceTransformer(folder, device="cpu")
        model.max_seq_length = MAX_LENGTH
        facts["peer attention"] = model[0].auto_model.config._attn_implementation
        dataset = Dataset.from_dict({"anchor": frame["question1"].tolist(), "positive": frame["question2"].tolist()})
        training_args = SentenceTransformerTrainingArguments(
            output_dir=tmp, num_train_epochs=1, per_device_train_batch_size=BATCH, learning_rate=LR,
            save_strategy="no", eval_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
            dataloader_num_workers=0, seed=SEED, logging_strategy="no",
        )
        started = time.perf_counter()
        trainer = SentenceTransformerTrainer(model=model, args=training_args, train_dataset=dataset,
                                             loss=MultipleNegativesRankingLoss(model, scale=20.0))
        collator = RecordingCollator(trainer.data_collator)
        trainer.data_collator = collator
        output = trainer.train()
        seconds = time.perf_counter() - started
        facts["peer pairs"], facts["peer steps"] = len(dataset), output.global_step
        inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
        facts["peer optimizer"] = f"{training_args.optim} ({type(inner).__name__}, fused={inner.defaults.get('fused')})"
        facts["peer tokenise s"], facts["peer widths"] = collator.seconds, collator.widths
        facts["peer train_runtime"] = output.metrics.get("train_runtime")
        return seconds

    ours(warm)  # untimed warm-ups: lazy imports, first allocations
    peer(warm)
    times = alternate({"ours": lambda: ours(data), "peer": lambda: peer(data)}, args.rounds)
    ours_pps = facts["ours pairs"] / median(times["ours"])
    peer_pps = facts["peer pairs"] / median(times["peer"])

    report("setup", {
        "duplicate pairs per run": len(data), "batch": BATCH, "max length": MAX_LENGTH, "torch threads": torch.get_num_threads(),
        "ours attention / peer attention": f"{facts['ours attention']} / {facts['peer attention']}",
        "ours steps / pairs seen": f"{facts['ours steps']} / {facts['ours pairs']}",
        "peer steps / pairs": f"{facts['peer steps']} / {facts['peer pairs']}",
        "ours padded width mean (batch max)": sum(facts["ours widths"]) / len(facts["ours widths"]),
        "peer padded width mean (batch max)": sum(facts["peer widths"]) / len(facts["peer widths"]),
        "peer optimizer": facts["peer optimizer"],
    })
    report(f"finetune_vs_peer (alternated, {args.rounds} runs per side)", {
        "ours seconds per run": times["ours"],
        "peer seconds per run": times["peer"],
        "peer train_runtime (its own, last run)": facts["peer train_runtime"],
        "ours pairs/s": ours_pps,
        "peer pairs/s": peer_pps,
        "ratio ours/peer (goal >= 1.0)": ours_pps / peer_pps,
        "peer tokenisation per batch, ms (in its loop)": median(facts["peer tokenise s"]) * 1e3,
    })

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
        v1, v2 = model.embed_pair(batch.first, batch.second)
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
    step_ms = sum(median(v) for v in phases.values()) * 1e3
    breakdown = {f"{name}, ms": median(v) * 1e3 for name, v in phases.items()}
    breakdown["step total (sum of medians), ms"] = step_ms
    breakdown["tokenise all N pairs once (PairTable), s"] = tokenise_s

    # AdamW foreach (ours) vs fused (transformers' default on torch >= 2.8), alternated on the same grads.
    grads = [torch.randn_like(q) * 1e-3 for q in params]
    fused_params = [q.detach().clone().requires_grad_(True) for q in params]
    for q, g in zip(fused_params, grads):
        q.grad = g.clone()
    for q, g in zip(params, grads):
        q.grad = g.clone()
    foreach_opt = torch.optim.AdamW(params, lr=LR)
    fused_opt = torch.optim.AdamW(fused_params, lr=LR, fused=True)
    opt_times = alternate({"foreach": foreach_opt.step, "fused": fused_opt.step}, 6 if args.quick else 12)
    breakdown["AdamW.step foreach, ms"] = median(opt_times["foreach"][1:]) * 1e3
    breakdown["AdamW.step fused, ms"] = median(opt_times["fused"][1:]) * 1e3
    report(f"our step, phase by phase (median of {profile_steps} steps)", breakdown)


if __name__ == "__main__":
    main()
