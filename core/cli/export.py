"""``python -m core export``: a model written as a sentence-transformers folder or ONNX graphs, with a model card."""
from __future__ import annotations

from pathlib import Path

from core.cli.common import add_output_options, load_model, model_command, print_json, refuse_without_vectors
from core.export.export_folder import EXPORT_FORMATS, QUANTIZE_CHOICES


def add_parsers(sub) -> None:
    export = model_command(sub, "export", "write a model as a sentence-transformers folder or ONNX graphs, "
                                          "with a model card", cmd_export)
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                        help="sentence-transformers (MiniLM models): a folder SentenceTransformer(DIR) loads; "
                             "onnx (every model): model.onnx (+ model_tower1.onnx for a dual encoder's second "
                             "tower) and tokenizer.json")
    add_output_options(export, help="output folder: a new or empty folder, or an earlier export with --overwrite",
                       overwrite="replace the earlier export in --out (a saved model or other files never are)")
    export.add_argument("--quantize", choices=QUANTIZE_CHOICES, default=None,
                        help="onnx only: dynamic int8 quantisation of the weights (smaller and faster; the vectors "
                             "differ a little, so recalibrate the threshold)")


def cmd_export(args) -> int:
    from core.export.export_folder import check_export, export_files, export_model
    from core.models import ZERO_SHOT
    from core.saving import read_config

    refuse_without_vectors(args.model, vectors=False)
    # The format is checked against the model's family before any weights are read.
    model_type = "minilm" if args.model == ZERO_SHOT else read_config(args.model)["model_type"]
    check_export(model_type, args.format, args.quantize)
    model, config = load_model(args.model, args.device, vectors=False)  # a cross-encoder exports as onnx
    manifest = export_model(model, config, args.out, args.format, overwrite=args.overwrite, quantize=args.quantize,
                            source=args.model)
    out = Path(args.out).expanduser()
    print_json({"folder": str(out), "format": args.format, "model_type": manifest["model_type"],
                "threshold": manifest["threshold"], "quantization": manifest.get("quantization"),
                "max_abs_diff_vs_pytorch": manifest["check"]["max_abs_diff_vs_pytorch"],
                "files": export_files(out)})
    return 0
