"""Hostile model folders are refused fast, in bounded memory, with one clear ModelLoadError.

Each test saves a real tiny model (every dimension different, so a transposed tensor cannot pass),
tampers with one thing, and loads it. The rules under test (core/saving/files.py, core/saving/
model_folder.py, core/models/registry.py):

1. only regular files inside the folder are opened, without blocking (a FIFO, /dev/zero, a folder, a
   symlink out of the folder are refused at once);
2. every file has a size cap, checked before reading;
3. every size field is bounded, and the parameter count, computed in closed form before anything is
   allocated, must be under SIAMESE_LAB_MAX_PARAMETERS (default 200 million);
4. MiniLM's ``bert`` sub-config takes only known BertConfig keys with bounded values;
5. vocabulary, config and tensor shapes agree; a tokenizer.json gives only its WordLevel vocabulary (ids
   exactly 0..n-1, <pad> 0 and <unk> 1), which goes into our own pipeline: no pattern of the file runs;
6. no NaN or infinite weight, and every weight in the dtype the config's model has (no float64, no booleans);
7. the metadata inference reads (thresholds, name, metrics) has the right shape;
8. model.safetensors gets the same mode as the other files.
"""
from __future__ import annotations

import json
import math
import os
import resource
import shutil
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from core.cli.main import main
from core.models import (
    DualEncoder,
    DualEncoderConfig,
    MiniLM,
    MiniLMConfig,
    ModelTooLarge,
    SiameseLSTM,
    SiameseLSTMConfig,
    check_model_size,
    load_model,
    max_parameters,
)
from core.models.minilm import BERT_DEFAULTS
from core.saving import (
    CONFIG_FILE,
    RECORD_FILE,
    WEIGHTS_FILE,
    ModelLoadError,
    check_regular_file,
    list_runs,
    read_regular_file,
    save_model,
)
from core.text.word_tokenizer import LEGACY_WORD_VOCAB_FILE, WORD_TOKENIZER_FILE, WordTokenizer
from core.text.wordpiece_tokenizer import WORDPIECE_VOCAB_FILE, bert_wordpiece, minilm_folder

VOCAB, EMBED, HIDDEN = 99, 24, 32
HANG = 120.0  # seconds: a refusal takes milliseconds; a loader still running after this is stuck (on a FIFO)
TINY_BERT = {"vocab_size": 30522, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
             "intermediate_size": 20, "max_position_embeddings": 40, "type_vocab_size": 2, "hidden_act": "gelu"}


def _word_tokenizer(size: int = VOCAB, max_length: int = 13) -> WordTokenizer:
    return WordTokenizer(["<pad>", "<unk>"] + [f"w{i}" for i in range(size - 2)], max_length=max_length)


def _tiny_lstm() -> SiameseLSTM:
    torch.manual_seed(1)
    config = SiameseLSTMConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN, bidirectional=True)
    return SiameseLSTM(config, _word_tokenizer()).eval()


def _tiny_dual() -> DualEncoder:
    torch.manual_seed(2)
    tokenizer = bert_wordpiece(max_length=17)
    config = DualEncoderConfig(vocab_size=tokenizer.vocab_size, d_model=8, num_heads=2, num_layers=1, ff_dim=10,
                               max_length=17, projection_dim=6)
    return DualEncoder(config, tokenizer).eval()


def _tiny_minilm() -> MiniLM:
    torch.manual_seed(3)
    return MiniLM(MiniLMConfig(max_length=20, bert=dict(TINY_BERT)), bert_wordpiece(max_length=20)).eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    return {"lstm": save_model(_tiny_lstm(), root / "lstm", metadata={"name": "lstm", "thresholds": {"accuracy": 0.5}}),
            "dual-transformer": save_model(_tiny_dual(), root / "dual"),
            "minilm": save_model(_tiny_minilm(), root / "minilm")}


@pytest.fixture
def folder(saved, tmp_path):
    """A fresh copy of the saved tiny LSTM, to tamper with."""
    return Path(shutil.copytree(saved["lstm"], tmp_path / "m"))


def _copy(saved, tmp_path, kind: str) -> Path:
    return Path(shutil.copytree(saved[kind], tmp_path / kind))


