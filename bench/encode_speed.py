"""Encoding speed: our MiniLM.encode vs SentenceTransformer.encode on the same real questions, side by side.

Both encode the same distinct Quora questions with all-MiniLM-L6-v2 (loaded offline), max length 64,
at batch sizes 64 and 256, 2 torch threads. Ours: `MiniLM.pretrained(max_length=64).encode(texts,
batch_size=b)`; theirs: `SentenceTransformer(folder).encode(texts, batch_size=b, convert_to_tensor=True)`
with `max_seq_length = 64`. Both tokenise inside the call. The questions are cut into chunks and
every chunk is encoded by both sides in turn (the order flips every chunk); questions/s is the
median over chunks, the ratio the median of the per-chunk ratios. The vectors of both sides are
compared (max abs difference). Also: the Siamese LSTM (hidden 128, fresh word vocabulary built
with core.models.build_model on the same rows), whose encode runs the Python word tokenizer.

    .venv/bin/python bench/encode_speed.py --quick     # 2,000 questions in 4 chunks
    .venv/bin/python bench/encode_speed.py             # 20,000 questions in 8 chunks
"""
from __future__ import annotations

import os
import time
import warnings

try:
    from bench.common import header, load_real_pairs, median, parser, report, setup_torch
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import header, load_real_pairs, median, parser, report, setup_torch

MAX_LENGTH = 64
BATCH_SIZES = (64, 256)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--questions", type=int, help="distinct questions (default 2,000 quick / 20,000)")
    p.add_argument("--chunks", type=int, help="alternation chunks (default 4 quick / 8)")
    args = p.parse_args()
    n = args.questions or (2_000 if args.quick else 20_000)
    chunks = args.chunks or (4 if args.quick else 8)
    header("encode_speed: MiniLM.encode vs SentenceTransformer.encode", args.quick)
    setup_torch()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")

    import pandas as pd
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    from core.models import MiniLM, build_model
    from core.specs import spec_from_options
    from core.tokenizers import minilm_folder

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

    def ours(chunk, batch):
        return ours_model.encode(chunk, batch_size=batch)

    def peer(chunk, batch):
        return peer_model.encode(chunk, batch_size=batch, convert_to_tensor=True, show_progress_bar=False)

    # Untimed warm-up, and the vector check on the first chunk.
    ours(parts[0][:64], 64)
    peer(parts[0][:64], 64)
    check = parts[0][:500]
    max_diff = float((ours(check, 64) - peer(check, 64).cpu()).abs().max())

    rates = {(side, b): [] for side in ("ours", "peer") for b in BATCH_SIZES}
    lstm_rates, lstm_tokenise, lstm_model = [], [], []
    for index, chunk in enumerate(parts):
        for b in BATCH_SIZES:
            order = (("ours", ours), ("peer", peer)) if index % 2 == 0 else (("peer", peer), ("ours", ours))
            for side, encode in order:
                started = time.perf_counter()
                encode(chunk, b)
                rates[(side, b)].append(len(chunk) / (time.perf_counter() - started))
        started = time.perf_counter()
        table = lstm.tokenizer.encode(chunk)
        tokenised = time.perf_counter()
        lstm.encode_table(table, batch_size=256)
        done = time.perf_counter()
        lstm_rates.append(len(chunk) / (done - started))
        lstm_tokenise.append(len(chunk) / (tokenised - started))
        lstm_model.append(len(chunk) / (done - tokenised))

    figures = {"questions": n, "chunks (alternated, order flips)": len(parts), "max length": MAX_LENGTH,
               "torch threads": torch.get_num_threads(),
               "max |ours - peer| over 500 vectors": max_diff}
    for b in BATCH_SIZES:
        ours_r, peer_r = rates[("ours", b)], rates[("peer", b)]
        figures[f"batch {b}: ours q/s"] = median(ours_r)
        figures[f"batch {b}: peer q/s"] = median(peer_r)
        figures[f"batch {b}: ratio ours/peer (goal >= 1.0)"] = median([a / c for a, c in zip(ours_r, peer_r)])
    report("MiniLM encode (median over chunks)", figures)
    report("Siamese LSTM encode, batch 256 (median over chunks)", {
        "vocab size": lstm.tokenizer.vocab_size,
        "questions/s, encode(texts) end to end": median(lstm_rates),
        "questions/s, word tokenizer alone": median(lstm_tokenise),
        "questions/s, encode_table alone (the network)": median(lstm_model),
    })


if __name__ == "__main__":
    main()
