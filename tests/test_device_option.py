"""``--device`` of the commands that run a model (auto, cpu, cuda, cuda:N), and what a CUDA device changes without
one being here: half-precision encoding for the transformer families, and vectors cached apart."""
import argparse
from pathlib import Path

import pytest
import torch

import core.device
from core.cli.main import main
from core.device import DeviceError, checked_device_name, resolve_device
from core.models.registry import encoding_dtype, encodes_in_half

SAMPLE = Path(__file__).resolve().parents[1] / "assets" / "sample_pairs.csv"
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


def one_error_line(capsys, *argv) -> str:
    assert main([str(a) for a in argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    return lines[0]


@pytest.mark.parametrize("name,expected", [("auto", "auto"), ("CPU", "cpu"), ("cuda", "cuda"), ("cuda:1", "cuda:1")])
def test_device_names(name, expected):
    assert checked_device_name(name) == expected


@pytest.mark.parametrize("name", ["tpu", "cuda:", "cuda:x", "cuda:0:1", "mps"])
def test_unknown_device_names_are_refused(name, capsys):
    with pytest.raises(DeviceError):
        checked_device_name(name)
    line = one_error_line(capsys, "dedup", "--model", "minilm", "--questions", "q.txt", "--sweep", "--device", name)
    assert "--device" in line and name in line


@NO_CUDA
@pytest.mark.parametrize("command", [["embed", "--data", SAMPLE, "--out", "{tmp}/v.npy"],
                                     ["score", "--pairs", SAMPLE, "--out", "{tmp}/s.csv"],
                                     ["search", "--corpus", SAMPLE, "a question"],
                                     ["dedup", "--questions", SAMPLE, "--out", "{tmp}/d.csv"],
                                     ["suggest", "--questions", SAMPLE, "--n", "2", "--out", "{tmp}/s.csv"]])
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_a_gpu_that_is_not_here_is_one_line(capsys, tmp_path, command, device):
    argv = [str(part).format(tmp=tmp_path) for part in command]
    line = one_error_line(capsys, argv[0], "--model", "minilm", *argv[1:], "--device", device)
    assert "CUDA" in line
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_auto_is_the_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(core.device, "cuda_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_cuda_n_must_name_a_gpu_that_is_here(monkeypatch):
    monkeypatch.setattr(core.device, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(DeviceError, match="cuda:3"):
        resolve_device("cuda:3")


def test_transformers_encode_in_half_on_cuda_only():
    assert encoding_dtype("minilm", "cuda") == torch.float16
    assert encoding_dtype("dual-transformer", "cuda:0") == torch.float16
    assert encoding_dtype("lstm", "cuda") == torch.float32
    assert encoding_dtype("minilm", "cpu") == torch.float32


def test_a_model_loaded_on_the_cpu_encodes_in_float32(tiny_models):
    from core.models import load_model

    model, _ = load_model(tiny_models["dual-transformer"], device="cpu")
    assert model.encoding_dtype == torch.float32


def test_half_precision_vectors_are_cached_apart(monkeypatch, tiny_models):
    from core.cli.common import vector_cache_key

    monkeypatch.setattr(core.device, "cuda_available", lambda: True)
    args = lambda model, device: argparse.Namespace(model=str(model), device=device, backend="torch")  # noqa: E731
    assert encodes_in_half("minilm", "cuda") and not encodes_in_half("minilm", "cpu")
    assert vector_cache_key(args("minilm", "cuda")) == vector_cache_key(args("minilm", "cpu")) + "-fp16"
    lstm = tiny_models["lstm"]
    assert vector_cache_key(args(lstm, "cuda")) == vector_cache_key(args(lstm, "cpu"))  # the LSTM keeps float32
