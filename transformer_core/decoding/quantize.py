"""int8 decoding on CPUs: dynamic quantization of every matrix product with a weight.

``int8_model`` returns a copy of a trained model in which each ``nn.Linear`` (the
attention projections and the feed-forward layers) and the pre-softmax vocabulary
projection (tied to the embedding; a Linear of its own in the copy) run as
``quantized::linear_dynamic``: int8 weights with one scale per output row, computed
once; the activations quantized to 8 bits at every call, with a scale from their
range; int32 accumulation; fp32 out. The kernels are FBGEMM's (PyTorch's ``x86``
quantized engine, VNNI instructions where the CPU has them). What stays fp32: the
embedding lookups, the attention scores and their softmax, the layer norms, and the
search's scores. This is CTranslate2's ``int8`` arithmetic, the usual CPU serving
precision; it is an inference choice, never a training one, and its BLEU is measured
beside fp32 (docs/ctranslate2.md).

``torch.ao.quantization`` is deprecated in favour of torchao, which is not a dependency
here; its eager dynamic quantization still ships with torch 2.13 and is what this uses,
its deprecation warnings silenced.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from transformer_core.errors import UserError


def check_int8_device(device: torch.device, autocast: torch.dtype | None) -> None:
    """int8 decoding runs on a CPU, with fp32 activations: UserError otherwise."""
    if device.type != "cpu":
        raise UserError(f"--quantize int8 runs on a CPU (FBGEMM kernels); this device is {device}")
    if autocast is not None:
        raise UserError(
            "--quantize int8 computes in int8 with fp32 activations: "
            "use it with --precision fp32 or auto, not bf16"
        )


def int8_model(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose Linear layers and vocabulary projection are dynamic int8 (see the
    module docstring); ``model`` itself is left as it is."""
    copied = copy.deepcopy(model)
    cfg = copied.cfg
    projection = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
    projection.weight = nn.Parameter(copied.embedding.weight.detach().clone())
    copied.vocabulary_projection = projection
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=UserWarning, message=".*quantize_per_")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        quantize_dynamic(copied, {nn.Linear: per_channel_dynamic_qconfig}, inplace=True)
    # The instance's project (a plain attribute, not a registered module) is the int8 one.
    copied.project = copied.vocabulary_projection.forward
    return copied