def _config(folder: Path) -> dict:
    return json.loads((folder / CONFIG_FILE).read_text())


def _write_config(folder: Path, config: dict) -> None:
    (folder / CONFIG_FILE).write_text(json.dumps(config))


def _as_legacy(folder: Path) -> Path:
    """``folder`` as word-token models were saved before tokenizer.json: word_vocab.txt, named in config.json."""
    (folder / LEGACY_WORD_VOCAB_FILE).write_text("\n".join(_word_tokenizer().vocab) + "\n", encoding="utf-8")
    (folder / WORD_TOKENIZER_FILE).unlink()
    config = _config(folder)
    config["tokenizer"]["vocab_file"] = LEGACY_WORD_VOCAB_FILE
    _write_config(folder, config)
    return folder


def _holding(folder: Path, name: str) -> Path:
    """``folder``, in the legacy layout when ``name`` is the legacy vocabulary file."""
    return _as_legacy(folder) if name == LEGACY_WORD_VOCAB_FILE else folder


def _refused(folder: Path, match: str | None = None, seconds: float = HANG) -> str:
    """Load ``folder`` in a thread; it must raise ModelLoadError (a loader still blocked on a FIFO after
    ``seconds`` is released by opening the FIFO's other end and fails the test, so the test never hangs)."""
    outcome: dict = {}

    def attempt():
        try:
            outcome["result"] = load_model(folder)
        except BaseException as error:  # noqa: BLE001 - reported below
            outcome["error"] = error

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for path in folder.iterdir():  # unblock a reader stuck on a FIFO
            if path.is_fifo():
                with open(os.open(path, os.O_WRONLY | os.O_NONBLOCK), "wb"):
                    pass
        thread.join(5)
        pytest.fail(f"load_model({folder}) still running after {seconds} s")
    error = outcome.get("error")
    assert isinstance(error, ModelLoadError), f"expected ModelLoadError, got {outcome!r}"
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    if match is not None:
        assert match.lower() in message.lower(), message
    return message


# ---- 1. regular files inside the folder, opened without blocking --------------------------------
ALL_FILES = [CONFIG_FILE, WORD_TOKENIZER_FILE, LEGACY_WORD_VOCAB_FILE, WEIGHTS_FILE]


@pytest.mark.parametrize("name", ALL_FILES)
def test_a_fifo_in_place_of_any_file_is_refused_at_once(folder, name):
    folder = _holding(folder, name)
    (folder / name).unlink()
    os.mkfifo(folder / name)
    assert name in _refused(folder, "FIFO")


@pytest.mark.parametrize("name", ALL_FILES)
def test_a_symlink_to_dev_zero_is_refused_at_once(folder, name):
    folder = _holding(folder, name)
    (folder / name).unlink()
    (folder / name).symlink_to("/dev/zero")
    assert name in _refused(folder)


def test_a_wordpiece_vocab_that_is_a_fifo_is_refused(saved, tmp_path):
    folder = _copy(saved, tmp_path, "dual-transformer")
    (folder / WORDPIECE_VOCAB_FILE).unlink()
    os.mkfifo(folder / WORDPIECE_VOCAB_FILE)
    _refused(folder, "FIFO")


@pytest.mark.parametrize("make,kind", [
    (lambda p: os.mkfifo(p), "FIFO"),
    (lambda p: p.mkdir(), "folder"),
    (lambda p: p.symlink_to("/dev/zero"), "device"),
])
def test_the_file_helper_refuses_everything_but_regular_files(tmp_path, make, kind):
    path = tmp_path / "thing"
    make(path)
    with pytest.raises(ModelLoadError, match=kind):
        read_regular_file(path, 1024)
    with pytest.raises(ModelLoadError, match=kind):
        check_regular_file(path, 1024)


