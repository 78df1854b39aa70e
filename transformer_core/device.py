"""Choosing the device and the autocast precision.

The paper's recipe is fp32 math. Numeric precision is a hardware choice, not a
recipe change: wherever the device computes bfloat16 natively (CUDA GPUs with
bf16 support; CPUs with AVX512-BF16 or AMX), ``auto`` trains and decodes under
bf16 autocast, keeping fp32 master weights, fp32 loss and fp32 search scores.
Elsewhere ``auto`` is fp32, and ``fp32`` always restores exact fp32 math.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch

from transformer_core.errors import UserError
from transformer_core.settings import (
    AUTO,
    BATCH_SHAPES,
    COMPILE_MODES,
    DEVICES,
    PRECISIONS,
    RuntimeSettings,
)


def resolve_device(name: str = AUTO, local_rank: int = 0) -> torch.device:
    """``auto`` is the local rank's GPU when CUDA is available, else the CPU."""
    if name not in DEVICES:
        raise UserError(f"--device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == AUTO:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda was asked for but torch sees no CUDA device")
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


# GPUs see sequence widths rounded up to a multiple of this (``batching.padded_width``): a fixed
# set of shapes, and widths that suit the tensor cores. On a CPU padding is only cost.
LENGTH_MULTIPLE = {"cuda": 8}


def length_multiple(device: torch.device) -> int:
    """The multiple that ``device``'s batch widths are rounded up to (1: none)."""
    return LENGTH_MULTIPLE.get(device.type, 1)


def choose_attention_backends(device: torch.device, cudnn: bool = False) -> None:
    """On CUDA, let ``scaled_dot_product_attention`` pick among flash, memory-efficient and math
    kernels only, unless ``cudnn``.

    cuDNN's attention builds an execution plan on the host for every input shape it has not
    seen, and the shapes of training batches and of every decoding step keep changing; the
    other kernels take any shape at no host cost. Process-wide, like every torch backend flag;
    nothing to do on other devices.
    """
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(cudnn)


# What ``compile: auto`` does for training and for decoding on each device type, and why
# (docs/gpu.md, "Compilation"): the commands' log lines say it. Compiled where measured faster
# (on GPUs, training also shown to learn as eager steps do); a device type not named is eager.
AUTO_COMPILE: dict[str, dict[str, tuple[bool, str]]] = {
    "train": {
        "cpu": (False, "compiled training measured no faster on CPUs"),
        "cuda": (False, "compiled training, faster on GPUs, not yet shown to learn as eager does"),
    },
    "decode": {
        "cpu": (False, "a compiled decode's warm-up costs more than it saves"),
        "cuda": (False, "a compiled decode's warm-up costs more than it saves"),
    },
}


def compile_choice(device: torch.device, mode: str, what: str) -> tuple[bool, str]:
    """Whether to torch.compile the model for ``what`` ("train" or "decode") on ``device``, and
    the setting that decided it, for the log line: ``--compile on``, or ``--compile auto: why``.

    ``on`` and ``off`` say so; ``auto`` compiles where it was measured faster
    (``AUTO_COMPILE``). Compilation fuses the elementwise operators between the matrix
    products and launches fewer, larger kernels; it costs time once, at the first batch of
    each new kind of shape.
    """
    if mode not in COMPILE_MODES:
        raise UserError(f"--compile must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    if mode != AUTO:
        return mode == "on", f"--compile {mode}"
    compiled, why = AUTO_COMPILE[what].get(device.type, (False, f"not measured on {device.type}"))
    return compiled, f"--compile auto: {why}"


def use_compile(device: torch.device, mode: str, what: str) -> bool:
    """Whether to torch.compile the model for ``what`` on ``device`` (``compile_choice``)."""
    return compile_choice(device, mode, what)[0]


def use_fixed_shapes(mode: str, compiled: bool) -> bool:
    """Whether training collates its micro-batches to fixed shapes (``data.shapes``).

    ``fixed`` and ``exact`` say so; ``auto`` fixes them where the model is compiled: a compiled
    step costs a compilation per shape, and an eager one gains nothing from fixed shapes but
    pays their padding.
    """
    if mode not in BATCH_SHAPES:
        raise UserError(f"--batch-shapes must be one of {', '.join(BATCH_SHAPES)}, got {mode!r}")
    return compiled if mode == AUTO else mode == "fixed"


CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matrix products natively (AVX512-BF16 or AMX).

    torch's own CPU feature checks answer where it has them, /proc/cpuinfo otherwise; and
    oneDNN must be allowed to use them (``ONEDNN_MAX_CPU_ISA`` below them says no: CI's run
    as an AVX2-only CPU). oneDNN's ``_is_mkldnn_bf16_supported`` alone is no answer: it says
    bf16 runs, and on an AVX-512 CPU without either feature bf16 runs emulated (an Intel Xeon
    with AVX-512 but neither: a bf16 matrix product 2.4 times slower than fp32, Multi30k
    training 3.3 times).
    """
    if _onednn_bf16() is False:
        return False
    answer = _torch_cpu_bf16()
    if answer is not None:
        return answer
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace").split()
    except OSError:
        return False
    return any(flag in flags for flag in CPU_BF16_FLAGS)


def _torch_cpu_bf16() -> bool | None:
    """torch's answer to whether this CPU has AVX512-BF16 or AMX; None where torch has no check."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return None


def _onednn_bf16() -> bool | None:
    """Whether oneDNN runs bf16 here at all (emulated or not); None where torch has no check."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return None


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively (the test ``auto`` applies)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_native_bf16()


def autocast_dtype(device: torch.device, precision: str = AUTO) -> torch.dtype | None:
    """The autocast dtype, or None for plain fp32. ``auto``: bf16 where native, fp32 elsewhere."""
    if precision not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return None
    capable = native_bf16(device)
    if precision == "bf16":
        if not capable:
            raise UserError(
                f"--precision bf16 needs native bfloat16 support (a CUDA GPU with bf16, or a CPU with "
                f"{' or '.join(CPU_BF16_FLAGS)}); this device is {device}: use --precision fp32 or auto"
            )
        return torch.bfloat16
    return torch.bfloat16 if capable else None


def precision_name(dtype: torch.dtype | None) -> str:
    """``bf16`` or ``fp32``: what a run records as the precision it used."""
    return "bf16" if dtype == torch.bfloat16 else "fp32"


def cpu_threads() -> str:
    """The CPU threads torch runs on, for the first line of a job's log (`--num-threads`)."""
    count = torch.get_num_threads()
    return f"{count} CPU thread{'s' if count > 1 else ''}"


def setup_device(runtime: RuntimeSettings) -> tuple[torch.device, torch.dtype | None]:
    """Apply ``runtime``'s --num-threads, then resolve its --device and --precision."""
    if runtime.num_threads is not None:
        torch.set_num_threads(runtime.num_threads)
    resolved = resolve_device(runtime.device)
    choose_attention_backends(resolved)
    return resolved, autocast_dtype(resolved, runtime.precision)
