"""Device and precision: ``auto`` is bf16 exactly where the hardware computes it natively."""

from pathlib import Path

import pytest
import torch

from transformer_core import device
from transformer_core.device import (
    autocast_dtype,
    cpu_has_native_bf16,
    precision_name,
    resolve_device,
)
from transformer_core.errors import UserError

CPU = torch.device("cpu")
NATIVE = cpu_has_native_bf16()


def test_resolve_device():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
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


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="no /proc/cpuinfo on this system")
def test_cpu_detection_agrees_with_cpuinfo_flags():
    flags = Path("/proc/cpuinfo").read_text().split()
    assert NATIVE == any(flag in flags for flag in device.CPU_BF16_FLAGS)


def test_precision_names():
    assert precision_name(None) == "fp32" and precision_name(torch.bfloat16) == "bf16"