def test_the_file_helper_reads_at_most_its_cap(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_regular_file(path, 100) == b"x" * 100 and check_regular_file(path, 100) == 100
    with pytest.raises(ModelLoadError, match="more than the 99"):
        read_regular_file(path, 99)
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", 10)


@pytest.mark.parametrize("name", [WORD_TOKENIZER_FILE, LEGACY_WORD_VOCAB_FILE])
def test_a_symlink_out_of_the_folder_is_refused(folder, tmp_path, name):
    folder = _holding(folder, name)
    outside = tmp_path / "elsewhere"
    shutil.copy(folder / name, outside)
    (folder / name).unlink()
    (folder / name).symlink_to(outside)
    _refused(folder, "outside")


@pytest.mark.parametrize("name", [WORD_TOKENIZER_FILE, LEGACY_WORD_VOCAB_FILE])
def test_a_symlink_inside_the_folder_is_fine(folder, name):
    folder = _holding(folder, name)
    (folder / name).rename(folder / "real-file")
    (folder / name).symlink_to("real-file")
    assert load_model(folder)[0].tokenizer.vocab == _word_tokenizer().vocab


# ---- 2. size caps, checked before reading -------------------------------------------------------
@pytest.mark.parametrize("name,size", [(CONFIG_FILE, 1024**2 + 1), (WORD_TOKENIZER_FILE, 64 * 1024**2 + 1),
                                       (LEGACY_WORD_VOCAB_FILE, 64 * 1024**2 + 1), (WEIGHTS_FILE, 64 * 1024**2)])
def test_files_over_their_cap_are_refused_unread(folder, name, size):
    folder = _holding(folder, name)
    with open(folder / name, "r+b") as handle:
        handle.truncate(size)  # sparse: costs no disk, and would cost `size` bytes of memory if read
    assert "allowed" in _refused(folder, name)


# ---- 3. sizes bounded before anything is allocated ------------------------------------------------
def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("edit,match", [
    ({"num_layers": 10_000_000}, "implausibly large"),
    ({"num_layers": 60, "hidden_size": 4096}, "SIAMESE_LAB_MAX_PARAMETERS"),
    ({"vocab_size": 9_000_000, "embedding_dim": 1000}, "SIAMESE_LAB_MAX_PARAMETERS"),
    ({"embedding_dim": 10_000_001}, "implausibly large"),
])
def test_huge_lstm_configs_are_refused_without_allocating(folder, edit, match):
    config = _config(folder)
    config["model_config"].update(edit)
    _write_config(folder, config)
    before = _max_rss_mib()
    _refused(folder, match)
    assert _max_rss_mib() - before < 100  # nothing large was allocated


@pytest.mark.parametrize("edit,match", [
    ({"num_layers": 65}, "implausibly large"),
    ({"d_model": 65536, "num_heads": 1, "ff_dim": 65536}, "SIAMESE_LAB_MAX_PARAMETERS"),
    ({"num_heads": 0}, "divisible"),
    ({"pad_id": 10_000_000}, "pad_id"),
])
def test_huge_or_broken_dual_encoder_configs_are_refused(saved, tmp_path, edit, match):
    folder = _copy(saved, tmp_path, "dual-transformer")
    config = _config(folder)
    config["model_config"].update(edit)
    _write_config(folder, config)
    _refused(folder, match, seconds=2)


def test_the_parameter_limit_can_be_raised(folder, monkeypatch):
    parameters = SiameseLSTM.parameter_count(_tiny_lstm().config)
    monkeypatch.setenv("SIAMESE_LAB_MAX_PARAMETERS", str(parameters - 1))
    message = _refused(folder, "SIAMESE_LAB_MAX_PARAMETERS")
    assert f"{parameters:,}" in message
    monkeypatch.setenv("SIAMESE_LAB_MAX_PARAMETERS", str(parameters))
    model, _ = load_model(folder)
    assert sum(p.numel() for p in model.parameters()) == parameters


def test_the_parameter_limit_default_and_bad_values(monkeypatch):
    monkeypatch.delenv("SIAMESE_LAB_MAX_PARAMETERS", raising=False)
    assert max_parameters() == 200_000_000
    monkeypatch.setenv("SIAMESE_LAB_MAX_PARAMETERS", "1_000_000_000")
    assert max_parameters() == 1_000_000_000
    for bad in ("lots", "-5", "0", "1e9"):
        monkeypatch.setenv("SIAMESE_LAB_MAX_PARAMETERS", bad)
        with pytest.raises(ValueError, match="SIAMESE_LAB_MAX_PARAMETERS"):
            max_parameters()


def test_a_bad_parameter_limit_is_a_load_error(folder, monkeypatch):
    monkeypatch.setenv("SIAMESE_LAB_MAX_PARAMETERS", "lots")
    _refused(folder, "SIAMESE_LAB_MAX_PARAMETERS")


def test_check_model_size_counts_without_building():
    config = SiameseLSTMConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN)
    assert check_model_size("lstm", config) == SiameseLSTM.parameter_count(config)
    with pytest.raises(ModelTooLarge, match="SIAMESE_LAB_MAX_PARAMETERS") as caught:
        check_model_size("lstm", SiameseLSTMConfig(num_layers=10_000_000))
    assert isinstance(caught.value, ValueError)


