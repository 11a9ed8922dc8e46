"""``train --base-model FOLDER``: a local Hugging Face BERT folder fine-tuned instead of the bundled MiniLM, read
as data only (no custom code, no pickles), and a saved run that loads and scores without that folder."""
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from core.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_tiny_bert(folder: Path, texts) -> Path:
    """A randomly initialised BertModel (width 24, 2 layers, 3 heads) with a WordPiece vocabulary of the words of
    ``texts``, saved as Hugging Face saves one: config.json, model.safetensors and the tokenizer's files."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True)
    words = sorted({word for text in texts for word in re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text.lower())})
    (folder / "vocab.txt").write_text("\n".join(SPECIAL + words) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(SPECIAL) + len(words), hidden_size=24, num_hidden_layers=2,
                        num_attention_heads=3, intermediate_size=40, max_position_embeddings=64)
    BertModel(config, add_pooling_layer=True).save_pretrained(folder, safe_serialization=True)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def few_pairs(sample_pairs):
    pairs, _ = sample_pairs
    duplicates = pairs[pairs["is_duplicate"] == 1].head(20)
    others = pairs[pairs["is_duplicate"] == 0].head(28)
    return pd.concat([duplicates, others]).sample(frac=1.0, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory, sample_pairs):
    pairs, _ = sample_pairs
    return write_tiny_bert(tmp_path_factory.mktemp("base") / "tiny-bert", pairs["question1"].tolist()
                           + pairs["question2"].tolist())


def spec_for(base: Path, **options):
    from core.training.specs import spec_from_options

    return spec_from_options(model="minilm", loss="contrastive", base_model=str(base), epochs=1, batch_size=16,
                             max_length=24, device="cpu", val_fraction=0.25, split_by="pair", **options)


def test_train_run_fine_tunes_the_base_folder_and_reloads_without_it(bert_folder, few_pairs, tmp_path):
    from core.models import load_model
    from core.training.pipeline import train_run

    base = Path(shutil.copytree(bert_folder, tmp_path / "my-bert"))
    result = train_run(spec_for(base), few_pairs, out_dir=tmp_path / "run")
    assert result.folder is not None, result.outcome.message
    config = json.loads((result.folder / "config.json").read_text())
    assert config["base_model"] == {"name": "my-bert", "path": str(base.resolve())}
    assert config["run"]["base_model"] == str(base.resolve())
    assert config["model_config"]["bert"]["hidden_size"] == 24
    assert config["model_config"]["bert"]["num_hidden_layers"] == 2
    trained = result.model.score_pairs(["How old are you?"], ["What is your age?"])
    shutil.rmtree(base)  # the saved run holds the whole encoder and its vocabulary
    model, _ = load_model(result.folder)
    assert model.embedding_dim == 24 and model.tokenizer.vocab_size == config["model_config"]["bert"]["vocab_size"]
    assert model.score_pairs(["How old are you?"], ["What is your age?"]) == pytest.approx(trained, abs=1e-5)


def test_the_base_weights_are_the_folders(bert_folder):
    import torch
    from safetensors.torch import load_file

    from core.models.base_folder import base_minilm

    model = base_minilm(bert_folder, max_length=24)
    saved = load_file(str(bert_folder / "model.safetensors"))
    for name, tensor in model.bert.state_dict().items():
        if name in saved:
            assert torch.equal(tensor, saved[name]), name


def test_float64_weights_beyond_float32_are_refused_by_name(bert_folder, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from core.models.base_folder import base_minilm
    from core.saving.files import ModelLoadError

    folder = tmp_path / "wide-bert"
    shutil.copytree(bert_folder, folder)
    weights = {name: tensor.to(torch.float64) for name, tensor in load_file(str(folder / "model.safetensors")).items()}
    save_file(weights, str(folder / "model.safetensors"))
    assert base_minilm(folder, max_length=24) is not None  # float64 that fits float32 is read as float32
    weights["encoder.layer.0.output.dense.bias"][3] = 1e300
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="encoder.layer.0.output.dense.bias is not finite as float32"):
        base_minilm(folder, max_length=24)


def test_cli_trains_on_a_base_folder_then_scores(bert_folder, few_pairs, tmp_path, capsys):
    data, out, scored = tmp_path / "pairs.csv", tmp_path / "run", tmp_path / "scored.csv"
    few_pairs.to_csv(data, index=False)
    assert main(["train", "--data", str(data), "--base-model", str(bert_folder), "--loss", "contrastive",
                 "--epochs", "1", "--batch-size", "16", "--max-length", "24", "--device", "cpu",
                 "--split-by", "pair", "--out", str(out)]) == 0, capsys.readouterr().err
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "minilm" and config["base_model"]["name"] == "tiny-bert"
    assert main(["score", "--model", str(out), "--pairs", str(data), "--out", str(scored)]) == 0
    assert len(scored.read_text(encoding="utf-8").splitlines()) == len(few_pairs) + 1


def test_the_model_card_names_the_base_folder(bert_folder, few_pairs, tmp_path):
    from core.export.model_card import model_card
    from core.training.pipeline import train_run

    result = train_run(spec_for(bert_folder), few_pairs, out_dir=tmp_path / "run")
    config = json.loads((result.folder / "config.json").read_text())
    manifest = {"config": config, "export_format": "onnx", "model_type": "minilm", "zero_shot": False, "name": "m",
                "threshold": None, "max_length": 24, "embedding_dim": 24, "normalized": True, "pad_id": 0,
                "tokenizer_kind": "wordpiece", "files": {"graphs": ["model.onnx"]}, "exported_at": "now",
                "check": {"texts": 10, "max_abs_diff_vs_pytorch": 0.0, "min_cosine_vs_pytorch": 1.0}}
    card = model_card(manifest, "m")
    assert "- **Base model:** `tiny-bert` (a local BERT folder)" in card and "all-MiniLM-L6-v2\n" not in card


def copy_with(bert_folder: Path, tmp_path: Path, change) -> Path:
    folder = Path(shutil.copytree(bert_folder, tmp_path / "changed"))
    change(folder)
    return folder


def edit_json(path: Path, **values) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}), encoding="utf-8")


def only_pickled_weights(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")


@pytest.mark.parametrize("change,fragment", [
    (lambda f: edit_json(f / "config.json", auto_map={"AutoModel": "modeling_evil.EvilModel"}), "auto_map"),
    (lambda f: (f / "modeling_evil.py").write_text("import os\n"), "Python code"),
    (only_pickled_weights, "pickled"),
    (lambda f: (f / "model.safetensors").unlink(), "model.safetensors"),
    (lambda f: edit_json(f / "tokenizer_config.json", auto_map={"AutoTokenizer": ["x.Tok", None]}), "auto_map"),
    (lambda f: edit_json(f / "tokenizer_config.json", do_lower_case=False), "cased"),
    (lambda f: edit_json(f / "config.json", model_type="roberta"), "model_type"),
    (lambda f: edit_json(f / "config.json", num_hidden_layers=10_000_000), "num_hidden_layers"),
    (lambda f: (f / "vocab.txt").unlink(), "vocab.txt"),
])
def test_an_unusable_base_folder_is_refused_in_one_line(bert_folder, tmp_path, capsys, change, fragment):
    folder = copy_with(bert_folder, tmp_path, change)
    code = main(["train", "--data", str(ROOT / "assets" / "sample_pairs.csv"), "--base-model", str(folder),
                 "--epochs", "1", "--device", "cpu", "--out", str(tmp_path / "run")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --base-model"), lines
    assert fragment in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("extra,fragment", [(["--model", "lstm"], "minilm"), (["--init-model", "minilm"], None)])
def test_base_model_with_another_start_is_refused(bert_folder, tmp_path, capsys, extra, fragment):
    code = main(["train", "--data", str(ROOT / "assets" / "sample_pairs.csv"), "--base-model", str(bert_folder),
                 *extra, "--epochs", "1", "--device", "cpu", "--out", str(tmp_path / "run")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--base-model" in lines[0], lines
    assert fragment is None or fragment in lines[0]
