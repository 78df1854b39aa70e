"""Choosing the device and the autocast precision.

The paper's recipe is fp32 math; on GPUs that support bfloat16 we train and
decode under bf16 autocast (fp32 master weights) by default, on CPUs in fp32.
"""

from __future__ import annotations

import torch

from transformer_core.errors import UserError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")


def resolve_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """``auto`` is the local rank's GPU when CUDA is available, else the CPU."""
    if name not in DEVICES:
        raise UserError(f"--device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda was asked for but torch sees no CUDA device")
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype, or None for plain fp32. ``auto``: bf16 on capable GPUs, fp32 elsewhere."""
    if precision not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return None
    capable = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if precision == "bf16":
        if not capable:
            raise UserError(f"--precision bf16 needs a GPU with bfloat16 support; this device is {device}")
        return torch.bfloat16
    return torch.bfloat16 if capable else None


def setup_device(device: str, precision: str, num_threads: int | None) -> tuple[torch.device, torch.dtype | None]:
    """Apply --num-threads, then resolve --device and --precision (see add_device_arguments)."""
    if num_threads is not None:
        if num_threads < 1:
            raise UserError(f"--num-threads must be at least 1, got {num_threads}")
        torch.set_num_threads(num_threads)
    resolved = resolve_device(device)
    return resolved, autocast_dtype(resolved, precision)
