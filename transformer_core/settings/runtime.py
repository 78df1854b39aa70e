"""Where and how a command runs its model: the runtime settings of every command that
trains, decodes or scores (device, precision, compilation, threads), and of decoding's batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformer_core.settings.fields import (
    AUTO,
    COMPILE_MODES,
    DEVICES,
    INFERENCE_MAX_TOKENS,
    PRECISIONS,
    option,
    require_declared,
    require_flag_positive,
)
from transformer_core.settings.flags import command_flags

PRECISION_HELP = (
    "auto: bf16 autocast where the device computes bf16 natively (CUDA GPUs with bf16, CPUs "
    "with AVX512-BF16 or AMX), fp32 elsewhere; fp32: exact fp32; bf16: bf16 autocast, an error "
    "where it is not native. Master weights, the loss, the optimizer and search scores stay fp32"
)


@dataclass(frozen=True)
class RuntimeSettings:
    """Where and how a command runs its model: device, numeric precision, compilation and CPU
    threads. Hardware choices, not the recipe: each leaves what is computed the same up to
    rounding (docs/bf16.md, docs/gpu.md). ``section`` names the configuration's section in
    errors."""

    device: str = option(
        AUTO, "--device", "auto (CUDA if present), cpu or cuda", choices=DEVICES, config=False
    )
    precision: str = option(
        AUTO, "--precision", PRECISION_HELP, choices=PRECISIONS, doc="a hardware choice, not a "
        "recipe change: its BLEU cost is measured (docs/bf16.md). Paper: fp32 (P100s)",
    )  # fmt: skip
    compile: str = option(
        AUTO,
        "--compile",
        "torch.compile the model (training: the encoder and decoder stacks, and on GPUs the "
        "loss's softmax and gradient; decoding: the whole step of a decoder of few shapes, "
        "CUDA graphs on GPUs): on, off, or auto, where it was measured faster (docs/gpu.md, "
        "'Compilation'); the first batches of new shapes pay the compilation",
        choices=COMPILE_MODES,
        doc="auto compiles nowhere yet on a CPU, and on a GPU only a training run long enough to "
        "repay the warm-up of each batch width it meets (the numbers in its log); a resumed run "
        "keeps what it recorded. On GPUs, with fixed batch shapes, each shape's compiled stacks "
        "are also recorded as a CUDA graph",
    )
    num_threads: int | None = option(
        None, "--num-threads", "CPU threads for torch", type=int, unset="torch's choice",
        config=False,
    )  # fmt: skip

    section = "runtime"

    def __post_init__(self) -> None:
        require_flag_positive(self, "num_threads", optional=True)
        require_declared(self, lambda f: f"{self.section}.{f.name}")


@dataclass(frozen=True)
class InferenceSettings(RuntimeSettings):
    """A decoding or scoring command's runtime: ``RuntimeSettings`` and the tokens of a batch
    (speed and memory only: batches never change a result beyond rounding)."""

    max_tokens: int = option(
        INFERENCE_MAX_TOKENS, "--max-tokens", "source tokens per batch, padding included",
        minimum=1, doc="speed and memory only",
    )  # fmt: skip

    section = "decode"

    def __post_init__(self) -> None:
        require_flag_positive(self, "max_tokens")
        super().__post_init__()


def inference_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (a config's ``decode`` section) as the runtime flags of ``translate``."""
    return command_flags(InferenceSettings, settings)
