"""Ways to make MiniLM's ONNX graph faster on this CPU, tried for issue 13, measured side by side.

- **Threads**: two batches at once, each on one onnxruntime thread, on one shared session (what
  ``OnnxEncoder`` does), against one batch at a time on two intra-op threads (what it did before).
- **Operator fusion**: onnxruntime's transformer optimizer (``optimize_model(model_type="bert")``) on the
  exported graph, once as exported (PyTorch's SDPA attention: only SkipLayerNorm and BiasGelu fuse) and
  once exported with eager attention (the attention fuses too). Vectors are compared with the plain graph.
- **The token budget** of an inference batch (``core.models.base.TOKEN_BUDGETS``), 256 to 8,192.

Questions/s of ``OnnxEncoder.encode`` at batch 256 on the first distinct questions of the shared file,
the sides alternating over ``--rounds`` (median). Only the threading is in ``OnnxEncoder``: see BENCHMARKS.

    .venv/bin/python bench/onnx_variants.py [--quick] [--questions 4000] [--rounds 3]
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import (  # noqa: E402
    alternate,
    data_path,
    header,
    median,
    parser,
    report,
    setup_torch,
)

BUDGETS = (256, 512, 1024, 2048, 8192)


def fused_copy(source: Path, target: Path) -> dict:
    """``target``: a copy of the export ``source`` whose graph went through the transformer optimizer;
    returns the fused operators it counted."""
    from onnxruntime.transformers.optimizer import optimize_model

    shutil.copytree(source, target)
    optimized = optimize_model(str(source / "model.onnx"), model_type="bert", num_heads=12, hidden_size=384)
    optimized.save_model_to_file(str(target / "model.onnx"))
    return {name: count for name, count in optimized.get_fused_operator_statistics().items() if count}


def intra_op_encoder(folder: Path, threads: int):
    """An ``OnnxEncoder`` that runs one batch at a time, on one session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    from core.export.onnx_backend import OnnxEncoder

    encoder = OnnxEncoder(folder, threads=1)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
    encoder._sessions = [session, session]
    return encoder


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--questions", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    header("onnx_variants: operator fusion and token budgets for MiniLM on onnxruntime", args.quick)
    import numpy as np
    import pandas as pd

    import core.export.onnx_backend as onnx_backend
    from core.export.export_folder import export_model
    from core.export.onnx_backend import OnnxEncoder
    from core.models import load_model

    setup_torch()
    n = 500 if args.quick else args.questions
    frame = pd.read_csv(data_path(), sep="\t", keep_default_na=False, nrows=n)
    texts = list(dict.fromkeys(frame["question1"].tolist() + frame["question2"].tolist()))[:n]
    work = Path(tempfile.mkdtemp(prefix="onnx-variants-"))
    try:
        model, config = load_model("minilm")
        export_model(model, config, work / "plain", "onnx")
        fused = {"fused (SDPA export)": fused_copy(work / "plain", work / "fused")}
        model.bert.set_attn_implementation("eager")  # the attention pattern the optimizer recognises
        export_model(model, config, work / "eager", "onnx")
        fused["fused (eager export)"] = fused_copy(work / "eager", work / "eager-fused")
        encoders = {"plain": OnnxEncoder(work / "plain", threads=2),
                    "fused (SDPA export)": OnnxEncoder(work / "fused", threads=2),
                    "fused (eager export)": OnnxEncoder(work / "eager-fused", threads=2)}
        reference = encoders["plain"].encode(texts[:300]).numpy()

        one_batch = intra_op_encoder(work / "plain", threads=2)
        difference = np.abs(one_batch.encode(texts[:300]).numpy() - reference).max()
        times = alternate({"two batches at once, one thread each": lambda: encoders["plain"].encode(texts),
                           "one batch at a time on two intra-op threads": lambda: one_batch.encode(texts)},
                          args.rounds)
        figures = {f"{name}: questions/s": len(texts) / median(seconds) for name, seconds in times.items()}
        figures["ratio"] = median(times["one batch at a time on two intra-op threads"]) / \
            median(times["two batches at once, one thread each"])
        figures["largest vector difference"] = float(difference)
        report(f"threads, {len(texts):,} questions", figures)

        figures = {}
        for name in fused:
            difference = np.abs(encoders[name].encode(texts[:300]).numpy() - reference).max()
            figures[f"{name}: fused operators"] = ", ".join(f"{k} {v}" for k, v in fused[name].items())
            figures[f"{name}: largest vector difference to plain"] = float(difference)
        times = alternate({name: (lambda e=encoder: e.encode(texts, batch_size=256)) for name, encoder in
                           encoders.items()}, args.rounds)
        figures.update({f"{name}: questions/s": len(texts) / median(seconds) for name, seconds in times.items()})
        report(f"operator fusion, {len(texts):,} questions", figures)

        plain, budget = encoders["plain"], onnx_backend.TOKEN_BUDGETS["minilm"]

        def at(tokens):
            def run():
                onnx_backend.TOKEN_BUDGETS["minilm"] = tokens
                plain.encode(texts, batch_size=256)
            return run

        try:
            times = alternate({f"{tokens:,} tokens": at(tokens) for tokens in BUDGETS}, args.rounds)
        finally:
            onnx_backend.TOKEN_BUDGETS["minilm"] = budget
        report(f"token budget per batch (now {budget:,}), questions/s",
               {name: len(texts) / median(seconds) for name, seconds in times.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
