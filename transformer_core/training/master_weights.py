"""bf16 compute weights beside fp32 master weights (``train.compute_weights: bf16``).

Under bf16 autocast (``train.precision``) the model's weights stay fp32: each step autocast
casts every weight to bf16, LayerNorm runs and returns fp32, so the residual stream between
the sub-layers is fp32 and each matrix product casts its input again, and each weight's
bf16 gradient is cast back to fp32. With ``compute_weights: bf16`` the step instead runs a
bf16 copy of the model (``compute``) without autocast: activations, residual stream and
LayerNorm outputs are bf16 throughout (LayerNorm, attention's softmax and the loss still
accumulate in fp32 inside their kernels); only the loss's log-probabilities are fp32.

Adam keeps updating the fp32 weights (the masters, ``Trainer.model``, which checkpoints
hold): after each micro-batch's backward the copy's bf16 gradients are added into the
masters' fp32 gradients (``accumulate``), so accumulation over micro-batches is in fp32;
after the optimizer step the copy is refreshed from the masters in place (``refresh``), so
its tensors keep their addresses (what a CUDA graph of the step reads). The gradients of
the matrix weights are bf16 products under autocast too; those of LayerNorm's gain and bias
become bf16 here. Under DDP the ranks all-reduce the copy's bf16 gradients.

A precision choice, not a recipe change: the checkpoint, the optimizer and the schedule
are those of an fp32 run, and a run may resume with either setting.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from transformer_core.errors import ConfigError


def compute_dtype(setting: str, autocast: torch.dtype | None) -> torch.dtype | None:
    """The dtype of the compute copy for ``train.compute_weights`` ``setting`` (None: fp32,
    no copy); ``autocast``: the run's resolved precision (``device.autocast_dtype``)."""
    if setting == "fp32":
        return None
    if autocast != torch.bfloat16:
        raise ConfigError(
            "train.compute_weights bf16 needs bf16 precision: set train.precision to bf16, or "
            "auto on a device that computes bf16 natively (this run resolved it to fp32)"
        )
    return torch.bfloat16


class MasterWeights:
    """A low-precision copy (``compute``) of ``master`` that the step runs, and the two
    passes that tie them: gradients copy to master, weights copy to compute."""

    def __init__(self, master: nn.Module, dtype: torch.dtype):
        self.compute = copy.deepcopy(master).to(dtype)  # tied weights stay tied
        self._master = list(master.parameters())
        self._copy = list(self.compute.parameters())
        for weight in self._master:  # kept allocated: the first micro-batch overwrites them
            weight.grad = torch.zeros_like(weight)

    @torch.no_grad()
    def accumulate(self, first: bool) -> None:
        """Add the copy's gradients of the last backward to the masters' fp32 gradients
        (``first``: overwrite them, the step's first micro-batch) and free the copy's."""
        grads = [(w.grad, c.grad) for w, c in zip(self._master, self._copy, strict=True)]
        present: list[tuple[Tensor, Tensor]] = [(g, c) for g, c in grads if c is not None]
        if first:
            absent = [g for g, c in grads if c is None]  # a weight the batch did not use
            if absent:
                torch._foreach_zero_(absent)
            torch._foreach_copy_([g for g, _ in present], [c for _, c in present])
        else:
            torch._foreach_add_([g for g, _ in present], [c for _, c in present])
        for weight in self._copy:
            weight.grad = None

    @torch.no_grad()
    def refresh(self) -> None:
        """Round the masters into the copy, in place (after an optimizer step, or a load)."""
        torch._foreach_copy_(self._copy, self._master)
