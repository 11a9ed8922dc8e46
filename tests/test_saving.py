"""Model folders: round trips for each family, atomic saves, and untrusted folders refused safely."""

import json
import os
import pickle

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from core.models import (
    DualEncoder,
    DualEncoderConfig,
    MiniLM,
    SiameseLSTM,
    SiameseLSTMConfig,
    load_model,
)
from core.saving import (
    CONFIG_FILE,
    RECORD_FILE,
    WEIGHTS_FILE,
    ForeignFilesError,
    ModelLoadError,
    list_runs,
    save_model,
)
from core.text.word_tokenizer import WORD_TOKENIZER_FILE, WordTokenizer
from core.text.wordpiece_tokenizer import WORDPIECE_VOCAB_FILE, bert_wordpiece

VOCAB, EMBED, HIDDEN = 99, 24, 32
TEXTS = ["How old are you?", "What is your age, my friend?", "w5 w6 w7 w8 w9 w10 w11", ""]


def _word_tokenizer() -> WordTokenizer:
    words = ["how", "old", "are", "you", "?", "what", "is", "your", "age"]
    vocab = ["<pad>", "<unk>"] + words + [f"w{i}" for i in range(VOCAB - 2 - len(words))]
    return WordTokenizer(vocab, max_length=13)


def tiny_lstm() -> SiameseLSTM:
    torch.manual_seed(1)
    config = SiameseLSTMConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN, bidirectional=True)
    return SiameseLSTM(config, _word_tokenizer()).eval()


def tiny_dual() -> DualEncoder:
    torch.manual_seed(2)
    tokenizer = bert_wordpiece(max_length=17)
    config = DualEncoderConfig(vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_layers=1, ff_dim=40,
                               max_length=17, projection_dim=20)
    return DualEncoder(config, tokenizer).eval()


def _assert_same_embeddings(a, b, texts=TEXTS):
    for tower in (0, 1):
        torch.testing.assert_close(a.encode(texts, tower=tower), b.encode(texts, tower=tower), rtol=0, atol=0)


# ---- round trips -------------------------------------------------------------------------------
def test_lstm_round_trip(tmp_path):
    model = tiny_lstm()
    folder = save_model(model, tmp_path / "lstm", metadata={"thresholds": {"accuracy": 0.61, "f1": 0.42}})
    assert sorted(p.name for p in folder.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORD_TOKENIZER_FILE, RECORD_FILE])
    loaded, config = load_model(folder)
    assert isinstance(loaded, SiameseLSTM) and not loaded.training
    assert loaded.config == model.config
    assert loaded.tokenizer.vocab == model.tokenizer.vocab and loaded.tokenizer.max_length == 13
    assert config["model_type"] == "lstm" and config["thresholds"] == {"accuracy": 0.61, "f1": 0.42}
    assert config["tokenizer"] == {"kind": "word", "max_length": 13, "vocab_file": WORD_TOKENIZER_FILE}
    _assert_same_embeddings(model, loaded)
    # tokenizer.json is a Hugging Face tokenizer giving the model's ids (how=2 old=3 are=4 you=5 ?=6)
    assert Tokenizer.from_file(str(folder / WORD_TOKENIZER_FILE)).encode("How old ARE you? zzz").ids == [2, 3, 4, 5, 6, 1]


def test_dual_encoder_round_trip(tmp_path):
    model = tiny_dual()
    folder = save_model(model, tmp_path / "dual")
    assert sorted(p.name for p in folder.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORDPIECE_VOCAB_FILE, RECORD_FILE])
    loaded, config = load_model(folder)
    assert isinstance(loaded, DualEncoder) and len(loaded.towers) == 2
    assert config["model_config"]["projection_dim"] == 20
    _assert_same_embeddings(model, loaded)
    # the towers stay distinct after the round trip
    assert not torch.allclose(loaded.encode(TEXTS[:2], tower=0), loaded.encode(TEXTS[:2], tower=1))


