"""Device and precision: ``auto`` is bf16 exactly where the hardware computes it natively."""

import pytest
import torch

from transformer_core import device
from transformer_core.device import (
    AUTO_COMPILE,
    autocast_dtype,
    compile_choice,
    cpu_has_native_bf16,
    precision_name,
    resolve_device,
)
from transformer_core.errors import UserError

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

CPU = torch.device("cpu")
NATIVE = cpu_has_native_bf16()


def test_resolve_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == CPU and resolve_device("cpu") == CPU
    with pytest.raises(UserError, match="--device cuda was asked for but torch sees no CUDA"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto", local_rank=3) == torch.device("cuda", 1)  # rank modulo GPUs
    assert resolve_device("cpu") == CPU
    with pytest.raises(UserError, match="--device"):
        resolve_device("tpu")
    with pytest.raises(UserError, match="--precision"):
        autocast_dtype(CPU, "fp16")


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_bf16_only_on_cpus_with_native_bf16(monkeypatch, native):
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: native)
    assert autocast_dtype(CPU, "auto") == (torch.bfloat16 if native else None)
    assert autocast_dtype(CPU, "fp32") is None  # fp32 always restores exact fp32
    if native:
        assert autocast_dtype(CPU, "bf16") == torch.bfloat16
    else:
        with pytest.raises(UserError, match="--precision bf16 needs native bfloat16.*avx512_bf16"):
            autocast_dtype(CPU, "bf16")


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [("flags : avx2 avx512f avx512_bf16", True), ("flags : avx2 amx_bf16", True),
     ("flags : avx2 avx512f avx512_vnni", False)],
)  # fmt: skip
def test_cpuinfo_flags_decide_where_torch_cannot_say(monkeypatch, tmp_path, cpuinfo, native):
    monkeypatch.setattr(device, "_torch_cpu_bf16", lambda: None)  # a torch without the checks
    monkeypatch.setattr(device, "_onednn_bf16", lambda: None)
    fake = tmp_path / "cpuinfo"
    fake.write_text(cpuinfo)
    monkeypatch.setattr(device, "Path", lambda _: fake)
    assert cpu_has_native_bf16.__wrapped__() is native  # past the once-per-process cache


@pytest.mark.parametrize(
    ("torch_says", "onednn_says", "native"),
    [(False, True, False), (True, False, False), (True, True, True), (True, None, True)],
)
def test_native_bf16_needs_the_feature_not_just_onednn_running_bf16(
    monkeypatch, torch_says, onednn_says, native
):
    # (False, True): an Intel Xeon with AVX-512 but no AVX512-BF16 or AMX, where oneDNN runs
    # bf16 emulated, 2.4 times slower than fp32; (True, False): ONEDNN_MAX_CPU_ISA=AVX2.
    monkeypatch.setattr(device, "_torch_cpu_bf16", lambda: torch_says)
    monkeypatch.setattr(device, "_onednn_bf16", lambda: onednn_says)
    assert cpu_has_native_bf16.__wrapped__() is native


def test_precision_names():
    assert precision_name(None) == "fp32" and precision_name(torch.bfloat16) == "bf16"


def test_inference_model_casts_matrices_once_and_leaves_the_model_alone():
    from conftest import tiny_config, tiny_model
    from torch import nn

    from transformer_core.decoding.inference import inference_model

    model = tiny_model(tiny_config())
    assert inference_model(model, None) is model  # fp32: the model itself, no copy
    half = inference_model(model, torch.bfloat16)
    kinds = {type(m): m.weight.dtype for m in half.modules() if hasattr(m, "weight")}
    assert kinds[nn.Linear] == kinds[nn.Embedding] == torch.bfloat16
    assert kinds[nn.LayerNorm] == torch.float32  # autocast runs layer norms in fp32
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the caller's stays fp32


def test_gpus_pad_widths_to_a_multiple_of_8_and_cpus_do_not():
    assert device.length_multiple(torch.device("cuda")) == 8
    assert device.length_multiple(CPU) == 1


def test_attention_backends_on_cuda_leave_out_cudnn():
    """The choice is a process-wide flag, so it can be made, and checked, without a GPU."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        device.choose_attention_backends(CPU)  # nothing to do on a CPU
        assert torch.backends.cuda.cudnn_sdp_enabled()
        device.choose_attention_backends(torch.device("cuda", 0))
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
        device.choose_attention_backends(torch.device("cuda", 0), cudnn=True)
        assert torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_compile_choice_names_the_setting_that_decided():
    """``on`` and ``off`` name the flag; ``auto`` follows ``AUTO_COMPILE`` and says why, a device
    type it does not name being eager."""
    cuda = torch.device("cuda")
    assert compile_choice(CPU, "on", "train") == (True, "--compile on")
    assert compile_choice(cuda, "off", "decode") == (False, "--compile off")
    compiled, why = AUTO_COMPILE["train"]["cuda"]
    assert compile_choice(cuda, "auto", "train") == (compiled, f"--compile auto: {why}")
    meta = torch.device("meta")
    assert compile_choice(meta, "auto", "decode") == (False, "--compile auto: not measured on meta")
    with pytest.raises(UserError, match="--compile must be one of auto, on, off, got 'yes'"):
        compile_choice(CPU, "yes", "train")
