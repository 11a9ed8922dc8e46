"""``python -m core export``, and ``--backend {torch,onnx}`` of predict / score / dedup / embed / search.

``add_parsers(sub, model_command)`` adds the ``export`` command (``core.cli.build_parser`` calls it);
``add_backend_option(command)`` adds ``--backend`` to a command; ``load_backend(args, load_model)`` is
what such a command loads: ``load_model(args.model, args.device)`` for torch, else
``core.export.onnx_backend.onnx_model`` (the exported graph run by onnxruntime on the CPU).
Every expected failure is a ``core.cli.CliError``: one ``error: ...`` line, exit status 2.
"""
from __future__ import annotations

from pathlib import Path

from core.cli import CliError, _print_json
from core.export.export_model import EXPORT_FORMATS, QUANTIZE_CHOICES

BACKENDS = ("torch", "onnx")


def add_parsers(sub, model_command) -> None:
    export = model_command(sub, "export", "write a model as a sentence-transformers folder or ONNX graphs, "
                                          "with a model card", cmd_export)
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                        help="sentence-transformers (MiniLM models): a folder SentenceTransformer(DIR) loads; "
                             "onnx (every model): model.onnx (+ model_tower1.onnx for a dual encoder's second "
                             "tower) and tokenizer.json")
    export.add_argument("--out", required=True,
                        help="output folder: a new or empty folder, or an earlier export with --overwrite")
    export.add_argument("--overwrite", action="store_true",
                        help="replace the earlier export in --out (a saved model or other files are never replaced)")
    export.add_argument("--quantize", choices=QUANTIZE_CHOICES, default=None,
                        help="onnx only: dynamic int8 quantisation of the weights (smaller and faster; the vectors "
                             "differ a little, so recalibrate the threshold)")


def add_backend_option(command) -> None:
    command.add_argument("--backend", choices=BACKENDS, default="torch",
                         help="torch: the PyTorch model; onnx: its ONNX graph run by onnxruntime on the CPU "
                              "(exported on first use to <model>/onnx/, for minilm to <runs>/.cache/minilm/onnx/; "
                              "--model may also be an ONNX export folder)")


def load_backend(args, load_model):
    """(model, config) for ``args.model`` on ``args.backend``; ``load_model`` is the torch loader
    (``core.cli._load_model``)."""
    if getattr(args, "backend", "torch") != "onnx":
        return load_model(args.model, args.device)
    if args.device == "cuda":
        raise CliError("--backend onnx runs on the CPU; drop --device cuda")
    from core.export.export_model import ExportError
    from core.export.onnx_backend import OnnxBackendError, onnx_model
    from core.saving import ModelLoadError

    try:
        return onnx_model(args.model, cache_root=getattr(args, "runs", None))
    except (OnnxBackendError, ExportError, ModelLoadError) as error:
        raise CliError(str(error)) from None


def cmd_export(args) -> int:
    from core.export.export_model import ExportError, check_export, export_model
    from core.models import ZERO_SHOT
    from core.saving import ModelLoadError, OutputError, read_config

    # The format is checked against the model's family before any weights are read.
    try:
        model_type = "minilm" if args.model == ZERO_SHOT else read_config(args.model)["model_type"]
        check_export(model_type, args.format, args.quantize)
    except (ModelLoadError, ExportError) as error:
        raise CliError(str(error)) from None
    from core.cli import _load_model

    model, config = _load_model(args.model, args.device)
    try:
        manifest = export_model(model, config, args.out, args.format, overwrite=args.overwrite,
                                quantize=args.quantize, source=args.model)
    except OutputError as error:
        hint = "; add --overwrite to replace it" if error.reason == "model_exists" else ""
        problem = error.problem.replace("; replacing it needs overwrite", "")
        raise CliError(f"--out {error.path}: {problem}{hint}") from None
    except ExportError as error:
        raise CliError(str(error)) from None
    out = Path(args.out).expanduser()
    _print_json({"folder": str(out), "format": args.format, "model_type": manifest["model_type"],
                 "threshold": manifest["threshold"], "quantization": manifest.get("quantization"),
                 "max_abs_diff_vs_pytorch": manifest["check"]["max_abs_diff_vs_pytorch"],
                 "files": sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())})
    return 0