# ---- parameter_count is exact, for every family ---------------------------------------------------
def _numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_lstm_parameter_count_is_exact(bidirectional, num_layers):
    config = SiameseLSTMConfig(vocab_size=97, embedding_dim=11, hidden_size=13, num_layers=num_layers,
                               bidirectional=bidirectional)
    assert SiameseLSTM.parameter_count(config) == _numel(SiameseLSTM(config, _word_tokenizer(97)))


@pytest.mark.parametrize("share_towers", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_dual_encoder_parameter_count_is_exact(share_towers, num_layers):
    config = DualEncoderConfig(vocab_size=97, d_model=12, num_heads=3, num_layers=num_layers, ff_dim=17,
                               max_length=19, projection_dim=7, share_towers=share_towers)
    assert DualEncoder.parameter_count(config) == _numel(DualEncoder(config, _word_tokenizer(97)))


def test_minilm_parameter_count_is_exact():
    bert = {"vocab_size": 97, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
            "intermediate_size": 17, "max_position_embeddings": 19, "type_vocab_size": 3}
    config = MiniLMConfig(bert=bert)
    assert MiniLM.parameter_count(config) == _numel(MiniLM(config, _word_tokenizer(97)))


def test_minilm_size_defaults_are_bert_configs():
    from transformers import BertConfig

    defaults = BertConfig()
    assert {key: getattr(defaults, key) for key in BERT_DEFAULTS} == BERT_DEFAULTS


# ---- 4. the MiniLM bert sub-config ----------------------------------------------------------------
@pytest.mark.parametrize("edit,match", [
    ({"hidden_size": 65536, "num_hidden_layers": 64, "num_attention_heads": 64, "intermediate_size": 65536},
     "SIAMESE_LAB_MAX_PARAMETERS"),
    ({"num_hidden_layers": 10_000}, "num_hidden_layers"),
    ({"max_position_embeddings": 10_000_000}, "max_position_embeddings"),
    ({"add_cross_attention": True}, "add_cross_attention"),
    ({"is_decoder": True}, "is_decoder"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ({"hidden_act": "os.system"}, "hidden_act"),
    ({"hidden_dropout_prob": float("nan")}, "hidden_dropout_prob"),
    ({"layer_norm_eps": -1}, "layer_norm_eps"),
    ({"num_attention_heads": 5}, "divisible"),
    ({"pad_token_id": 40_000}, "pad_token_id"),
    ({"return_dict": False}, "return_dict"),
    ({"attn_implementation": "flash"}, "unknown"),
    ({"hidden_size": "12"}, "hidden_size"),
    ({"hidden_size": True}, "hidden_size"),
])
def test_bad_bert_sub_configs_are_refused(saved, tmp_path, edit, match):
    folder = _copy(saved, tmp_path, "minilm")
    config = _config(folder)
    config["model_config"]["bert"].update(edit)
    _write_config(folder, config)
    before = _max_rss_mib()
    _refused(folder, match, seconds=2)
    assert _max_rss_mib() - before < 100


def test_the_installed_minilm_config_passes_the_bert_checks():
    from core.saving import read_json_file

    bert = read_json_file(minilm_folder() / "config.json")
    config = MiniLMConfig(bert=bert)
    assert check_model_size("minilm", config) == 22_565_376


# ---- 5. vocabulary, config and tensors agree ------------------------------------------------------
@pytest.mark.parametrize("keep", [VOCAB - 9, VOCAB + 9])
def test_a_word_vocabulary_of_another_size_is_refused(folder, keep):
    _as_legacy(folder)
    words = [f"w{i}" for i in range(keep - 2)]
    (folder / LEGACY_WORD_VOCAB_FILE).write_text("\n".join(["<pad>", "<unk>", *words]) + "\n", encoding="utf-8")
    _refused(folder, f"vocab_size {VOCAB}")


@pytest.mark.parametrize("kind", ["dual-transformer", "minilm"])
def test_a_wordpiece_vocabulary_shorter_than_the_config_is_refused(saved, tmp_path, kind):
    folder = _copy(saved, tmp_path, kind)
    lines = (folder / WORDPIECE_VOCAB_FILE).read_bytes().split(b"\n")
    (folder / WORDPIECE_VOCAB_FILE).write_bytes(b"\n".join(lines[:-1001]) + b"\n")
    _refused(folder, "vocab_size 30,522")


def test_a_vocabulary_of_a_million_lines_is_refused(folder):
    _as_legacy(folder)
    (folder / LEGACY_WORD_VOCAB_FILE).write_bytes(b"<pad>\n<unk>\n" + b"w\n" * 1_000_000)
    _refused(folder, "1,000,002 entries, but config.json says vocab_size")


# ---- 5b. tokenizer.json: only its WordLevel vocabulary is read, checked, and put in our own pipeline ---
def _edit_tokenizer_json(folder: Path, edit) -> None:
    document = json.loads((folder / WORD_TOKENIZER_FILE).read_text(encoding="utf-8"))
    edit(document["model"])
    (folder / WORD_TOKENIZER_FILE).write_text(json.dumps(document), encoding="utf-8")


@pytest.mark.parametrize("data,match", [
    (b"not json at all", "not valid JSON"), (b"\xff\xfe{}", "not valid JSON"), (b"", "not valid JSON"),
    (b"[]", "WordLevel"), (b'{"model": null}', "WordLevel"), (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
])
def test_a_tokenizer_json_that_is_no_word_level_tokenizer_is_refused(folder, data, match):
    (folder / WORD_TOKENIZER_FILE).write_bytes(data)
    assert WORD_TOKENIZER_FILE in _refused(folder, match)


# The saved vocabulary: <pad> 0, <unk> 1, then w0..w96 with ids 2..98 (VOCAB = 99 in all).
@pytest.mark.parametrize("edit,match", [
    (lambda m: m.update(type="BPE"), "WordLevel"),
    (lambda m: m.update(vocab=[["<pad>", 0], ["<unk>", 1]]), "word -> id"),
    (lambda m: m["vocab"].update(w5=500), "exactly 0..98"),  # a gap: id 7 unused
    (lambda m: m["vocab"].update(w5=6), "each once"),  # w4 and w5 both 6
    (lambda m: m["vocab"].update(w5=-1), "exactly 0..98"),
    (lambda m: m["vocab"].update(w5="7"), "exactly 0..98"),
    (lambda m: m["vocab"].update(w5=7.0), "exactly 0..98"),
    (lambda m: m["vocab"].update(w5=True), "exactly 0..98"),
    (lambda m: m["vocab"].update({"<pad>": 1, "<unk>": 0}), "<pad> and <unk>"),
    (lambda m: m["vocab"].update({"<pad>": 2, "w0": 0}), "<pad> and <unk>"),
    (lambda m: (m["vocab"].pop("<unk>"), m["vocab"].update(unknown=1)), "<pad> and <unk>"),
    (lambda m: m["vocab"].update(w97=99), "vocab_size 99"),  # one more word than the embedding table's rows
    (lambda m: m["vocab"].pop("w96"), "vocab_size 99"),  # one fewer
])
def test_a_tokenizer_json_vocabulary_must_be_ids_0_to_n_with_pad_and_unk_first(folder, edit, match):
    _edit_tokenizer_json(folder, edit)
    _refused(folder, match)


def test_a_tokenizer_json_with_a_word_twice_is_refused(folder):
    text = (folder / WORD_TOKENIZER_FILE).read_text(encoding="utf-8")
    assert text.count('"w4":6,') == 1
    (folder / WORD_TOKENIZER_FILE).write_text(text.replace('"w4":6,', '"w4":6,"w4":7,'), encoding="utf-8")
    _refused(folder, "each once")  # JSON keeps the last "w4": id 6 is then missing and 7 taken twice


def test_a_tokenizer_json_of_many_words_is_refused_by_its_size(folder):
    vocab = {"<pad>": 0, "<unk>": 1, **{f"w{i}": i + 2 for i in range(100_000)}}
    (folder / WORD_TOKENIZER_FILE).write_text(json.dumps({"model": {"type": "WordLevel", "vocab": vocab}}))
    _refused(folder, "100,002 entries, but config.json says vocab_size 99")


def test_the_patterns_in_a_tokenizer_json_never_run(saved, folder):
    """A pre-tokenizer pattern that backtracks for ever on "xxx...x", and a normaliser that would change
    every id: loading ignores both (the pipeline is rebuilt from core.text.word_tokenizer)."""
    document = json.loads((folder / WORD_TOKENIZER_FILE).read_text(encoding="utf-8"))
    document["normalizer"] = {"type": "Replace", "pattern": {"String": "w"}, "content": "v"}
    document["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Isolated",
                                 "invert": False}
    (folder / WORD_TOKENIZER_FILE).write_text(json.dumps(document), encoding="utf-8")
    model, _ = load_model(folder)
    texts = ["x" * 5000, "w1 W2 w3 what?"]
    assert model.tokenizer.encode(texts).ids.tolist() == [[1, 0, 0, 0, 0], [3, 4, 5, 1, 1]]  # w1 = 3 ...
    original, _ = load_model(saved["lstm"])
    torch.testing.assert_close(model.encode(texts), original.encode(texts), rtol=0, atol=0)


@pytest.mark.parametrize("vocab_file", ["../lstm/tokenizer.json", "/etc/passwd", CONFIG_FILE, WORDPIECE_VOCAB_FILE,
                                        ["tokenizer.json"], 7])
def test_the_tokenizer_file_setting_names_one_of_the_known_files(folder, vocab_file):
    config = _config(folder)
    config["tokenizer"]["vocab_file"] = vocab_file
    _write_config(folder, config)
    _refused(folder, "vocab_file")


def test_a_tokenizer_longer_than_the_position_table_is_refused(saved, tmp_path):
    folder = _copy(saved, tmp_path, "dual-transformer")
    config = _config(folder)
    config["tokenizer"]["max_length"] = 18  # the model has 17 positions
    _write_config(folder, config)
    _refused(folder, "positions")
    folder = _copy(saved, tmp_path / "b", "minilm")
    config = _config(folder)
    config["tokenizer"]["max_length"] = 41  # bert has 40
    _write_config(folder, config)
    _refused(folder, "positions")


def test_the_tokenizer_settings_must_be_an_object(folder):
    config = _config(folder)
    config["tokenizer"] = ["word", 13]
    _write_config(folder, config)
    _refused(folder, "tokenizer")


# ---- 6. non-finite weights ------------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("kind,tensor", [("lstm", "lstm.weight_hh_l0_reverse"), ("minilm", "bert.encoder.layer.1.output.dense.bias")])
def test_non_finite_weights_are_refused_by_name(saved, tmp_path, value, kind, tensor):
    folder = _copy(saved, tmp_path, kind)
    weights = load_file(str(folder / WEIGHTS_FILE))
    weights[tensor] = weights[tensor].clone()
    weights[tensor].view(-1)[3] = value
    save_file(weights, str(folder / WEIGHTS_FILE))
    assert repr(tensor) in _refused(folder, "NaN or infinite")


def _rewrite_weights(folder: Path, change) -> None:
    """model.safetensors with every tensor replaced by ``change(tensor)``."""
    weights = load_file(str(folder / WEIGHTS_FILE))
    save_file({name: change(tensor).contiguous() for name, tensor in weights.items()}, str(folder / WEIGHTS_FILE))


def test_float64_weights_are_refused_even_when_finite(folder):
    # 1e300 is finite in float64 and an infinity once cast to the model's float32.
    _rewrite_weights(folder, lambda tensor: torch.full(tensor.shape, 1e300, dtype=torch.float64))
    message = _refused(folder, "float64")
    assert "this model's weights are float32" in message


@pytest.mark.parametrize("kind", ["lstm", "dual-transformer"])
def test_boolean_weights_are_refused(saved, tmp_path, kind):
    # Booleans would load as weights of 0 and 1: a model that calls every pair similar.
    folder = _copy(saved, tmp_path, kind)
    _rewrite_weights(folder, lambda tensor: tensor > 0)
    _refused(folder, "is bool; this model's weights are float32")


def test_weights_of_the_models_own_dtype_still_load(folder):
    _rewrite_weights(folder, lambda tensor: tensor.clone())
    model, _ = load_model(folder)
    assert {value.dtype for value in model.state_dict().values()} == {torch.float32}


# ---- 7. the metadata inference reads ---------------------------------------------------------------
@pytest.mark.parametrize("thresholds", [None, [0.5], "x", {"accuracy": float("nan")}, {"accuracy": float("inf")},
                                        {"accuracy": 5.0}, {"accuracy": "0.5"}, {"accuracy": True},
                                        {"accuracy": None}, float("nan")])
def test_unusable_thresholds_are_refused(folder, thresholds):
    config = _config(folder)
    config["thresholds"] = thresholds
    _write_config(folder, config)  # json.dumps writes NaN / Infinity, which Python's json reads back
    _refused(folder, "thresholds")


@pytest.mark.parametrize("thresholds", [{}, {"accuracy": -0.25, "f1": 1.000001}, {"accuracy": 1}])
def test_usable_thresholds_load(folder, thresholds):
    config = _config(folder)
    config["thresholds"] = thresholds
    _write_config(folder, config)
    assert load_model(folder)[1]["thresholds"] == thresholds


@pytest.mark.parametrize("field,value", [("name", 5), ("name", ["a"]), ("metrics", [1]),
                                         ("metrics", {"validation": [0.5]}), ("model_config", [1])])
def test_other_metadata_of_the_wrong_shape_is_refused(folder, field, value):
    config = _config(folder)
    config[field] = value
    _write_config(folder, config)
    _refused(folder, field)


def test_a_missing_thresholds_field_is_fine(folder):
    config = _config(folder)
    del config["thresholds"]
    _write_config(folder, config)
    assert "thresholds" not in load_model(folder)[1]


@pytest.mark.parametrize("text", [b'{"format": ' + b"1" * 5000 + b"}", b"\xff\xfe{}", b'{"a": "unterminated',
                                  b"", b"null", b'"just a string"'])
def test_configs_that_are_not_usable_json_are_refused(folder, text):
    (folder / CONFIG_FILE).write_bytes(text)
    _refused(folder, CONFIG_FILE)


def test_list_runs_reports_a_folder_with_bad_metadata(saved, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(saved["lstm"], root / "good")
    bad = Path(shutil.copytree(saved["lstm"], root / "bad"))
    config = _config(bad)
    config["thresholds"] = None
    _write_config(bad, config)
    runs, problems = list_runs(root)
    assert [run["name"] for run in runs] == ["lstm"]  # the config's own name
    assert len(problems) == 1 and problems[0].startswith("bad:") and "thresholds" in problems[0]


def test_the_cli_turns_a_hostile_folder_into_one_error_line(folder, capsys):
    config = _config(folder)
    config["thresholds"] = None
    _write_config(folder, config)
    assert main(["predict", "--model", str(folder), "How old are you?", "What is your age?"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "thresholds" in err[0]


# ---- 8. file modes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_every_saved_file_gets_the_umask_mode(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        folder = save_model(_tiny_lstm(), tmp_path / "m")
    finally:
        os.umask(previous)
    modes = {path.name: path.stat().st_mode & 0o777 for path in folder.iterdir()}
    assert modes == {CONFIG_FILE: mode, WEIGHTS_FILE: mode, WORD_TOKENIZER_FILE: mode, RECORD_FILE: mode}


# ---- the good folders still load, fast -----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["lstm", "dual-transformer", "minilm"])
def test_untampered_tiny_folders_load(saved, kind):
    model, config = load_model(saved[kind])
    assert config["model_type"] == kind
    scores = model.score_pairs(["How old are you?"], ["What is your age?"])
    assert math.isfinite(float(scores[0]))
