"""No ONNX graph is trusted because of its file name, and ``--backend onnx`` writes only into the lab's cache.

* Every family's export, float32 and int8, uses only ``ALLOWED_OPS`` and gives the PyTorch model's vectors,
  both as the lab's own export (sealed, run as it is) and as a foreign one (checked, probed in a capped child).
* Only an export whose manifest carries this lab's seal and whose files have the bytes it records skips the
  foreign checks: under another cache, with its manifest edited or a graph swapped, it is foreign.
* A user's ``M/onnx/`` (notes, an int8 export, a forged graph) survives ``predict --backend onnx``
  byte-identical and is never run.
* Forged graphs (a ``Loop`` of 10**15 steps, a rank-1 output, ``ConstantOfShape`` of 2**34 floats, a
  size that explodes through shape arithmetic or only for 7-token texts, a size taken from the token ids,
  1 GiB at run time, a minute of matrix products, tensors stored in another file, a wrong output width, a
  manifest with ``embedding_dim`` 5 or ``pad_id`` 2**31 - 1), given as ``--model`` or planted in the lab's
  cache, are each refused in one ``error:`` line with exit 2 (or, in the cache, exported again over), by
  the CLI in a subprocess under a time limit and an address-space cap.
* 80 seeded random edits of genuine graphs each run or are refused in one error, never crash or hang.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from core.cli.main import main
from core.export.export_folder import export_model
from core.export.manifest import MANIFEST_FILE
from core.export.onnx_backend import OnnxBackendError, OnnxEncoder
from core.export.onnx_cache import CACHE_ENV, cache_entry
from core.export.onnx_checks import ALLOWED_OPS
from core.models import ZERO_SHOT, load_model
from core.text.word_tokenizer import WordTokenizer

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["How do I learn Python?", "", "Why don't cats like water???", "Café ΟΔΟΣ 😀 日本 42?",
         " ".join(["x"] * 90)]
PAIR = ("How do I learn Python?", "What is the best way to learn Python?")
MEMORY_CAP = 8 * 2**30  # address space of the CLI subprocess: far below what the forged graphs ask for
ARENA_CAP = 256 * 2**20  # onnxruntime's memory in that subprocess
TIME_LIMIT = 60
PROBE_SECONDS = 5  # the probe's time limit in that subprocess


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder``, with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


def operators(folder: Path) -> set[str]:
    ops = set()
    for path in folder.glob("*.onnx"):
        for node in onnx.load(str(path)).graph.node:
            ops.add(node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}")
    return ops


def assert_exports_pass(model, config, root: Path, name: str) -> set[str]:
    """Export ``model`` float32 and int8: only allowed operators; the vectors are the model's (float32
    within 1e-4, int8 pointing the same way) both as the lab's own export and, under another lab's cache,
    as a foreign one that passes the checks and the probe. Returns the operators used."""
    used = set()
    want = torch.nn.functional.normalize(model.encode(TEXTS, tower=1), dim=-1)
    for quantize in (None, "int8"):
        folder = root / f"{name}-{quantize or 'fp32'}"
        export_model(model, config, folder, "onnx", quantize=quantize)
        ops = operators(folder)
        assert ops <= ALLOWED_OPS, (name, quantize, ops - ALLOWED_OPS)
        used |= ops
        own, foreign = OnnxEncoder(folder), OnnxEncoder(folder, cache_root=root / "another-lab")
        assert own.lab_wrote and not foreign.lab_wrote
        for encoder in (own, foreign):
            got = encoder.encode(TEXTS, tower=1)
            if quantize is None:
                assert float((got - want).abs().max()) <= 1e-4, name
            else:
                assert float(torch.nn.functional.cosine_similarity(got, want).min()) > 0.9, name
    return used


def test_the_allowlist_holds_no_control_flow_and_no_operator_the_exporter_never_writes():
    assert not {"Loop", "Scan", "If", "Tile", "Resize", "Pad", "OneHot", "NonZero"} & {op.split(":")[-1]
                                                                                         for op in ALLOWED_OPS}


def test_every_small_family_exports_within_the_allowlist_and_passes(tiny_models, sample_pairs, tmp_path):
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
    used = set()
    for name, model in models.items():
        used |= assert_exports_pass(model.eval(), {"thresholds": {"accuracy": 0.5}}, tmp_path, name)
    assert {"LSTM", "com.microsoft:DynamicQuantizeLSTM", "MatMulInteger", "Range", "ConstantOfShape"} <= used


def test_zero_shot_minilm_exports_within_the_allowlist_and_passes(tmp_path):
    model, config = load_model(ZERO_SHOT)
    assert_exports_pass(model, config, tmp_path, "minilm")


def test_only_an_export_sealed_by_this_lab_skips_the_foreign_checks(tiny_models, tmp_path, monkeypatch):
    """The lab's own export runs without the probe; under another lab's cache, with its manifest edited
    (its hashes rewritten to match) or with a graph swapped, the same files are foreign: probed first."""
    import core.export.onnx_backend as onnx_backend

    probed, probe = [], onnx_backend.probe_in_child
    monkeypatch.setattr(onnx_backend, "probe_in_child", lambda graph, batches, path: probed.append(path) or
                        probe(graph, batches, path))
    model, config = load_model(tiny_models["lstm"])
    folder, other = tmp_path / "own", tmp_path / "other"
    export_model(model, config, folder, "onnx")
    export_model(model, config, other, "onnx", quantize="int8")
    assert OnnxEncoder(folder).lab_wrote and probed == []
    assert not OnnxEncoder(folder, cache_root=tmp_path / "another-lab").lab_wrote and len(probed) == 1
    # A genuine graph of another export swapped in, and the manifest's hash rewritten to match it.
    shutil.copy(other / "model.onnx", folder / "model.onnx")
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["sha256"]["model.onnx"] = hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert not OnnxEncoder(folder).lab_wrote and len(probed) == 2


# ---- a user's onnx/ folder is never touched ----------------------------------------------------
def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def torch_similarity(folder: Path, first: str, second: str) -> float:
    model, _ = load_model(folder)
    return float(model.score_pairs([first], [second])[0])


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


# ---- forged graphs -----------------------------------------------------------------------------
def _value(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def promised_width(folder: Path) -> int:
    return json.loads((folder / MANIFEST_FILE).read_text())["embedding_dim"]


def export_vocabulary(folder: Path) -> int:
    """The export's largest token id + 1, as the backend counts it."""
    from tokenizers import Tokenizer

    return max(Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab(with_added_tokens=True).values()) + 1


