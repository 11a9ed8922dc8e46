"""The Export panel: one model as a zip of ONNX graphs or a sentence-transformers folder with its model card, written
by ``core.export.export_folder.export_model`` into a temporary folder; the zip stays in the session."""
from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import streamlit as st

from core.model_names import ZERO_SHOT
from lab.session import get_model, model_stamp, show_error

FORMAT_LABELS = {"onnx": "ONNX (onnxruntime; any model)",
                 "sentence-transformers": "sentence-transformers (MiniLM models)"}


def export_name(choice: str, config: dict, fmt: str) -> str:
    """The folder name inside the zip and the zip's name: the model's name and the format, safe as a file name."""
    base = "minilm-zero-shot" if choice == ZERO_SHOT else (Path(str(choice)).name or str(config.get("name", "model")))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{base}-{fmt}").strip(".-")[:120] or f"model-{fmt}"


def export_zip(model, config: dict, fmt: str, name: str, source: str | None = None) -> bytes:
    """The export of ``model`` as ``fmt``, as the bytes of a zip holding one folder ``name``."""
    from core.export.export_folder import export_model

    with tempfile.TemporaryDirectory(prefix="siamese-lab-export-") as temp:
        export_model(model, config, Path(temp) / name, fmt, source=source)
        return Path(shutil.make_archive(str(Path(temp) / name), "zip", temp, name)).read_bytes()


def export_panel(choice: str, config: dict) -> None:
    """The Export section for one model: a format, an **Export** button, then the zip to download."""
    from core.export.formats import ExportError
    from core.export.export_folder import check_export
    from core.saving import OutputError

    model_type = "minilm" if choice == ZERO_SHOT else str(config.get("model_type", ""))
    formats = []
    for fmt in ("onnx", "sentence-transformers"):
        try:
            check_export(model_type, fmt)
            formats.append(fmt)
        except ExportError:
            pass
    st.subheader("Export")  # ONNX takes every model: there is always a format
    fmt = st.radio("Format", formats, format_func=FORMAT_LABELS.get, key="export_format", horizontal=True)
    if "sentence-transformers" not in formats:
        st.caption("The sentence-transformers format is for MiniLM models; ONNX works for every model.")
    st.caption("The zip holds the model, its tokenizer and a model card (README.md) with the threshold, the "
               "held-out metrics and a usage snippet.")
    name = export_name(choice, config, fmt)
    wanted = (str(choice), model_stamp(choice), fmt)  # a new save asks for a new export
    state = st.session_state
    slot = "export_zip"
    if st.button("Export", key="export_build", icon=":material/archive:"):
        state.pop(slot, None)  # one zip per session: the previous one goes first
        with st.spinner(f"Exporting {name}…"):
            try:
                model, loaded = get_model(choice)
                state[slot] = {"for": wanted, "name": name,
                               "data": export_zip(model, loaded, fmt, name, source=str(choice))}
            except (ExportError, OutputError, ValueError, OSError) as error:
                show_error(f"Export failed: {error}")
    built = state.get(slot)
    if built and built["for"] == wanted:
        size = len(built["data"]) / 2**20
        st.download_button(f"Download {built['name']}.zip ({size:,.1f} MiB)", built["data"],
                           file_name=f"{built['name']}.zip", mime="application/zip", key="export_download",
                           icon=":material/download:")
