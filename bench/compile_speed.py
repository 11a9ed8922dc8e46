"""torch.compile on CPU for MiniLM fine-tuning: training pairs/s, eager against compiled, side by side.

Issue 14 asks whether ``torch.compile`` (the Inductor backend, C++ kernels on CPU) raises the pairs/s
of a MiniLM step, since on a 2-core machine speed is quality. Both sides start from the same weights,
see the same real Quora batches (64 labelled pairs, length-bucketed, at most 40 tokens, as the
``minilm-quora`` preset trains) and do the same step: both towers, the contrastive loss, backward,
clipping, fused AdamW. The compiled side compiles ``model.bert`` with ``dynamic=True`` (the batch
lengths vary) and is warmed up first; its compile time is reported on its own. Then the sides
alternate, ``--block`` steps each per round, and pairs/s are the medians over rounds.
Also printed: the loss of the same first batch on both sides (they must agree), and whether the
compiled model recompiled during the timed steps.

    .venv/bin/python bench/compile_speed.py --quick
    .venv/bin/python bench/compile_speed.py
"""
from __future__ import annotations

import copy
import time

try:
    from bench.common import (
        header,
        load_real_pairs,
        median,
        parser,
        report,
        setup_torch,
    )
except ModuleNotFoundError:  # run as a script
    from common import header, load_real_pairs, median, parser, report, setup_torch


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rounds", type=int, default=4, help="timed rounds per side")
    p.add_argument("--block", type=int, default=8, help="steps per side per round")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    rounds, block = (2, 3) if args.quick else (args.rounds, args.block)
    setup_torch(args.threads)
    import torch

    from core.losses import contrastive_loss
    from core.models import MiniLM
    from core.text.pair_table import PairTable

    header("torch.compile for MiniLM training steps (CPU)", args.quick)
    pairs = load_real_pairs(max_rows=4000)
    eager = MiniLM.pretrained(max_length=40)
    table = PairTable(pairs, eager.tokenizer)
    batches = [table.batch(rows) for rows in table.index_batches("labelled", 64, seed=0, length_buckets=True)]
    warm, timed = batches[:6], batches[6 : 6 + rounds * block]

    compiled = copy.deepcopy(eager)
    compiled.bert = torch.compile(compiled.bert, dynamic=True)
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=2e-5, fused=True)
                  for name, m in (("eager", eager), ("compiled", compiled))}
    models = {"eager": eager, "compiled": compiled}

    def step(name: str, batch) -> float:
        model = models[name]
        v1, v2, _ = model(batch.first, batch.second)
        loss = contrastive_loss(v1, v2, batch.labels)
        optimizers[name].zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizers[name].step()
        return float(loss.detach())

    first_loss = {}
    with torch.no_grad():  # the same weights and batch, no dropout: the same loss, up to kernel rounding
        for name, model in models.items():
            model.eval()
            first_loss[name] = float(contrastive_loss(*model(warm[0].first, warm[0].second)[:2], warm[0].labels))
            model.train()
    started = time.perf_counter()
    for batch in warm:
        step("compiled", batch)
    compile_seconds = time.perf_counter() - started
    for batch in warm:
        step("eager", batch)

    import torch._dynamo.utils as dynamo_utils

    frames_before = dynamo_utils.counters["stats"]["unique_graphs"]
    seconds = {"eager": [], "compiled": []}
    pairs_per_round = {"eager": [], "compiled": []}
    for r in range(rounds):
        chunk = timed[r * block : (r + 1) * block]
        for name in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
            started = time.perf_counter()
            for batch in chunk:
                step(name, batch)
            seconds[name].append(time.perf_counter() - started)
            pairs_per_round[name].append(sum(len(b) for b in chunk) / seconds[name][-1])
    eager_rate, compiled_rate = median(pairs_per_round["eager"]), median(pairs_per_round["compiled"])
    report("MiniLM training step, batch 64, contrastive", {
        "timed steps per side": rounds * block,
        "eager pairs/s (median of rounds)": eager_rate,
        "compiled pairs/s (median of rounds)": compiled_rate,
        "compiled / eager": compiled_rate / eager_rate,
        "compile + warm-up (6 steps), s": compile_seconds,
        "graphs compiled during the timed steps": dynamo_utils.counters["stats"]["unique_graphs"] - frames_before,
        "first-batch loss (eval mode), eager": first_loss["eager"],
        "first-batch loss (eval mode), |compiled - eager|": abs(first_loss["compiled"] - first_loss["eager"]),
        "per-round pairs/s, eager": pairs_per_round["eager"],
        "per-round pairs/s, compiled": pairs_per_round["compiled"],
    })


if __name__ == "__main__":
    main()
