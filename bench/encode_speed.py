"""Encoding speed: our MiniLM.encode vs SentenceTransformer.encode vs the ONNX export, on the same real questions.

All encode the same distinct Quora questions with all-MiniLM-L6-v2 (loaded offline), max length 64,
at batch sizes 32 (sentence-transformers' default) and 256 (ours; our transformer batches are also cut at
1,024 padded tokens, ``core.models.base``, theirs are not), 2 torch threads (and 2 onnxruntime batches at once, one thread each). Ours:
`MiniLM.pretrained(max_length=64).encode(texts, batch_size=b)`; theirs: `SentenceTransformer(folder).encode(texts,
batch_size=b, convert_to_tensor=True)` with `max_seq_length = 64`; ONNX: the same model exported by
`core.export.export_folder.write_export` (`python -m core export --format onnx`) and run by `core.export.onnx_backend.OnnxEncoder.encode`
(onnxruntime on the CPU, the Rust tokenizer of its tokenizer.json, same longest-first batching). All
tokenise inside the call. The questions are cut into chunks and every chunk is encoded by every side
in turn (the order rotates every chunk); questions/s is the median over chunks, a ratio the median of
the per-chunk ratios. The vectors are compared on the first chunk's first 500 questions (max abs
difference; the ONNX ones must be within 1e-4 of both). int8 (`--quantize int8`: dynamic, per-channel
int8 weights) is timed in the same rotation but reported separately, with its own difference and lowest
cosine to the float vectors.
Also: the Siamese LSTM (hidden 128, fresh word vocabulary built with core.models.build_model on the
same rows), whose encode runs the Python word tokenizer.

    .venv/bin/python bench/encode_speed.py --quick     # 2,000 questions in 4 chunks
    .venv/bin/python bench/encode_speed.py             # 20,000 questions in 8 chunks
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

try:
    from bench.common import (
        header,
        load_real_pairs,
        median,
        parser,
        report,
        setup_torch,
    )
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import header, load_real_pairs, median, parser, report, setup_torch

MAX_LENGTH = 64
BATCH_SIZES = (32, 256)
ONNX_TOLERANCE = 1e-4


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--questions", type=int, help="distinct questions (default 2,000 quick / 20,000)")
    p.add_argument("--chunks", type=int, help="alternation chunks (default 4 quick / 8)")
    args = p.parse_args()
    n = args.questions or (2_000 if args.quick else 20_000)
    chunks = args.chunks or (4 if args.quick else 8)
    header("encode_speed: MiniLM.encode vs SentenceTransformer.encode vs ONNX Runtime", args.quick)
    setup_torch()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")

    import pandas as pd
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    from core.export.export_folder import write_export
    from core.export.onnx_backend import OnnxEncoder
    from core.models import MiniLM, build_model
    from core.models.registry import zero_shot_config
    from core.text.wordpiece_tokenizer import minilm_folder
    from core.training.specs import spec_from_options

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    pairs = load_real_pairs(max_rows=max(10_000, n))  # ~1.6 distinct questions per row
    texts = pd.unique(pd.concat([pairs["question1"], pairs["question2"]]).to_numpy())[:n].tolist()
    if len(texts) < n:
        raise SystemExit(f"only {len(texts)} distinct questions in the loaded rows")
    size = -(-n // chunks)
    parts = [texts[i : i + size] for i in range(0, n, size)]

    ours_model = MiniLM.pretrained(max_length=MAX_LENGTH)
    peer_model = SentenceTransformer(str(minilm_folder()), device="cpu")
    peer_model.max_seq_length = MAX_LENGTH
    torch.manual_seed(0)
    train_texts = pd.concat([pairs["question1"], pairs["question2"]]).tolist()  # the LSTM's word vocabulary
    lstm = build_model(spec_from_options(model="lstm", model_options=dict(embedding_dim=128, hidden_size=128)),
                       train_texts).eval()

    # The ONNX exports (float32 and int8) of the very model `ours` runs, into a temporary folder.
    exports = Path(tempfile.mkdtemp(prefix="encode-speed-onnx-"))
    started = time.perf_counter()
    for name, quantize in (("fp32", None), ("int8", "int8")):
        (exports / name).mkdir()
        write_export(ours_model, zero_shot_config(), exports / name, "onnx", quantize=quantize)
    export_seconds = time.perf_counter() - started
    onnx_fp32 = OnnxEncoder(exports / "fp32", threads=torch.get_num_threads())
    onnx_int8 = OnnxEncoder(exports / "int8", threads=torch.get_num_threads())

    def ours(chunk, batch):
        return ours_model.encode(chunk, batch_size=batch)

    def peer(chunk, batch):
        return peer_model.encode(chunk, batch_size=batch, convert_to_tensor=True, show_progress_bar=False)

    def onnx(chunk, batch):
        return onnx_fp32.encode(chunk, batch_size=batch)

    def int8(chunk, batch):
        return onnx_int8.encode(chunk, batch_size=batch)

    sides = {"ours": ours, "peer": peer, "onnx": onnx, "int8": int8}
    # Untimed warm-up, and the vector check on the first chunk.
    for encode in sides.values():
        encode(parts[0][:64], 64)
    check = parts[0][:500]
    vectors = {side: encode(check, 64).cpu() for side, encode in sides.items()}
    max_diff = float((vectors["ours"] - vectors["peer"]).abs().max())
    onnx_diff = {other: float((vectors["onnx"] - vectors[other]).abs().max()) for other in ("ours", "peer")}
    int8_diff = float((vectors["int8"] - vectors["ours"]).abs().max())
    int8_cosine = float(torch.nn.functional.cosine_similarity(vectors["int8"], vectors["ours"], dim=-1).min())

    rates = {(side, b): [] for side in sides for b in BATCH_SIZES}
    lstm_rates, lstm_tokenise, lstm_model = [], [], []
    names = list(sides)
    for index, chunk in enumerate(parts):
        for b in BATCH_SIZES:
            order = names[index % len(names):] + names[: index % len(names)]  # rotates every chunk
            for side in order:
                started = time.perf_counter()
                sides[side](chunk, b)
                rates[(side, b)].append(len(chunk) / (time.perf_counter() - started))
        started = time.perf_counter()
        table = lstm.tokenizer.encode(chunk)
        tokenised = time.perf_counter()
        lstm.encode_table(table, batch_size=256)
        done = time.perf_counter()
        lstm_rates.append(len(chunk) / (done - started))
        lstm_tokenise.append(len(chunk) / (tokenised - started))
        lstm_model.append(len(chunk) / (done - tokenised))

    figures = {"questions": n, "chunks (order rotates)": len(parts), "max length": MAX_LENGTH,
               "torch threads": torch.get_num_threads(), "onnxruntime batches at once": torch.get_num_threads(),
               f"max |ours - peer| over {len(check)} vectors": max_diff,
               f"max |onnx - ours| over {len(check)} vectors": onnx_diff["ours"],
               f"max |onnx - peer| over {len(check)} vectors": onnx_diff["peer"],
               f"onnx vectors within {ONNX_TOLERANCE:g} of both": max(onnx_diff.values()) <= ONNX_TOLERANCE}
    for b in BATCH_SIZES:
        ours_r, peer_r, onnx_r = rates[("ours", b)], rates[("peer", b)], rates[("onnx", b)]
        figures[f"batch {b}: ours q/s"] = median(ours_r)
        figures[f"batch {b}: peer q/s"] = median(peer_r)
        figures[f"batch {b}: onnx q/s"] = median(onnx_r)
        figures[f"batch {b}: ratio ours/peer (goal >= 1.0)"] = median([a / c for a, c in zip(ours_r, peer_r)])
        figures[f"batch {b}: ratio onnx/peer"] = median([a / c for a, c in zip(onnx_r, peer_r)])
        figures[f"batch {b}: ratio onnx/ours"] = median([a / c for a, c in zip(onnx_r, ours_r)])
    report("MiniLM encode (median over chunks)", figures)
    report("Compute: useful GFLOP/s against this CPU's matrix-product peak", compute_ceiling(
        ours_model, onnx_fp32, parts, {(side, b): rates[(side, b)] for side in ("peer", "onnx") for b in BATCH_SIZES}))
    int8_figures = {"export seconds (fp32 + int8, untimed above)": export_seconds,
                    f"max |int8 - ours| over {len(check)} vectors": int8_diff,
                    f"lowest cosine(int8, ours) over {len(check)} questions": int8_cosine}
    for b in BATCH_SIZES:
        int8_r, onnx_r, peer_r = rates[("int8", b)], rates[("onnx", b)], rates[("peer", b)]
        int8_figures[f"batch {b}: int8 q/s"] = median(int8_r)
        int8_figures[f"batch {b}: ratio int8/onnx"] = median([a / c for a, c in zip(int8_r, onnx_r)])
        int8_figures[f"batch {b}: ratio int8/peer"] = median([a / c for a, c in zip(int8_r, peer_r)])
    report("MiniLM ONNX int8 (dynamic quantisation; not the same vectors: reported apart)", int8_figures)
    shutil.rmtree(exports, ignore_errors=True)
    report("Siamese LSTM encode, batch 256 (median over chunks)", {
        "vocab size": lstm.tokenizer.vocab_size,
        "questions/s, encode(texts) end to end": median(lstm_rates),
        "questions/s, word tokenizer alone": median(lstm_tokenise),
        "questions/s, encode_table alone (the network)": median(lstm_model),
    })


def gemm_peak_gflops(rounds: int = 20) -> float:
    """The best float32 matrix product rate torch reaches on all its threads, GFLOP/s: a (4096, 384) x
    (384, 1536) product, MiniLM's feed-forward shape, big enough to keep every thread busy."""
    import torch

    a, b = torch.randn(4096, 384), torch.randn(384, 1536)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * 4096 * 384 * 1536 / best / 1e9


