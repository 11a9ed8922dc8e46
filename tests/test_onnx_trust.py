"""The ONNX backend runs only the lab's own exports, and ``--backend onnx`` writes only into the lab's cache.

* Every family's export, float32 and int8, gives the PyTorch model's vectors.
* An export runs only when its graphs and tokenizer have the sha256 its manifest records: a folder from
  elsewhere (no hashes), one byte of a graph changed, or another tokenizer, is refused in one ``error:`` line
  with exit 2; a changed entry in the lab's cache is exported again over.
* A user's ``M/onnx/`` (notes, an int8 export) survives ``predict --backend onnx`` byte-identical, never run.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from core.export.export_folder import export_model
from core.export.manifest import FILE_HASHES, MANIFEST_FILE
from core.export.onnx_backend import OnnxBackendError, OnnxEncoder, cache_entry
from core.models import ZERO_SHOT, load_model
from core.text.word_tokenizer import WordTokenizer
from conftest import run_cli, snapshot

pytestmark = pytest.mark.slow

TEXTS = ["How do I learn Python?", "", "Why don't cats like water???", "Café ΟΔΟΣ 😀 日本 42?",
         " ".join(["x"] * 90)]
PAIR = ("How do I learn Python?", "What is the best way to learn Python?")


def torch_similarity(folder: Path, first: str, second: str) -> float:
    model, _ = load_model(folder)
    return float(model.score_pairs([first], [second])[0])


def assert_exports_give_the_models_vectors(model, config, root: Path, name: str) -> None:
    """Export ``model`` float32 and int8: float32 within 1e-4 of the model's vectors, int8 pointing the same way."""
    want = torch.nn.functional.normalize(model.encode(TEXTS, tower=1), dim=-1)
    for quantize in (None, "int8"):
        folder = root / f"{name}-{quantize or 'fp32'}"
        export_model(model, config, folder, "onnx", quantize=quantize)
        got = OnnxEncoder(folder).encode(TEXTS, tower=1)
        if quantize is None:
            assert float((got - want).abs().max()) <= 1e-4, name
        else:
            assert float(torch.nn.functional.cosine_similarity(got, want).min()) > 0.9, name


def test_every_small_family_exports_and_runs(tiny_models, sample_pairs, tmp_path):
    from core.models.dual_encoder import DualEncoder, DualEncoderConfig
    from core.models.siamese_lstm import SiameseLSTM, SiameseLSTMConfig
    from core.text.wordpiece_tokenizer import bert_wordpiece

    pairs, _ = sample_pairs
    words = WordTokenizer.build(pairs["question1"].tolist(), min_freq=1, max_length=20)
    wordpiece = bert_wordpiece(max_length=20)
    torch.manual_seed(0)
    models = {name: load_model(folder)[0] for name, folder in tiny_models.items()}
    models["lstm-bi-max"] = SiameseLSTM(SiameseLSTMConfig(vocab_size=words.vocab_size, embedding_dim=5, hidden_size=7,
                                                          num_layers=2, bidirectional=True, pooling="max"), words)
    models["lstm-wordpiece"] = SiameseLSTM(SiameseLSTMConfig(
        vocab_size=wordpiece.vocab_size, embedding_dim=6, hidden_size=9, bidirectional=True, tokens="wordpiece",
        pooling="mean+max"), wordpiece)
    models["dual-shared"] = DualEncoder(DualEncoderConfig(vocab_size=wordpiece.vocab_size, d_model=16, num_heads=2,
                                                          num_layers=2, ff_dim=24, max_length=20, projection_dim=8,
                                                          share_towers=True), wordpiece)
    for name, model in models.items():
        assert_exports_give_the_models_vectors(model.eval(), {"thresholds": {"accuracy": 0.5}}, tmp_path, name)


def test_zero_shot_minilm_exports_and_runs(tmp_path):
    model, config = load_model(ZERO_SHOT)
    assert_exports_give_the_models_vectors(model, config, tmp_path, "minilm")