def forged_graph(path: Path, nodes: list, initializers: list, width: int | None = None, output_dims=None) -> None:
    """A graph over the export's inputs whose body is ``nodes``; its output ``sentence_embedding`` is
    declared float32 ``output_dims`` (default: batch x the manifest's width). ``emb`` (batch, sequence,
    width) and ``pooled`` (batch, width: unit vectors, as the manifest promises) are there to build on, so
    each forgery is refused for its own trap; ``width`` defaults to the manifest's."""
    promised = promised_width(path.parent)
    width = promised if width is None else width
    output_dims = ("batch", promised) if output_dims is None else output_dims
    base = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
        helper.make_node("Constant", [], ["axis1"], value=helper.make_tensor("a", TensorProto.INT64, [1], [1])),
        helper.make_node("ReduceSum", ["emb", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceL2", ["summed"], ["norm"], axes=[1], keepdims=1),
        helper.make_node("Div", ["summed", "norm"], ["pooled"]),
    ]
    rows = export_vocabulary(path.parent)
    table = helper.make_tensor("table", TensorProto.FLOAT, [rows, width],
                               np.random.default_rng(0).random(rows * width) + 0.1)
    graph = helper.make_graph(base + nodes, "forged",
                              [_value("input_ids", TensorProto.INT64, ["batch", "sequence"]),
                               _value("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
                              [_value("sentence_embedding", TensorProto.FLOAT, list(output_dims))],
                              [table, *initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


def _int64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _loop(folder: Path) -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Add", ["v", "one"], ["v_out"])],
        "body", [_value("i", TensorProto.INT64, []), _value("cond", TensorProto.BOOL, []),
                 _value("v", TensorProto.FLOAT, [])],
        [_value("cond_out", TensorProto.BOOL, []), _value("v_out", TensorProto.FLOAT, [])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    forged_graph(folder / "model.onnx", [
        helper.make_node("Loop", ["trips", "yes", "zero"], ["steps"], body=body),
        helper.make_node("Add", ["pooled", "steps"], ["sentence_embedding"])],
        [helper.make_tensor("trips", TensorProto.INT64, [], [10**15]),
         helper.make_tensor("yes", TensorProto.BOOL, [], [True]),
         helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])


def _rank_one(folder: Path, declared_rank: int = 1) -> None:
    declared = ("batch", promised_width(folder))[:declared_rank]
    forged_graph(folder / "model.onnx", [helper.make_node("ReduceSum", ["pooled", "axis1"], ["sentence_embedding"],
                                                           keepdims=0)], [], output_dims=declared)


def _constant_of_shape(folder: Path) -> None:
    forged_graph(folder / "model.onnx", [
        helper.make_node("ConstantOfShape", ["huge"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
        helper.make_node("Add", ["pooled", "total"], ["sentence_embedding"])], [_int64("huge", [2**34])])


def _sized_by(folder: Path, size_nodes: list, initializers=()) -> None:
    """A ``ConstantOfShape`` whose shape ``size_nodes`` compute into ``size``, added to the output."""
    forged_graph(folder / "model.onnx", [
        helper.make_node("Shape", ["input_ids"], ["dims"]),
        helper.make_node("Gather", ["dims", "one"], ["length"]),  # the sequence length, (1,)
        *size_nodes,
        helper.make_node("ConstantOfShape", ["size"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
        helper.make_node("Add", ["pooled", "total"], ["sentence_embedding"])],
        [_int64("one", [1]), *initializers])


def _power_of_twelve(folder: Path) -> None:  # length ** 12 elements, made from the input's shape
    _sized_by(folder, [helper.make_node("Concat", ["length"] * 12, ["size"], axis=0)])


def _only_for_one_length(folder: Path) -> None:  # 2**34 elements for texts as long as PAIR[0], else 1
    from tokenizers import Tokenizer

    length = len(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(PAIR[0]).ids)
    _sized_by(folder, [helper.make_node("Equal", ["length", "trap"], ["is_trap"]),
                       helper.make_node("Where", ["is_trap", "huge", "one"], ["size"])],
              [_int64("trap", [length]), _int64("huge", [2**34])])


def _over_the_arena(folder: Path) -> None:  # length x 2**24 floats: within the address space, over the arena
    _sized_by(folder, [helper.make_node("Concat", ["length", "wide"], ["size"], axis=0)], [_int64("wide", [2**24])])


def _minutes_of_products(folder: Path) -> None:  # 200 products of 2048 x 2048 matrices, within every memory cap
    nodes = [helper.make_node("ConstantOfShape", ["square"], ["m0"],
                              value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))]
    nodes += [helper.make_node("MatMul", [f"m{step}", "m0"], [f"m{step + 1}"]) for step in range(200)]
    forged_graph(folder / "model.onnx", nodes + [
        helper.make_node("ReduceSum", ["m200"], ["total"], keepdims=0),
        helper.make_node("Add", ["pooled", "total"], ["sentence_embedding"])], [_int64("square", [2048, 2048])])


def _from_token_ids(folder: Path) -> None:  # as many elements as the largest token id times 10**9
    _sized_by(folder, [helper.make_node("ReduceMax", ["input_ids"], ["top"], keepdims=0),
                       helper.make_node("Mul", ["top", "billion"], ["scaled"]),
                       helper.make_node("Unsqueeze", ["scaled", "zero"], ["size"])],
              [helper.make_tensor("billion", TensorProto.INT64, [], [10**9]), _int64("zero", [0])])


def _external_data(folder: Path) -> None:
    forged_graph(folder / "model.onnx", [helper.make_node("Add", ["pooled", "far"], ["sentence_embedding"])], [])
    model = onnx.load(str(folder / "model.onnx"))
    far = helper.make_tensor("far", TensorProto.FLOAT, [1], np.zeros(1))
    far.ClearField("float_data")
    far.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "../../../../etc/shadow"), ("offset", "0"), ("length", "4")):
        far.external_data.add(key=key, value=value)
    model.graph.initializer.append(far)
    (folder / "model.onnx").write_bytes(model.SerializeToString())


def _wrong_width(folder: Path) -> None:  # vectors of 3 numbers, declared and promised wider
    forged_graph(folder / "model.onnx", [helper.make_node("Identity", ["pooled"], ["sentence_embedding"])], [],
                 width=3)


def _manifest(**changes):
    def forge(folder: Path) -> None:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        manifest.update(changes)
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    return forge


FORGERIES = {
    "loop": (_loop, "Loop"),
    "rank-1 output": (_rank_one, "one float32 matrix"),
    "rank-1 output declared rank 2": (lambda f: _rank_one(f, 2), "differ in rank"),
    "ConstantOfShape of 2**34": (_constant_of_shape, "ConstantOfShape asks for 64 GiB, past onnxruntime's"),
    "length ** 12": (_power_of_twelve, "past onnxruntime's memory cap"),
    "2**34 only for one length": (_only_for_one_length, "ConstantOfShape asks for 64 GiB, past onnxruntime's"),
    "size from the token ids": (_from_token_ids, "past onnxruntime's memory cap"),
    "1 GiB at run time": (_over_the_arena, "past onnxruntime's memory cap of 0.25 GiB"),
    "minutes of products": (_minutes_of_products, "ran its probe for more than 5 s"),
    "external data": (_external_data, "stored in other files"),
    "wrong output width": (_wrong_width, "differ in dimension 1: (3) vs (10)"),
    "embedding_dim 5": (_manifest(embedding_dim=5), "embedding_dim 5"),
    "pad_id 2**31-1": (_manifest(pad_id=2**31 - 1), "pad_id"),
}

CHILD = textwrap.dedent("""
    import contextlib, io, json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
    import core.export.onnx_session
    core.export.onnx_session.ARENA_MAX_BYTES = {arena}  # before the first session: the cap is per process
    import core.export.onnx_probe
    core.export.onnx_probe.PROBE_SECONDS = {probe_seconds}
    from core.cli.main import main
    results = []
    for argv in json.loads(sys.argv[1]):
        err, out = io.StringIO(), io.StringIO()
        start = time.monotonic()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
        results.append({{"code": code, "err": err.getvalue(), "out": out.getvalue(),
                        "seconds": time.monotonic() - start}})
    print(json.dumps(results))
""")


@pytest.fixture(scope="module")
def forged_runs(tiny_models, tmp_path_factory):
    """Every forgery as an export folder passed to ``predict --backend onnx``, then a saved model with a
    forged ``onnx/`` folder inside it and one with a forged entry in the lab's cache: all run by the CLI
    in one subprocess, under an address-space cap and a time limit. Returns (results by case, folders)."""
    root = tmp_path_factory.mktemp("forged")
    model, config = load_model(tiny_models["lstm"])
    genuine = root / "genuine"
    export_model(model, config, genuine, "onnx")
    cases, argvs = {}, []
    for name, (forge, _) in FORGERIES.items():
        folder = Path(shutil.copytree(genuine, root / name.replace(" ", "-").replace("*", "^")))
        forge(folder)
        cases[name] = folder
        argvs.append(["predict", "--backend", "onnx", "--model", str(folder), *PAIR])
    # A saved model holding a forged onnx/ (where the backend used to keep its cache) ...
    shared = Path(shutil.copytree(tiny_models["lstm"], root / "shared-model"))
    shutil.copytree(cases["loop"], shared / "onnx")
    # ... and one whose entry in the lab's cache was forged after it was written.
    planted = Path(shutil.copytree(tiny_models["lstm"], root / "planted-model"))
    cache = root / "lab-cache"
    entry, _ = cache_entry(planted, cache)
    shutil.copytree(cases["loop"], entry)
    cases["forged model/onnx"], cases["forged cache entry"] = shared, planted
    argvs += [["predict", "--backend", "onnx", "--model", str(folder), *PAIR] for folder in (shared, planted)]
    before = snapshot(shared)
    script = CHILD.format(cap=MEMORY_CAP, arena=ARENA_CAP, probe_seconds=PROBE_SECONDS)
    child = subprocess.run([sys.executable, "-c", script, json.dumps(argvs)], cwd=ROOT,
                           env={**os.environ, CACHE_ENV: str(cache)}, capture_output=True, text=True,
                           timeout=TIME_LIMIT)
    assert child.returncode == 0, child.stderr[-2000:]
    results = dict(zip(cases, json.loads(child.stdout.splitlines()[-1])))
    return results, cases, {"shared_before": before, "cache": cache, "entry": entry}


@pytest.mark.parametrize("case", list(FORGERIES))
def test_a_forged_export_is_refused_in_one_line(forged_runs, case):
    results, cases, _ = forged_runs
    result = results[case]
    lines = result["err"].strip().splitlines()
    assert result["code"] == 2 and result["out"] == "" and len(lines) == 1, result
    assert lines[0].startswith("error: ") and FORGERIES[case][1] in lines[0], lines[0]
    assert result["seconds"] < TIME_LIMIT / 2


def test_a_forged_onnx_folder_inside_a_model_is_never_run_nor_touched(forged_runs, tiny_models):
    results, cases, extra = forged_runs
    result = results["forged model/onnx"]
    assert result["code"] == 0, result
    want = torch_similarity(cases["forged model/onnx"], *PAIR)
    assert abs(json.loads(result["out"])["similarity"] - want) <= 1e-4
    assert snapshot(cases["forged model/onnx"]) == extra["shared_before"]


def test_a_forged_cache_entry_is_exported_again_over(forged_runs):
    results, cases, extra = forged_runs
    result = results["forged cache entry"]
    assert result["code"] == 0, result
    assert abs(json.loads(result["out"])["similarity"] - torch_similarity(cases["forged cache entry"], *PAIR)) \
        <= 1e-4
    assert "Loop" not in operators(extra["entry"])
    assert not (cases["forged cache entry"] / "onnx").exists()


def test_a_batch_onnxruntime_fails_on_is_one_line(tiny_models, tmp_path):
    """A graph that passed the checks and the probe, then fails on a batch (here a token id no tokenizer
    of the export gives): an OnnxBackendError of one line, which the CLI prints as its error line."""
    model, config = load_model(tiny_models["lstm"])
    export_model(model, config, tmp_path / "e", "onnx")
    with pytest.raises(OnnxBackendError) as raised:
        OnnxEncoder(tmp_path / "e").run_rows([[10**9]])
    assert "\n" not in str(raised.value) and "onnxruntime failed on a batch of 1 x 1 tokens" in str(raised.value)


def test_the_probe_is_held_to_its_address_space_not_only_to_the_arena(monkeypatch):
    """2 GiB that onnxruntime's arena would give, in a child whose address space is 1 GiB: one refusal."""
    import core.export.onnx_probe as onnx_probe

    size = [helper.make_node("Shape", ["input_ids"], ["dims"]), helper.make_node("Mul", ["dims", "half"], ["size"]),
            helper.make_node("ConstantOfShape", ["size"], ["big"]),
            helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
            helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["ids", "total"], ["sentence_embedding"])]
    graph = helper.make_graph(size, "greedy", [_value(name, TensorProto.INT64, ["batch", "sequence"])
                                               for name in ("input_ids", "attention_mask")],
                              [_value("sentence_embedding", TensorProto.FLOAT, ["batch", "sequence"])],
                              [_int64("half", [2**14, 2**14])])  # a (1, 2) batch: 2**14 x 2**15 floats
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    monkeypatch.setattr(onnx_probe, "address_space_cap", lambda graph_bytes, arena: 2**30)
    batch = np.ones((1, 2), dtype=np.int64)
    with pytest.raises(OnnxBackendError) as raised:
        onnx_probe.probe_in_child(model.SerializeToString(), [(batch, batch)], Path("greedy.onnx"))
    assert str(raised.value) == "greedy.onnx failed its probe: ConstantOfShape asks for 2 GiB, past the memory " \
                                "this process may take"


# ---- mutated genuine graphs ----------------------------------------------------------------------
MUTANT_OP_TYPES = ["Add", "Mul", "Expand", "Reshape", "Tile", "Range", "ConstantOfShape", "MatMul", "Concat", "Loop"]
MUTANT_INTS = [-3, -1, 0, 1, 2, 5, 7, 2**31, 2**40, -2**40, 10**15]


def mutate(model, rng) -> None:
    """One to three random edits of a genuine graph: a constant's value, an integer attribute, a node's
    input, a node's operator, an initializer's dimension."""
    from onnx import AttributeProto, numpy_helper

    graph = model.graph
    for _ in range(rng.randint(1, 3)):
        node, kind = rng.choice(list(graph.node)), rng.randrange(5)
        if kind == 0 and node.op_type == "Constant" and node.attribute[0].type == AttributeProto.TENSOR:
            array = numpy_helper.to_array(node.attribute[0].t).copy()
            if array.size and array.dtype.kind in "iu":
                array.flat[rng.randrange(array.size)] = rng.choice(MUTANT_INTS[:-3])
                node.attribute[0].t.CopyFrom(numpy_helper.from_array(array, node.attribute[0].t.name))
        elif kind == 1 and [a for a in node.attribute if a.type == AttributeProto.INT]:
            rng.choice([a for a in node.attribute if a.type == AttributeProto.INT]).i = rng.choice(MUTANT_INTS)
        elif kind == 2 and node.input:
            names = [o for n in graph.node for o in n.output] + ["input_ids", "attention_mask"]
            node.input[rng.randrange(len(node.input))] = rng.choice(names)
        elif kind == 3:
            node.op_type = rng.choice(MUTANT_OP_TYPES)
        elif kind == 4 and graph.initializer:
            tensor = rng.choice(list(graph.initializer))
            if tensor.dims:
                tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice([0, 1, 3, 10**6, -1])


MUTANTS_CHILD = textwrap.dedent("""
    import json, random, resource, shutil, sys, tempfile
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
    sys.path.insert(0, {tests!r})
    import onnx
    from test_onnx_checks import PAIR, mutate
    from core.export.onnx_backend import OnnxBackendError, OnnxEncoder
    rng, outcomes = random.Random(22), {{}}
    sources = [Path(p) for p in json.loads(sys.argv[1])]
    for trial in range({trials}):
        source = rng.choice(sources)
        folder = Path(tempfile.mkdtemp(dir=sys.argv[2])) / "export"
        shutil.copytree(source, folder)
        model = onnx.load(str(folder / "model.onnx"))
        mutate(model, rng)
        (folder / "model.onnx").write_bytes(model.SerializeToString())
        try:
            OnnxEncoder(folder, threads=1).score_pairs([PAIR[0], ""], [PAIR[1], "x " * 50])
            outcome = "ran"
        except OnnxBackendError:
            outcome = "refused"
        except Exception as error:
            outcome = "crash: " + repr(error)[:300]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(json.dumps(outcomes))
""")


def test_mutated_exports_are_refused_or_run_and_never_crash(tiny_models, tmp_path):
    """80 seeded random edits of genuine LSTM and dual-encoder graphs (float32 and int8), each loaded and
    run in a subprocess under the address-space cap: every one runs or is one OnnxBackendError."""
    sources = []
    for family in ("lstm", "dual-transformer"):
        model, config = load_model(tiny_models[family])
        for quantize in (None, "int8"):
            sources.append(tmp_path / f"{family}-{quantize}")
            export_model(model, config, sources[-1], "onnx", quantize=quantize)
    script = MUTANTS_CHILD.format(cap=MEMORY_CAP, tests=str(ROOT / "tests"), trials=80)
    child = subprocess.run([sys.executable, "-c", script, json.dumps([str(s) for s in sources]), str(tmp_path)],
                           cwd=ROOT, capture_output=True, text=True, timeout=TIME_LIMIT)
    assert child.returncode == 0, child.stderr[-2000:]
    outcomes = json.loads(child.stdout.splitlines()[-1])
    print(f"mutated graphs: {outcomes}")
    assert set(outcomes) <= {"ran", "refused"}, outcomes
    assert sum(outcomes.values()) == 80 and outcomes.get("refused", 0) > 20

