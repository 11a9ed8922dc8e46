"""core.training.trainer.autocast_plan: which autocast dtype and scaler a step uses, per device and --precision."""
import pytest
import torch

from core.training.trainer import FP32, AutocastPlan, autocast_plan, compile_mode

BF16 = AutocastPlan(True, torch.bfloat16, False)
FP16_SCALED = AutocastPlan(True, torch.float16, True)


@pytest.mark.parametrize("device_type, precision, bf16_supported, expected", [
    ("cuda", "auto", True, BF16),  # bf16 keeps fp32's range: no scaler
    ("cuda", "auto", False, FP16_SCALED),  # an older GPU: fp16, whose small gradients need the scaler
    ("cuda", "fp32", True, FP32),
    ("cuda", "bf16", True, BF16),
    ("cuda", "fp16", True, FP16_SCALED),
    ("cpu", "auto", False, FP32),  # today's CPU behaviour: no autocast
    ("cpu", "auto", True, FP32),
    ("cpu", "fp32", False, FP32),
    ("cpu", "bf16", False, BF16),  # the CPU always has bf16 autocast, whatever CUDA would say
])
def test_autocast_plan(device_type, precision, bf16_supported, expected):
    assert autocast_plan(device_type, precision, bf16_supported) == expected


@pytest.mark.parametrize("device_type, precision, bf16_supported, problem", [
    ("cpu", "fp16", True, "fp16 needs a CUDA device"),
    ("cuda", "bf16", False, "bf16 is not supported by this GPU"),
    ("cuda", "half", True, "precision must be one of auto, fp32, bf16, fp16"),
])
def test_autocast_plan_refuses_what_cannot_run(device_type, precision, bf16_supported, problem):
    with pytest.raises(ValueError, match=problem):
        autocast_plan(device_type, precision, bf16_supported)


def test_compile_mode_uses_cuda_graphs_on_cuda_only():
    assert compile_mode("cuda") == "reduce-overhead"
    assert compile_mode("cpu") == "default"