def _no_hashes(folder: Path) -> None:
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    del manifest[FILE_HASHES]
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def _one_graph_byte(folder: Path) -> None:
    data = bytearray((folder / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 1
    (folder / "model.onnx").write_bytes(bytes(data))


def _another_tokenizer(folder: Path) -> None:
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["added_tokens"] = [*tokenizer.get("added_tokens", []), {
        "id": 10**6, "content": "[NEW]", "single_word": False, "lstrip": False, "rstrip": False,
        "normalized": False, "special": True}]
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))


@pytest.mark.parametrize("change", [_no_hashes, _one_graph_byte, _another_tokenizer])
def test_an_export_the_lab_did_not_write_as_it_is_is_refused_in_one_line(tiny_models, tmp_path, capsys, change):
    model, config = load_model(tiny_models["lstm"])
    folder = tmp_path / "export"
    export_model(model, config, folder, "onnx")
    assert run_cli(capsys, "predict", "--backend", "onnx", "--model", folder, *PAIR)[0] == 0
    change(folder)
    before = snapshot(folder)
    code, out, err = run_cli(capsys, "predict", "--backend", "onnx", "--model", folder, *PAIR)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: ") and "not an ONNX export this lab wrote" in lines[0]
    assert snapshot(folder) == before


def test_a_changed_cache_entry_is_exported_again_over(tiny_models, tmp_path, capsys, monkeypatch):
    folder = Path(shutil.copytree(tiny_models["lstm"], tmp_path / "M"))
    monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path / "cache"))
    assert run_cli(capsys, "predict", "--backend", "onnx", "--model", folder, *PAIR)[0] == 0
    entry, _ = cache_entry(folder)
    _one_graph_byte(entry)
    code, out, err = run_cli(capsys, "predict", "--backend", "onnx", "--model", folder, *PAIR)
    assert code == 0, err
    assert abs(json.loads(out)["similarity"] - torch_similarity(folder, *PAIR)) <= 1e-4
    OnnxEncoder(entry)  # whole again: its files have the hashes its manifest records


def test_a_users_notes_and_int8_export_in_model_onnx_survive(tiny_models, tmp_path, capsys):
    folder = Path(shutil.copytree(tiny_models["lstm"], tmp_path / "M"))
    (folder / "onnx").mkdir()
    (folder / "onnx" / "notes.txt").write_text("notes\n")
    before = snapshot(folder)
    code, out, err = run_cli(capsys, "predict", "--backend", "onnx", "--model", folder, "a b", "a c")
    assert code == 0, err
    assert snapshot(folder) == before
    shutil.rmtree(folder / "onnx")
    code, _, err = run_cli(capsys, "export", "--model", folder, "--format", "onnx", "--quantize", "int8",
                           "--out", folder / "onnx")
    assert code == 0, err
    before = snapshot(folder)
    code, out, err = run_cli(capsys, "predict", "--backend", "onnx", "--model", folder, *PAIR)
    assert code == 0, err
    assert snapshot(folder) == before  # the user's int8 export, byte-identical
    # The answer is the float32 graph's, from the lab's cache, equal to PyTorch.
    assert abs(json.loads(out)["similarity"] - torch_similarity(folder, *PAIR)) <= 1e-4
    assert json.loads((cache_entry(folder)[0] / MANIFEST_FILE).read_text())["quantization"] is None


def test_a_batch_onnxruntime_fails_on_is_one_line(tiny_models, tmp_path):
    """A batch onnxruntime cannot run (here a token id no tokenizer of the export gives): an OnnxBackendError of
    one line, which the CLI prints as its error line."""
    model, config = load_model(tiny_models["lstm"])
    export_model(model, config, tmp_path / "e", "onnx")
    with pytest.raises(OnnxBackendError) as raised:
        OnnxEncoder(tmp_path / "e").run_rows([[10**9]])
    assert "\n" not in str(raised.value) and "onnxruntime failed on a batch of 1 x 1 tokens" in str(raised.value)