def test_minilm_round_trip(tmp_path):
    model = MiniLM.pretrained(max_length=24).eval()
    folder = save_model(model, tmp_path / "minilm")
    assert sorted(p.name for p in folder.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORDPIECE_VOCAB_FILE, RECORD_FILE])
    loaded, config = load_model(folder)
    assert isinstance(loaded, MiniLM) and loaded.tokenizer.max_length == 24
    assert config["model_config"]["bert"]["hidden_size"] == 384
    torch.testing.assert_close(model.encode(TEXTS[:3]), loaded.encode(TEXTS[:3]), rtol=0, atol=1e-6)


def test_config_json_is_plain_and_complete(tmp_path):
    folder = save_model(tiny_lstm(), tmp_path / "m", metadata={"name": "m", "extra": {"path": tmp_path}})
    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["format"] == "siamese-lab-model" and config["format_version"] == 1
    assert config["model_config"] == {"vocab_size": VOCAB, "embedding_dim": EMBED, "hidden_size": HIDDEN,
                                      "num_layers": 1, "bidirectional": True, "dropout": 0.3, "pad_id": 0,
                                      "pooling": "mean", "tokens": "words", "init_embeddings": "random",
                                      "freeze_embeddings": False}
    assert config["extra"]["path"] == str(tmp_path)
    assert "saved_at" in config


# ---- atomic saving -------------------------------------------------------------------------------
def test_save_over_existing_folder_replaces_the_labs_files_whole(tmp_path):
    target = tmp_path / "run"
    save_model(tiny_dual(), target)
    model = tiny_lstm()
    save_model(model, target)  # the dual's vocab.txt goes with it
    assert sorted(p.name for p in target.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORD_TOKENIZER_FILE,
                                                               RECORD_FILE])
    loaded, config = load_model(target)
    assert config["model_type"] == "lstm"
    _assert_same_embeddings(model, loaded)
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no .tmp- or .old- leftovers