def compute_ceiling(model, onnx_encoder, parts, rates) -> dict:
    """Useful float work per question (the linear layers, 2 FLOPs per weight per token, and attention's
    two T x T products, padding not counted) times questions/s, against the matrix-product peak: how
    far from this CPU's ceiling each side runs, and what a ratio to the peer would need."""
    import torch

    encoder = model.bert.encoder
    weights = sum(m.weight.numel() for m in encoder.modules() if isinstance(m, torch.nn.Linear))
    layers, width = len(encoder.layer), model.bert.config.hidden_size
    per_chunk = []
    for chunk in parts:
        lengths = [len(row) for row in onnx_encoder.token_rows(chunk)]
        per_chunk.append(sum(2 * weights * t + layers * 4 * t * t * width for t in lengths) / len(chunk))
    flops = median(per_chunk)  # per question
    peak = gemm_peak_gflops()
    figures = {"useful MFLOP per question (median over chunks)": flops / 1e6,
               "matrix-product peak GFLOP/s (torch, all threads)": peak}
    for (side, b), side_rates in rates.items():
        gflops = median(side_rates) * flops / 1e9
        figures[f"batch {b}: {side} GFLOP/s (share of peak)"] = f"{gflops:.1f} ({gflops / peak:.0%})"
    peer_best = max(median(rates[("peer", b)]) for b in BATCH_SIZES)
    figures["the peer's best batch, 2x: GFLOP/s needed (share of peak)"] = \
        f"{2 * peer_best * flops / 1e9:.1f} ({2 * peer_best * flops / 1e9 / peak:.0%})"
    return figures


if __name__ == "__main__":
    main()
