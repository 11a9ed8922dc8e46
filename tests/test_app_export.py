"""The Export panel (lab.export_view.export_panel), through the one-panel page tests/apps/export_panel_app.py:
the formats a model can take, Export, and a zip whose folder runs on onnxruntime like the model runs on torch."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.export.onnx_backend import OnnxEncoder
from core.models import ZERO_SHOT, load_model

PAGE = str(Path(__file__).resolve().parent / "apps" / "export_panel_app.py")


def new_app(choice) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["export_test_choice"] = str(choice)
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_saved_lstm_exports_to_an_onnx_zip(tiny_models, tmp_path, download_stores):
    stores = download_stores
    folder = tiny_models["lstm"]
    at = new_app(folder)
    assert at.radio(key="export_format").options == ["ONNX (onnxruntime; any model)"]
    assert any("MiniLM models" in caption.value for caption in at.caption)
    assert not at.get("download_button")  # nothing is built before Export is pressed
    at.button(key="export_build").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    [button] = at.get("download_button")
    name = f"{folder.name}-onnx"
    assert button.proto.label.startswith(f"Download {name}.zip")
    data = stores[-1].get_file(button.proto.url.rsplit("/", 1)[-1]).content
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert sorted(n for n in archive.namelist() if not n.endswith("/")) == [f"{name}/{file}" for file in
                                              (".siamese_lab_files.json", "README.md", "model.onnx",
                                               "siamese_lab.json", "tokenizer.json")]
        archive.extractall(tmp_path)
    manifest = json.loads((tmp_path / name / "siamese_lab.json").read_text())
    model, config = load_model(folder)
    assert manifest["threshold"] == config["thresholds"]["accuracy"]
    assert f"MODEL_DIR = \"{name}\"" in (tmp_path / name / "README.md").read_text()
    texts = ["How do I learn Python?", "", "Why don't cats like water?"]
    assert float((OnnxEncoder(tmp_path / name).encode(texts) - model.encode(texts)).abs().max()) <= 1e-4
    at.run()  # the zip stays while the model and the format stay
    assert len(at.get("download_button")) == 1


def test_minilm_offers_both_formats_and_a_dual_encoder_only_onnx(tiny_models):
    at = new_app(ZERO_SHOT)
    assert at.radio(key="export_format").options == ["ONNX (onnxruntime; any model)",
                                                      "sentence-transformers (MiniLM models)"]
    at = new_app(tiny_models["dual-transformer"])
    assert at.radio(key="export_format").options == ["ONNX (onnxruntime; any model)"]
