"""``python -m core export``: ONNX graphs equal to PyTorch for every family (LSTM one- and two-way, each pooling,
on words or WordPiece, both towers of the dual encoder, zero-shot MiniLM), the sentence-transformers folder equal
to MiniLM.encode, tokenizer.json equal to the project's tokenizers, the model card, and refused input."""
from __future__ import annotations

import contextlib
import io
import json
import random
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tokenizers import Tokenizer

from core.cli.main import main
from core.export.export_folder import export_model
from core.export.manifest import EXPORT_FORMAT, MANIFEST_FILE
from core.models import ZERO_SHOT, load_model
from core.saving import save_model
from core.text.word_tokenizer import WordTokenizer

ROOT = Path(__file__).resolve().parents[1]
EXTRA = ["", "   ", "Why don't cats like water???", "What's 2+2... and 3.14 * 10^6?", "Café naïve façade ÀÉÎÕÜ",
         "ΟΔΟΣ ΣΟΦΙΑΣ Σ ΑΣ' ÅSA", "日本語の質問はどうですか？", "😀 emoji 👍🏽 🇫🇷!", "rock'n'roll O'Neil's  'quoted'",
         "tab\tnew\nline\u3000ideographic\u00a0nbsp\u2003em", "İstanbul ẞ straße ǅemal ﬁnance", "#1 @user $100 (50%)",
         " ".join(["long"] * 100)]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def varied_texts(sample_pairs, n: int = 200, seed: int = 0) -> list[str]:
    """Sample questions, some of them roughed up (accents, emoji, CJK, digits, odd spaces), and EXTRA."""
    pairs, _ = sample_pairs
    rng = random.Random(seed)
    base = pairs["question1"].tolist() + pairs["question2"].tolist()
    bits = ["é", "Ü", "😀", "日本", "42", "3,5", "'s", "—", "…", "\u3000", "ΣΣ", "Σ", "don't", "?!", "\xa0"]
    texts = list(EXTRA)
    while len(texts) < n:
        text = rng.choice(base)
        for _ in range(rng.randint(0, 3)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(bits) + text[at:]
        texts.append(text if rng.random() < 0.7 else text.upper())
    return texts[:n]


def run_graph(path: Path, tokenizer, texts: list[str]) -> np.ndarray:
    """Vectors of texts from one exported graph, fed as one padded batch by the model's own tokenizer."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids, mask = tokenizer.encode(texts).take(np.arange(len(texts)))
    return session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.long().numpy()})[0]


@pytest.fixture(scope="module")
def bi_lstm(tmp_path_factory, sample_pairs):
    """A two-layer bidirectional LSTM (untrained weights: equality needs no training), saved as a folder."""
    from core.models.siamese_lstm import SiameseLSTM, SiameseLSTMConfig

    pairs, _ = sample_pairs
    tokenizer = WordTokenizer.build(pairs["question1"].tolist() + pairs["question2"].tolist(), min_freq=1,
                                    max_length=24)
    torch.manual_seed(0)
    model = SiameseLSTM(SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=7, hidden_size=6,
                                          num_layers=2, bidirectional=True), tokenizer)
    folder = tmp_path_factory.mktemp("bi") / "lstm-bi"
    save_model(model, folder, metadata={"name": "lstm-bi", "thresholds": {"accuracy": 0.5, "f1": 0.5}})
    return folder


@pytest.fixture(scope="module")
def minilm_exports(tmp_path_factory):
    """Zero-shot MiniLM exported once per module in both formats: (model, {format: folder})."""
    model, config = load_model(ZERO_SHOT)
    root = tmp_path_factory.mktemp("minilm")
    folders = {fmt: root / f"minilm-{fmt}" for fmt in ("onnx", "sentence-transformers")}
    for fmt, folder in folders.items():
        export_model(model, config, folder, fmt, source=ZERO_SHOT)
    return model, folders


# ---- tokenizer.json ----------------------------------------------------------------------------
# Text -> the words the word tokenizer sees, written out by hand: lower-casing (a final capital sigma as
# Python lowers it, "İ" as "i" + combining dot), one "'" + a-z suffix per word, every other mark alone,
# whitespace below U+00C0 (tab, newline, U+001C, U+0085, NBSP) separating words, the whitespace above it
# (U+2003, U+2028, U+202F, U+3000) inside the word range, as the first word vocabularies were built.
HAND_SPLIT = {
    "What's the BEST way, don't you think?": ["what's", "the", "best", "way", ",", "don't", "you", "think", "?"],
    "rock'n'roll O'Neil's  'quoted'": ["rock'n", "'", "roll", "o'neil", "'", "s", "'", "quoted", "'"],
    "ΟΔΟΣ ΣΟΦΙΑΣ Σ ΑΣ' ΣΑ": ["οδος", "σοφιας", "σ", "ας", "'", "σα"],
    "tab\tnew\nline\u3000ideographic\u00a0nbsp\u2003em": ["tab", "new", "line\u3000ideographic", "nbsp\u2003em"],
    "a\x1cb\x85c\u2028d\u202fe": ["a", "b", "c\u2028d\u202fe"],
    "Café naïve 😀👍🏽!": ["café", "naïve", "😀", "👍", "🏽", "!"],
    "3.14 * 10^6": ["3", ".", "14", "*", "10", "^", "6"],
    "#1 @user $100 (50%)": ["#", "1", "@", "user", "$", "100", "(", "50", "%", ")"],
    "İstanbul": ["i\u0307stanbul"],
    "": [],
    " \t\n\u00a0": [],
}


def test_the_word_pipeline_splits_hand_written_texts_as_written(tmp_path):
    word = WordTokenizer(["<pad>", "<unk>"], max_length=4)
    assert {text: word.split(text) for text in HAND_SPLIT} == HAND_SPLIT
    # The exported tokenizer.json splits the same way.
    (tmp_path / "tokenizer.json").write_text(word.hf_tokenizer_json(), encoding="utf-8")
    rust = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    exported = {text: [piece for piece, _ in rust.pre_tokenizer.pre_tokenize_str(rust.normalizer.normalize_str(text))]
                for text in HAND_SPLIT}
    assert exported == HAND_SPLIT


def test_word_level_tokenizer_json_gives_the_word_tokenizers_ids(tmp_path, sample_pairs, tiny_models):
    texts = varied_texts(sample_pairs)
    word = WordTokenizer.build(texts[:150], min_freq=1, max_length=12)  # small max_length: truncation shows
    (tmp_path / "tokenizer.json").write_text(word.hf_tokenizer_json(), encoding="utf-8")
    rust = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    table = word.encode(texts)
    mismatches = [(t, rust.encode(t).ids) for i, t in enumerate(texts)
                  if (rust.encode(t).ids or [word.pad_id]) != table.ids[i, : table.lengths[i]].tolist()]
    assert not mismatches
    assert any(len(word.split(t)) > 12 for t in texts) and any(word.unk_id in row for row in table.ids)
    # The exported LSTM's tokenizer.json is this one, for its own vocabulary.
    model, config = load_model(tiny_models["lstm"])
    export_model(model, config, tmp_path / "lstm", "onnx")
    rust = Tokenizer.from_file(str(tmp_path / "lstm" / "tokenizer.json"))
    table = model.tokenizer.encode(texts)
    assert all((rust.encode(t).ids or [0]) == table.ids[i, : table.lengths[i]].tolist() for i, t in enumerate(texts))


@pytest.mark.slow
def test_wordpiece_tokenizer_json_gives_the_wordpiece_ids(minilm_exports, sample_pairs):
    model, folders = minilm_exports
    texts = varied_texts(sample_pairs)
    rust = Tokenizer.from_file(str(folders["onnx"] / "tokenizer.json"))
    table = model.tokenizer.encode(texts)
    assert all(rust.encode(t).ids == table.ids[i, : table.lengths[i]].tolist() for i, t in enumerate(texts))


# ---- ONNX equality, per family -----------------------------------------------------------------
def check_graph(path: Path, dim: int) -> None:
    graph = onnx.load(str(path)).graph
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in graph.output] == ["sentence_embedding"]
    for tensor in graph.input:  # batch and sequence are dynamic
        assert [d.dim_param for d in tensor.type.tensor_type.shape.dim] == ["batch", "sequence"]
    assert graph.output[0].type.tensor_type.shape.dim[1].dim_value == dim


@pytest.mark.parametrize("family", ["lstm", "lstm-bi", "dual-transformer"])
def test_onnx_equals_pytorch_for_each_family(family, tiny_models, bi_lstm, sample_pairs, tmp_path):
    source = bi_lstm if family == "lstm-bi" else tiny_models[family]
    model, config = load_model(source)
    manifest = export_model(model, config, tmp_path / "out", "onnx")
    towers = 2 if family == "dual-transformer" else 1
    assert manifest["files"]["graphs"] == ["model.onnx", "model_tower1.onnx"][:towers]
    assert manifest["towers"] == {"0": "model.onnx", "1": "model_tower1.onnx" if towers == 2 else "model.onnx"}
    texts = varied_texts(sample_pairs, 50, seed=1)
    worst = 0.0
    for tower in range(towers):
        path = tmp_path / "out" / manifest["files"]["graphs"][tower]
        check_graph(path, model.embedding_dim)
        want = torch.nn.functional.normalize(model.encode(texts, tower=tower), dim=-1).numpy()
        # One padded batch, then batches of other sizes and widths (a graph must not keep the trace's shapes).
        worst = max(worst, np.abs(run_graph(path, model.tokenizer, texts) - want).max())
        for rows in ([0], [5, 9], list(range(10, 17))):
            got = run_graph(path, model.tokenizer, [texts[r] for r in rows])
            worst = max(worst, np.abs(got - want[rows]).max())
    assert worst <= 1e-4, worst
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)  # the graph's output is L2-normalised
    if family == "dual-transformer":  # the two towers really differ
        assert not np.allclose(model.encode(texts[:5], tower=0), model.encode(texts[:5], tower=1))
    if family == "lstm-bi":
        assert model.config.bidirectional and model.embedding_dim == 12
    print(f"{family}: max |onnx - torch| = {worst:.2e}")


# Each pooling and the WordPiece tokens; sizes all different, so a mixed-up width shows.
LSTM_VARIANTS = {
    "max": dict(pooling="max", embedding_dim=9, hidden_size=5),
    "mean+max": dict(pooling="mean+max", embedding_dim=8, hidden_size=3),
    "mean+max-bi-2": dict(pooling="mean+max", bidirectional=True, num_layers=2, embedding_dim=7, hidden_size=6),
    "wordpiece-mean": dict(tokens="wordpiece", embedding_dim=11, hidden_size=4),
    "wordpiece-max-bi": dict(tokens="wordpiece", pooling="max", bidirectional=True, embedding_dim=10, hidden_size=13),
}
LSTM_WIDTHS = {"max": 5, "mean+max": 6, "mean+max-bi-2": 24, "wordpiece-mean": 4, "wordpiece-max-bi": 26}


@pytest.mark.parametrize("variant", list(LSTM_VARIANTS))
def test_onnx_equals_pytorch_for_each_lstm_pooling_and_tokens(variant, sample_pairs, tmp_path):
    """Saved (untrained), loaded back, exported: the graph and its tokenizer.json say what PyTorch says."""
    from core.models.siamese_lstm import SiameseLSTM, SiameseLSTMConfig
    from core.text.wordpiece_tokenizer import bert_wordpiece

    options = LSTM_VARIANTS[variant]
    pairs, _ = sample_pairs
    if options.get("tokens") == "wordpiece":
        tokenizer = bert_wordpiece(max_length=24)
    else:
        tokenizer = WordTokenizer.build(pairs["question1"].tolist(), min_freq=1, max_length=24)
    torch.manual_seed(3)
    saved = SiameseLSTM(SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, **options), tokenizer)
    folder = save_model(saved, tmp_path / variant, metadata={"thresholds": {"accuracy": 0.5, "f1": 0.5}})
    model, config = load_model(folder)
    assert model.config == saved.config and model.tokenizer.kind == tokenizer.kind
    assert model.embedding_dim == LSTM_WIDTHS[variant]
    texts = varied_texts(sample_pairs, 50, seed=4)
    np.testing.assert_array_equal(model.encode(texts).numpy(), saved.eval().encode(texts).numpy())

    manifest = export_model(model, config, tmp_path / "out", "onnx")
    path = tmp_path / "out" / "model.onnx"
    check_graph(path, LSTM_WIDTHS[variant])
    assert manifest["embedding_dim"] == LSTM_WIDTHS[variant] and manifest["tokenizer_kind"] == tokenizer.kind
    want = model.encode(texts).numpy()
    worst = np.abs(run_graph(path, model.tokenizer, texts) - want).max()
    for rows in ([0], [5, 9], list(range(10, 17))):
        worst = max(worst, np.abs(run_graph(path, model.tokenizer, [texts[r] for r in rows]) - want[rows]).max())
    assert worst <= 1e-4, worst
    rust = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    table = model.tokenizer.encode(texts)
    assert all((rust.encode(t).ids or [model.tokenizer.pad_id]) == table.ids[i, : table.lengths[i]].tolist()
               for i, t in enumerate(texts))
    print(f"lstm {variant}: max |onnx - torch| = {worst:.2e}")


@pytest.mark.slow
def test_zero_shot_minilm_onnx_equals_pytorch(minilm_exports, sample_pairs):
    model, folders = minilm_exports
    texts = varied_texts(sample_pairs, 50, seed=2)
    path = folders["onnx"] / "model.onnx"
    check_graph(path, 384)
    want = model.encode(texts).numpy()
    worst = max(np.abs(run_graph(path, model.tokenizer, texts) - want).max(),
                np.abs(run_graph(path, model.tokenizer, texts[:3]) - want[:3]).max())
    assert worst <= 1e-4, worst
    print(f"minilm zero-shot: max |onnx - torch| = {worst:.2e}")


# ---- sentence-transformers ---------------------------------------------------------------------
def test_sentence_transformers_folder_equals_minilm_encode(minilm_exports, sample_pairs):
    from sentence_transformers import SentenceTransformer

    model, folders = minilm_exports
    folder = folders["sentence-transformers"]
    for name in ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "config.json",
                 "model.safetensors", "tokenizer.json", "1_Pooling/config.json", "README.md", MANIFEST_FILE):
        assert (folder / name).is_file(), name
    loaded = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    assert loaded.max_seq_length == model.tokenizer.max_length == 64
    texts = varied_texts(sample_pairs, 50, seed=3)
    difference = np.abs(loaded.encode(texts, convert_to_numpy=True) - model.encode(texts).numpy()).max()
    assert difference <= 1e-5, difference
    print(f"sentence-transformers: max |ST - ours| = {difference:.2e}")


# ---- the model card and siamese_lab.json -------------------------------------------------------
def snippet_output(folder: Path, monkeypatch) -> str:
    """Run the README's Python snippet from the export's parent folder (it opens the folder by name)."""
    code = re.search(r"```python\n(.*?)```", (folder / "README.md").read_text(encoding="utf-8"), re.S).group(1)
    monkeypatch.chdir(folder.parent)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "snippet"})
    return out.getvalue()


def test_model_card_of_a_trained_model(tiny_models, tmp_path, monkeypatch):
    model, config = load_model(tiny_models["dual-transformer"])
    folder = tmp_path / "dual-export"
    export_model(model, config, folder, "onnx")
    card = (folder / "README.md").read_text(encoding="utf-8")
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    threshold = config["thresholds"]["accuracy"]
    validation, data = config["metrics"]["validation"], config["data"]
    assert manifest["format"] == EXPORT_FORMAT and manifest["threshold"] == threshold
    assert manifest["config"]["metrics"]["validation"]["roc_auc"] == validation["roc_auc"]
    assert manifest["config"]["data"]["pairs"] == data["pairs"] == 479
    assert card.startswith("---\nlibrary_name: onnx\n")
    for text in (f"{threshold:.6f}", "Dual transformer encoder", "none (trained from scratch)",
                 f"{validation['roc_auc']:.4f}", f"{validation['accuracy']:.4f}", f"{validation['f1']:.4f}",
                 f"| Pairs | {validation['n']} |", f"{data['val_pairs']} held out of 479", "`bundled sample`",
                 "479 pairs", f"{100 * data['duplicate_rate']:.1f} % ({data['duplicates']} duplicate pairs)",
                 "in-batch softmax", "scaled by 20.0", "Trained on Quora questions", "recalibrate the threshold on your data",
                 "import onnxruntime as ort", "model_tower1.onnx", f"THRESHOLD = {threshold:.6f}"):
        assert text in card, text
    # A run validated on a file of its own says so, not that its pairs were held out of the training data.
    from core.export.model_card import model_card

    given = {**manifest, "config": {**manifest["config"], "data": {**data, "val_name": "dev.csv", "val_pairs": 0}}}
    card_of_file = model_card(given, "dual-export")
    assert "Validation pairs of the validation file `dev.csv`:" in card_of_file and "held out of" not in card_of_file
    # The usage snippet runs as written and says what the model says.
    score, verdict = snippet_output(folder, monkeypatch).split(maxsplit=1)
    want = model.score_pairs(["How do I learn Python?"], ["What is the best way to learn Python?"])[0]
    assert abs(float(score) - want) < 1e-3
    assert verdict.strip() == ("DUPLICATE" if want > threshold else "NOT DUPLICATE")


def test_model_card_of_the_sentence_transformers_export(minilm_exports, monkeypatch):
    model, folders = minilm_exports
    folder = folders["sentence-transformers"]
    card = (folder / "README.md").read_text(encoding="utf-8")
    for text in ("library_name: sentence-transformers", "base_model: sentence-transformers/all-MiniLM-L6-v2",
                 "from sentence_transformers import SentenceTransformer", "THRESHOLD = 0.800000",
                 "479 Quora pairs", "recalibrate the threshold on your data", "Pooling(mean, dim=384)"):
        assert text in card, text
    assert json.loads((folder / MANIFEST_FILE).read_text())["threshold"] == 0.8
    score, _ = snippet_output(folder, monkeypatch).split(maxsplit=1)
    want = model.score_pairs(["How do I learn Python?"], ["What is the best way to learn Python?"])[0]
    assert abs(float(score) - want) < 1e-3


def test_hostile_names_stay_inside_the_card(tiny_models, tmp_path):
    model, config = load_model(tiny_models["lstm"])
    hostile = {**config, "name": "x\n---\n<script>`", "data": {**config["data"], "name": "a\nb: c\n- d`"}}
    export_model(model, hostile, tmp_path / "out", "onnx")
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    front = card.split("\n---\n", 1)[0]
    assert front.splitlines()[-2:] == ["datasets:", '- "a b: c - d`"']
    assert "<script>" not in card.replace("`x --- <script>'`", "")


# ---- the CLI and refused input -----------------------------------------------------------------
def test_cli_exports_and_refuses_what_it_must(capsys, tiny_models, tmp_path):
    lstm = tiny_models["lstm"]
    out = tmp_path / "exports" / "lstm"
    # An LSTM is no sentence-transformers model: one line, nothing written.
    code, stdout, err = run_cli(capsys, "export", "--model", lstm, "--format", "sentence-transformers", "--out", out)
    assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: only MiniLM models export as sentence-transformers") and not out.exists()
    code, stdout, err = run_cli(capsys, "export", "--model", lstm, "--format", "onnx", "--out", out)
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["files"] == ["README.md", "model.onnx", "siamese_lab.json", "tokenizer.json"]
    assert summary["max_abs_diff_vs_pytorch"] <= 1e-4
    # An earlier export is replaced only with --overwrite (here by its int8 version).
    code, _, err = run_cli(capsys, "export", "--model", lstm, "--format", "onnx", "--out", out)
    assert code == 2 and "add --overwrite to replace it" in err and len(err.strip().splitlines()) == 1
    code, stdout, err = run_cli(capsys, "export", "--model", lstm, "--format", "onnx", "--out", out, "--overwrite",
                                "--quantize", "int8")
    assert code == 0, err
    assert json.loads((out / MANIFEST_FILE).read_text())["quantization"] == "int8-dynamic"
    assert ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    # A non-empty folder that is not an export, or a saved model, is never replaced, even with --overwrite.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    for target in (other, lstm):
        before = sorted(p.name for p in Path(target).iterdir())
        code, stdout, err = run_cli(capsys, "export", "--model", lstm, "--format", "onnx", "--out", target,
                                    "--overwrite")
        assert code == 2 and stdout == "" and "holds no export" in err and len(err.strip().splitlines()) == 1
        assert sorted(p.name for p in Path(target).iterdir()) == before
    assert (other / "notes.txt").read_text() == "keep me"
    # Other bad input: one line each.
    for argv, message in ((["--model", tmp_path / "missing", "--format", "onnx", "--out", tmp_path / "o"],
                           "no model folder"),
                          (["--model", lstm, "--format", "sentence-transformers", "--quantize", "int8", "--out",
                            tmp_path / "o"], "only MiniLM")):
        code, _, err = run_cli(capsys, "export", *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_model_card_counts_implied_training_pairs(tiny_models, tmp_path):
    model, config = load_model(tiny_models["lstm"])
    train_pairs = config["data"]["train_pairs"]
    assert not config["data"].get("implied_pairs")  # trained without them: the card says nothing of them
    export_model(model, config, tmp_path / "plain", "onnx")
    plain = (tmp_path / "plain" / "README.md").read_text(encoding="utf-8")
    assert f"- **Splits:** {train_pairs} training, " in plain and "implied" not in plain
    config["data"] = {**config["data"], "implied_pairs": 37}
    export_model(model, config, tmp_path / "implied", "onnx")
    card = (tmp_path / "implied" / "README.md").read_text(encoding="utf-8")
    assert f"- **Splits:** {train_pairs} training (of them 37 implied by the training labels), " in card


def test_a_full_disk_during_an_export_is_one_line_and_keeps_the_old_export(capsys, tiny_models, tmp_path,
                                                                            monkeypatch):
    """Issue 22 item 8: ENOSPC (or a read-only file system) in the middle of writing the graph is one
    `error:` line, exit 2; the earlier export stays byte for byte and no temporary folder is left."""
    import errno

    import core.export.export_folder as export_folder

    lstm, out = tiny_models["lstm"], tmp_path / "exports" / "lstm"
    code, _, err = run_cli(capsys, "export", "--model", lstm, "--format", "onnx", "--out", out)
    assert code == 0, err
    before = {path.relative_to(out): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    for number, name in ((errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system")):
        def no_room(model, folder, quantize, number=number, name=name):
            (Path(folder) / "model.onnx").write_bytes(b"half a graph")
            raise OSError(number, name, str(Path(folder) / "model.onnx"))

        monkeypatch.setattr(export_folder, "write_onnx", no_room)
        code, stdout, err = run_cli(capsys, "export", "--model", lstm, "--format", "onnx", "--out", out,
                                    "--overwrite")
        assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"error: {name}") and "Traceback" not in err
        after = {path.relative_to(out): path.read_bytes() for path in out.rglob("*") if path.is_file()}
        assert after == before
        assert [p.name for p in out.parent.iterdir()] == ["lstm"]  # no .tmp-* folder left beside it
