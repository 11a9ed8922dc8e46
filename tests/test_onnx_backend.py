"""``--backend onnx``: predict / embed / search on the exported graph (onnxruntime, CPU) say what the PyTorch
model says (within 1e-4); the graph is cached in the lab's cache (``SIAMESE_LAB_CACHE``, a session tmp folder
here), keyed by the model's content, reused, and exported again when the content changes; nothing is written
into the model folder; an export folder works as --model and stays as it is; bad input is one error line."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import core.export.onnx_backend as onnx_backend
from core.cli.main import main
from core.export.export_folder import export_model
from core.export.onnx_backend import CACHE_ENV, OnnxBackendError, OnnxEncoder, cache_entry, onnx_model, search_cache
from core.models import load_model
from core.saving import save_model
from core.text.word_tokenizer import WordTokenizer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
PAIRS = [("How do I learn Python?", "What is the best way to learn Python?"),
         ("Why don't cats like water?", "Café ΟΔΟΣ 😀 日本 42?"),
         ("a", " ".join(["long"] * 90))]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder``, with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_models, sample_pairs) -> dict[str, Path]:
    """Copies of the session's tiny LSTM and dual encoder, an untrained bidirectional LSTM, and an untrained
    one on WordPiece tokens with mean+max pooling."""
    from core.models.siamese_lstm import SiameseLSTM, SiameseLSTMConfig
    from core.text.wordpiece_tokenizer import bert_wordpiece

    root = tmp_path_factory.mktemp("backend")
    folders = {name: Path(shutil.copytree(folder, root / name)) for name, folder in tiny_models.items()}
    pairs, _ = sample_pairs
    tokenizer = WordTokenizer.build(pairs["question1"].tolist(), min_freq=1, max_length=20)
    torch.manual_seed(1)
    model = SiameseLSTM(SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=5, hidden_size=7,
                                          num_layers=1, bidirectional=True), tokenizer)
    folders["lstm-bi"] = save_model(model, root / "lstm-bi", metadata={"thresholds": {"accuracy": 0.4, "f1": 0.4}})
    wordpiece = bert_wordpiece(max_length=20)
    model = SiameseLSTM(SiameseLSTMConfig(vocab_size=wordpiece.vocab_size, embedding_dim=6, hidden_size=9,
                                          bidirectional=True, tokens="wordpiece", pooling="mean+max"), wordpiece)
    folders["lstm-wordpiece"] = save_model(model, root / "lstm-wordpiece",
                                           metadata={"thresholds": {"accuracy": 0.3, "f1": 0.3}})
    return folders


@pytest.mark.slow
@pytest.mark.parametrize("family", ["lstm", "lstm-bi", "lstm-wordpiece", "dual-transformer"])
def test_predict_onnx_equals_torch(family, models, capsys):
    folder = models[family]
    for question1, question2 in PAIRS:
        outputs = {}
        for backend in ("torch", "onnx"):
            code, out, err = run_cli(capsys, "predict", "--model", folder, "--backend", backend, question1, question2)
            assert code == 0, err
            outputs[backend] = json.loads(out)
        assert abs(outputs["onnx"]["similarity"] - outputs["torch"]["similarity"]) <= 1e-4, outputs
        assert outputs["onnx"]["threshold"] == outputs["torch"]["threshold"]
        assert outputs["onnx"]["verdict"] == outputs["torch"]["verdict"] or \
            abs(outputs["torch"]["similarity"] - outputs["torch"]["threshold"]) < 1e-4
    assert (cache_entry(folder)[0] / "model.onnx").is_file()  # the cache, in the lab's own folder ...
    assert not (folder / "onnx").exists() and not any(p.name.startswith(".tmp") for p in folder.parent.iterdir())


def test_encoder_equals_the_model_on_many_texts(models, sample_pairs):
    pairs, _ = sample_pairs
    texts = pairs["question1"].tolist()[:150] + ["", "  ", "ΟΔΟΣ", "😀", " ".join(["x"] * 100)]
    for family in ("lstm", "dual-transformer"):
        model, _ = load_model(models[family])
        encoder, config = onnx_model(models[family])
        assert config["thresholds"] == json.loads((models[family] / "config.json").read_text())["thresholds"]
        for tower in (0, 1):
            want = torch.nn.functional.normalize(model.encode(texts, tower=tower), dim=-1)
            got = encoder.encode(texts, tower=tower, batch_size=32)
            assert got.shape == want.shape and got.dtype == torch.float32
            assert float((got - want).abs().max()) <= 1e-4
        half = len(texts) // 2
        first, second = texts[:half], texts[half : 2 * half]
        assert np.abs(encoder.score_pairs(first, second) - model.score_pairs(first, second)).max() <= 1e-4
        assert encoder.encode([]).shape == (0, model.embedding_dim)


class _CountingSession:
    """An onnxruntime session that counts its runs and the threads they ran on. With ``first_two_meet``, its first
    two runs each wait for the other to start, so they prove two batches in flight at once however the machine
    schedules the threads (one thread alone would break the barrier: the wait is only a guard against a hang)."""

    def __init__(self, session, first_two_meet: bool = False):
        import threading

        self.session, self.runs, self.threads, self._lock = session, 0, set(), threading.Lock()
        self._first_two = threading.Barrier(2) if first_two_meet else None

    def run(self, outputs, feed):
        import threading

        with self._lock:
            self.runs += 1
            first_two = self._first_two is not None and self.runs <= 2
            self.threads.add(threading.get_ident())
        if first_two:
            self._first_two.wait(timeout=120)
        return self.session.run(outputs, feed)


@pytest.mark.parametrize("family", ["lstm", "dual-transformer"])
def test_batches_run_side_by_side_with_the_vectors_of_one_thread(models, sample_pairs, family):
    pairs, _ = sample_pairs
    texts = pairs["question1"].tolist()[:97] + ["", " ".join(["x"] * 60)]
    export = onnx_model(models[family])[0].folder
    alone, side_by_side = OnnxEncoder(export, threads=1), OnnxEncoder(export, threads=3)
    counting = side_by_side._sessions[1] = _CountingSession(side_by_side._sessions[1], first_two_meet=True)
    seen = []
    for tower in (0, 1):
        want = alone.encode(texts, tower=tower, batch_size=8)
        got = side_by_side.encode(texts, tower=tower, batch_size=8,
                                  progress=lambda done, total: seen.append((tower, done, total)))
        assert got.shape == (99, alone.embedding_dim)
        assert float((got - want).abs().max()) <= 1e-5
    assert counting.runs == 13 and len(counting.threads) > 1  # ceil(99 / 8) batches, two of them at once
    ones = [done for tower, done, total in seen if tower == 1]
    assert ones == sorted(ones) and ones[-1] == 99 and len(ones) == 13 and {t for _, _, t in seen} == {99}
    # Fewer texts than batch_size still make one batch per worker.
    counting.runs = 0
    side_by_side.encode(texts[:10], tower=1, batch_size=256)
    assert counting.runs == 3


def test_a_progress_callback_that_raises_stops_the_batches_not_yet_started(models, sample_pairs, monkeypatch):
    """Deterministic under any scheduling: every batch but the first waits at a gate that opens only once
    the pool has dropped the batches not yet started, so each of the two workers can have taken at most
    one batch besides the first, whatever the timing; encode returns only when they are done."""
    import threading

    pairs, _ = sample_pairs
    texts = pairs["question1"].tolist()[:400]
    encoder = OnnxEncoder(onnx_model(models["lstm"])[0].folder, threads=2)
    rows = encoder.token_rows(texts)
    from core.models.base import TOKEN_BUDGETS, encoding_batches

    first = encoding_batches(np.array([len(row) for row in rows]), 4, TOKEN_BUDGETS.get(encoder.model_type))[0]
    width = max(len(rows[i]) for i in first)
    want = np.full((len(first), width), encoder.pad_id, dtype=np.int64)
    for row, index in enumerate(first):
        want[row, : len(rows[index])] = rows[index]
    gate, calls = threading.Event(), []

    class Gated(_CountingSession):
        active = 0

        def run(self, outputs, feed):
            with self._lock:
                self.active += 1
            try:
                if not np.array_equal(feed["input_ids"], want):
                    assert gate.wait(60), "the gate never opened"
                return super().run(outputs, feed)
            finally:
                with self._lock:
                    self.active -= 1

    class DropThenOpen(onnx_backend.ThreadPoolExecutor):
        def shutdown(self, wait=True, *, cancel_futures=False):
            super().shutdown(wait=False, cancel_futures=cancel_futures)  # the batches not yet started go
            gate.set()
            super().shutdown(wait=wait)

    monkeypatch.setattr(onnx_backend, "ThreadPoolExecutor", DropThenOpen)
    counting = encoder._sessions[0] = Gated(encoder._sessions[0])

    def cancel(done, total):
        calls.append(done)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        encoder.encode(texts, batch_size=4, progress=cancel)
    assert calls == [len(first)]  # the first batch reported, and nothing after the callback raised
    assert 1 <= counting.runs <= 1 + encoder.workers  # of 100 batches: the first, and one per worker at most
    assert counting.active == 0  # the running ones were waited for


def test_the_cache_is_keyed_by_content_not_by_file_times(models, tmp_path):
    folder = Path(shutil.copytree(models["lstm"], tmp_path / "lstm"))
    entry, _ = cache_entry(folder)
    assert onnx_model(folder)[0].folder == entry
    graph = entry / "model.onnx"
    stamp = graph.stat().st_mtime_ns
    # New times on every file (a copy, touch, an archive) and a copy elsewhere: the same content, the
    # same graph, reused.
    for path in folder.iterdir():
        os.utime(path, ns=(10**9, 10**9))
    copy = Path(shutil.copytree(folder, tmp_path / "copy"))
    assert onnx_model(folder)[0].folder == entry and onnx_model(copy)[0].folder == entry
    assert graph.stat().st_mtime_ns == stamp
    # One byte of the weights changed (the lowest of the last float): another key, another export.
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-4] ^= 1
    weights.write_bytes(bytes(data))
    changed = onnx_model(folder)[0].folder
    assert changed != entry and changed == cache_entry(folder)[0] and graph.stat().st_mtime_ns == stamp
    # The model saved again with other weights: its vectors, not the old graph's.
    model, config = load_model(folder)
    with torch.no_grad():
        model.embedding.weight.mul_(-1.0)
    save_model(model, folder, metadata={"thresholds": config["thresholds"]})
    encoder, _ = onnx_model(folder)
    want = model.encode(["How do I learn Python?"])
    assert float((encoder.encode(["How do I learn Python?"]) - want).abs().max()) <= 1e-4
    assert not (folder / "onnx").exists() and not (copy / "onnx").exists()


def test_an_export_folder_is_a_model_for_the_onnx_backend(models, tmp_path, capsys):
    model, config = load_model(models["dual-transformer"])
    export_model(model, config, tmp_path / "exported", "onnx")
    code, out, err = run_cli(capsys, "predict", "--model", tmp_path / "exported", "--backend", "onnx", *PAIRS[0])
    assert code == 0, err
    want = float(model.score_pairs([PAIRS[0][0]], [PAIRS[0][1]])[0])
    result = json.loads(out)
    assert abs(result["similarity"] - want) <= 1e-4 and result["threshold"] == config["thresholds"]["accuracy"]
    assert isinstance(OnnxEncoder(tmp_path / "exported"), OnnxEncoder)


def test_embed_and_search_on_onnx_equal_torch(models, tmp_path, capsys):
    folder = models["lstm"]
    vectors = {}
    for backend in ("torch", "onnx"):
        out = tmp_path / f"{backend}.npy"
        code, stdout, err = run_cli(capsys, "embed", "--model", folder, "--data", SAMPLE, "--out", out,
                                    "--backend", backend)
        assert code == 0, err
        vectors[backend] = np.load(out)
    assert vectors["onnx"].shape == vectors["torch"].shape
    assert np.abs(vectors["onnx"] - vectors["torch"]).max() <= 1e-4
    results = {}
    for backend in ("torch", "onnx", "onnx"):  # the second onnx search reuses its saved index
        code, stdout, err = run_cli(capsys, "search", "--model", folder, "--corpus", SAMPLE, 
                                    "-k", "5", "--backend", backend, "How do I learn Python?")
        assert code == 0, err
        rows = [json.loads(line) for line in stdout.splitlines()]
        if backend in results:
            assert rows == results[backend]
        results[backend] = rows
    assert [r["rank"] for r in results["onnx"]] == [1, 2, 3, 4, 5]
    torch_scores = {r["question"]: r["score"] for r in results["torch"]}
    for row in results["onnx"]:
        if row["question"] in torch_scores:
            assert abs(row["score"] - torch_scores[row["question"]]) <= 1e-4
    assert abs(results["onnx"][0]["score"] - results["torch"][0]["score"]) <= 1e-4
    # The ONNX index sits in the lab's cache, by the graphs' digest; nothing goes into the model folder for it.
    encoder = onnx_model(folder)[0]
    assert any(p.name.startswith("search-") for p in search_cache(encoder.digest).iterdir())
    assert not (folder / "onnx").exists()


def test_bad_input_is_one_line(models, tmp_path, capsys):
    model, config = load_model(models["lstm"])
    cases = [
        (["predict", "--model", tmp_path / "missing", "--backend", "onnx", "a", "b"], "no model folder"),
        (["predict", "--model", models["lstm"], "--backend", "onnx", "--device", "cuda", "a", "b"], "on the CPU"),
    ]
    broken = tmp_path / "broken"
    export_model(model, config, broken, "onnx")
    (broken / "model.onnx").write_bytes(b"not a graph")
    cases.append((["predict", "--model", broken, "--backend", "onnx", "a", "b"], "not an ONNX export this lab wrote"))
    for argv, message in cases:
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(OnnxBackendError):
        OnnxEncoder(tmp_path)
    # A read-only model folder is only read: the backend works and the folder stays as it was.
    folder = Path(shutil.copytree(models["lstm"], tmp_path / "readonly"))
    before = snapshot(folder)
    os.chmod(folder, 0o555)
    try:
        code, _, err = run_cli(capsys, "predict", "--model", folder, "--backend", "onnx", "a", "b")
        assert code == 0, err
    finally:
        os.chmod(folder, 0o755)
    assert snapshot(folder) == before
    # A cache that cannot be written: one line that says what to do instead.
    (tmp_path / "a-file").write_text("x")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path / "a-file" / "cache"))
        code, _, err = run_cli(capsys, "predict", "--model", folder, "--backend", "onnx", "a", "b")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "SIAMESE_LAB_CACHE" in err and "python -m core export --format onnx" in err


def test_score_and_dedup_on_onnx_equal_torch(models, tmp_path, capsys):
    """score: the same similarities within 1e-4 and the same verdicts away from the threshold; dedup: the
    same clusters at a threshold no pair sits near on either backend."""
    import pandas as pd

    folder = models["dual-transformer"]
    scored = {}
    for backend in ("torch", "onnx"):
        out = tmp_path / f"scored-{backend}.csv"
        code, stdout, err = run_cli(capsys, "score", "--model", folder, "--pairs", SAMPLE, "--out", out,
                                    "--threshold", "0.5", "--backend", backend)
        assert code == 0, err
        scored[backend] = pd.read_csv(out, keep_default_na=False)
        assert json.loads(stdout)["n"] == len(scored[backend])
    torch_scores, onnx_scores = scored["torch"]["similarity"], scored["onnx"]["similarity"]
    assert len(onnx_scores) == len(torch_scores) > 400
    assert (onnx_scores - torch_scores).abs().max() <= 1e-4
    clear = (torch_scores - 0.5).abs() > 1e-3
    assert (scored["onnx"]["predicted_duplicate"][clear] == scored["torch"]["predicted_duplicate"][clear]).all()

    clusters = {}
    for backend in ("torch", "onnx"):
        out = tmp_path / f"clusters-{backend}.csv"
        code, stdout, err = run_cli(capsys, "dedup", "--model", models["lstm"], "--questions", SAMPLE, "--out", out,
                                    "--threshold", "0.9", "--backend", backend)
        assert code == 0, err
        assert json.loads(stdout)["backend"] == backend
        frame = pd.read_csv(out, keep_default_na=False)
        clusters[backend] = sorted(sorted(group["question"]) for _, group in frame.groupby("cluster_id"))
    assert clusters["torch"] and clusters["onnx"] == clusters["torch"]
