"""Dropout (paper section 5.4) whose mask costs less on CPUs.

On CPUs torch draws a dropout mask with ``bernoulli_``, one generator call and a float
comparison per element: with 17 dropouts of 2000 x 256 activations a Multi30k step, 14% of a
bf16 training step on 2 EPYC threads. Here the mask comes from full-range 64-bit draws of the
same generator, each read as four 16-bit integers and compared with an integer threshold: a
2000 x 256 mask alone in 1.4 ms, against 3.0 with ``bernoulli_`` and 2.4 with two 32-bit halves
a draw; forward and backward in ``python -m bench.bench_cpu_kernels`` (docs/bf16.md).

The distribution is dropout's: every element is dropped independently, with probability p
rounded to a multiple of 2^-16 (0.1 becomes 0.1000061; ``bernoulli_`` compares a float
uniform, so it rounds p too, to 2^-24), and kept elements are scaled by 1 / (1 - p), p as
given. Seeding and resuming work as with nn.Dropout: the draws come from torch's default CPU
generator, whose state the checkpoints keep. The random stream is another, so a seed gives
other masks than ``nn.Dropout`` would. GPUs keep torch's fused dropout kernel, which is fast
there.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_INT16_VALUES = 2**16
_INT16_PER_DRAW = 4  # one 64-bit draw holds four uniform 16-bit integers


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> Tensor:
    """A boolean mask of ``shape``, each element True (kept) with probability 1 - p (p rounded
    to a multiple of 2^-16)."""
    count = math.prod(shape)
    draws = torch.empty(-(-count // _INT16_PER_DRAW), dtype=torch.int64, device=device)
    draws.random_(-(2**63), None)  # the full 64-bit range: four uniform 16-bit quarters
    dropped = round(p * _INT16_VALUES)  # values below -2^15 + dropped are dropped
    if dropped == _INT16_VALUES:  # p within 2^-17 of 1: the threshold is past every int16
        return torch.zeros(shape, dtype=torch.bool, device=device)
    return draws.view(torch.int16)[:count].view(shape) >= dropped - 2**15


class Dropout(nn.Module):
    """``nn.Dropout(p)``: in training, zero each element with probability p and scale the rest
    by 1 / (1 - p); the identity in eval mode. On CPUs the mask is ``keep_mask``'s."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        # The scale stays a Python float, as torch's: a bf16 1/(1-p) would be 1.109375 for 1/0.9.
        # In place on the masked copy, which autograd does not keep.
        return x.mul(keep_mask(x.shape, self.p, x.device)).mul_(1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"