def test_a_folder_holding_a_file_the_lab_did_not_write_is_never_replaced(tmp_path):
    target = tmp_path / "run"
    save_model(tiny_lstm(), target)
    (target / "stale.txt").write_text("from an older run")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(ForeignFilesError, match=r"run: holds stale\.txt, which Siamese Lab did not write"):
        save_model(tiny_dual(), target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_failed_save_keeps_the_old_folder_and_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "run"
    model = tiny_lstm()
    save_model(model, target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def broken_save_file(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("core.saving.model_folder.save_file", broken_save_file)
    with pytest.raises(OSError, match="disk full"):
        save_model(tiny_dual(), target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


# ---- untrusted folders ---------------------------------------------------------------------------
class CreatesFile:
    """Unpickling this opens (and so creates) a file: proof that code from the folder ran."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_payload_is_live_when_unpickled(tmp_path):
    # The payload used below really would run: unpickling it creates the file.
    marker = tmp_path / "proof"
    pickle.loads(pickle.dumps(CreatesFile(marker))).close()
    assert marker.exists()


def test_pickle_payload_as_safetensors_is_refused_without_running(tmp_path):
    folder = save_model(tiny_lstm(), tmp_path / "evil")
    marker = tmp_path / "pwned"
    (folder / WEIGHTS_FILE).write_bytes(pickle.dumps(CreatesFile(marker)))
    with pytest.raises(ModelLoadError, match="safetensors"):
        load_model(folder)
    assert not marker.exists()


def test_pytorch_bin_payload_is_never_read(tmp_path):
    folder = save_model(tiny_lstm(), tmp_path / "evil")
    marker = tmp_path / "pwned"
    (folder / WEIGHTS_FILE).unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(CreatesFile(marker)))
    with pytest.raises(ModelLoadError, match=WEIGHTS_FILE):
        load_model(folder)
    assert not marker.exists()


def test_weights_of_wrong_shape_are_refused(tmp_path):
    folder = save_model(tiny_lstm(), tmp_path / "m")
    config = json.loads((folder / CONFIG_FILE).read_text())
    config["model_config"]["hidden_size"] = 16
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="size mismatch"):
        load_model(folder)


def test_weights_with_missing_tensor_are_refused(tmp_path):
    model = tiny_lstm()
    folder = save_model(model, tmp_path / "m")
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "embedding.weight"}
    save_file(state, str(folder / WEIGHTS_FILE))
    with pytest.raises(ModelLoadError, match="embedding.weight"):
        load_model(folder)


@pytest.mark.parametrize("missing,message", [(WEIGHTS_FILE, WEIGHTS_FILE),
                                             (WORD_TOKENIZER_FILE, WORD_TOKENIZER_FILE), (CONFIG_FILE, CONFIG_FILE)])
def test_missing_files_are_refused(tmp_path, missing, message):
    folder = save_model(tiny_lstm(), tmp_path / "m")
    (folder / missing).unlink()
    with pytest.raises(ModelLoadError, match=message.replace(".", r"\.")):
        load_model(folder)


def test_missing_wordpiece_vocab_is_refused(tmp_path):
    folder = save_model(tiny_dual(), tmp_path / "m")
    (folder / WORDPIECE_VOCAB_FILE).unlink()
    with pytest.raises(ModelLoadError, match="vocab"):
        load_model(folder)


def test_missing_folder_is_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="no model folder"):
        load_model(tmp_path / "nothing-here")


def _edit_config(folder, edit):
    config = json.loads((folder / CONFIG_FILE).read_text())
    edit(config)
    (folder / CONFIG_FILE).write_text(json.dumps(config))


@pytest.mark.parametrize("edit,message", [
    (lambda c: c.update(model_type="gpt"), "unknown model type"),
    (lambda c: c.update(format="something-else"), "not a siamese-lab-model"),
    (lambda c: c["model_config"].update(activation="relu"), "unknown field"),
    (lambda c: c["model_config"].update(hidden_size="32"), "hidden_size must be int"),
    (lambda c: c["model_config"].update(hidden_size=32.0), "hidden_size must be int"),
    (lambda c: c["model_config"].update(bidirectional=1), "bidirectional must be bool"),
    (lambda c: c["model_config"].update(hidden_size=-4), "must not be negative"),
    (lambda c: c["model_config"].update(vocab_size=10**12), "implausibly large"),
    (lambda c: c["model_config"].update(dropout=-0.5), "out of range"),
    (lambda c: c["model_config"].update(pooling="avg"), "pooling must be one of mean, max, mean\\+max"),
    (lambda c: c["model_config"].update(pooling=["max"]), "pooling must be str"),
    (lambda c: c["model_config"].update(tokens="x" * 10_000),
     "tokens must be one of words, wordpiece, got 'x{79}$"),  # a long value is cut in the message
    (lambda c: c["model_config"].update(init_embeddings=None), "init_embeddings must be str"),
    (lambda c: c["model_config"].update(tokens="wordpiece"), "tokens 'wordpiece' but the tokenizer is a word"),
    (lambda c: c.update(model_config=[1, 2]), "model_config must be a mapping"),
    (lambda c: c["tokenizer"].update(kind="pickle"), "tokenizer"),
    (lambda c: c["tokenizer"].update(max_length=-1), "max_length"),
    (lambda c: c["tokenizer"].update(max_length="13"), "max_length"),
])
def test_bad_config_json_is_refused(tmp_path, edit, message):
    folder = save_model(tiny_lstm(), tmp_path / "m")
    _edit_config(folder, edit)
    with pytest.raises(ModelLoadError, match=message):
        load_model(folder)


def test_a_folder_saved_before_the_lstm_settings_loads_with_their_defaults(tmp_path):
    model = tiny_lstm()
    folder = save_model(model, tmp_path / "old")
    old = ("pooling", "tokens", "init_embeddings")
    _edit_config(folder, lambda c: [c["model_config"].pop(name) for name in old])
    assert not set(old) & set(json.loads((folder / CONFIG_FILE).read_text())["model_config"])
    loaded, _ = load_model(folder)
    assert (loaded.config.pooling, loaded.config.tokens, loaded.config.init_embeddings) == ("mean", "words", "random")
    _assert_same_embeddings(model, loaded)


def test_an_lstm_on_wordpiece_tokens_loads_back(tmp_path):
    torch.manual_seed(4)
    tokenizer = bert_wordpiece(max_length=15)
    config = SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=7, hidden_size=9, tokens="wordpiece",
                               pooling="mean+max", init_embeddings="minilm")
    model = SiameseLSTM(config, tokenizer).eval()
    folder = save_model(model, tmp_path / "wp")
    assert sorted(p.name for p in folder.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORDPIECE_VOCAB_FILE, RECORD_FILE])
    loaded, saved = load_model(folder)
    assert loaded.config == config and loaded.tokenizer.kind == "wordpiece" and loaded.tokenizer.max_length == 15
    assert saved["tokenizer"]["kind"] == "wordpiece" and loaded.embedding_dim == 18
    _assert_same_embeddings(model, loaded)


def test_config_that_is_not_json_is_refused(tmp_path):
    folder = save_model(tiny_lstm(), tmp_path / "m")
    (folder / CONFIG_FILE).write_bytes(b"\x80\x04 not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_model(folder)


def test_dual_encoder_config_that_cannot_build_is_refused(tmp_path):
    folder = save_model(tiny_dual(), tmp_path / "m")
    _edit_config(folder, lambda c: c["model_config"].update(num_heads=3))  # 32 is not divisible by 3
    with pytest.raises(ModelLoadError, match="divisible"):
        load_model(folder)


# ---- the runs folder -----------------------------------------------------------------------------
def test_list_runs_reports_leftovers_and_broken_folders(tmp_path):
    root = tmp_path / "runs"
    save_model(tiny_lstm(), root / "good-1", metadata={"name": "good-1"})
    save_model(tiny_lstm(), root / "good-2", metadata={"name": "good-2"})
    (root / ".tmp-good-3-abcd1234").mkdir()
    (root / ".tmp-good-3-abcd1234" / WEIGHTS_FILE).write_bytes(b"partial")
    (root / "no-config").mkdir()
    broken = save_model(tiny_lstm(), root / "no-weights")
    (broken / WEIGHTS_FILE).unlink()
    (root / "bad-json").mkdir()
    (root / "bad-json" / CONFIG_FILE).write_text("{")
    (root / "notes.txt").write_text("not a folder")

    runs, problems = list_runs(root)
    assert sorted(r["name"] for r in runs) == ["good-1", "good-2"]
    assert all(r["model_type"] == "lstm" and r["path"].startswith(str(root)) for r in runs)
    assert len(problems) == 4
    joined = "\n".join(problems)
    for name in (".tmp-good-3-abcd1234", "no-config", "no-weights", "bad-json"):
        assert name in joined
    assert "interrupted save" in joined


def test_a_run_left_aside_between_the_two_renames_is_named_by_list_runs_whole(tmp_path):
    """A save killed after moving the old folder aside, before the new one took its place: the one window."""
    model = tiny_lstm()
    save_model(model, tmp_path / "run")
    os.rename(tmp_path / "run", tmp_path / ".old-run-0123abcd")
    runs, problems = list_runs(tmp_path)
    assert runs == [] and len(problems) == 1 and "rename this folder back" in problems[0]
    with pytest.raises(ModelLoadError, match="no model folder"):
        load_model(tmp_path / "run")
    os.rename(tmp_path / ".old-run-0123abcd", tmp_path / "run")  # what the note asks: the old model, whole
    _assert_same_embeddings(model, load_model(tmp_path / "run")[0])


def test_list_runs_of_missing_root_is_empty(tmp_path):
    assert list_runs(tmp_path / "absent") == ([], [])
