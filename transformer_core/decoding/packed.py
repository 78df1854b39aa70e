"""Decoding on CPUs with prepacked weights: every matrix product through oneDNN.

Beam search multiplies a few hundred rows at a time by the same weights, step after
step. ``torch.nn.functional.linear`` hands each product to MKL's sgemm with the
weight as stored; oneDNN can reorder a weight once into the blocked layout its
kernels read (``torch.ops.mkldnn._reorder_linear_weight``,
what torch.compile's CPU freezing uses) and then run ``_linear_pointwise`` on it.
At the decoder's shapes that is 1.2 to 2.4 times the speed of ``F.linear`` on one
AVX-512 core (256 into 8000: 512 rows 23.1 ms against 19.6 ms, 128 rows 6.7 ms against
5.0 ms, 4 rows 433 us against 181 us; docs/ctranslate2.md). The arithmetic is the same fp32 (or bf16) products,
summed in another order.

``pack_linears`` turns a decoding copy's ``nn.Linear`` layers and tied vocabulary
projection into ``PackedLinear``; the embedding lookups, attention, layer norms and
search are unchanged. A packed call costs about 13 us more than ``F.linear`` before
its product, so small models lose: at d_model 64 (the smoke scale) a 64-row product
takes 22 us against 9 us. ``worth_packing`` packs from ``PACK_MIN_D_MODEL`` up, and
only where torch has oneDNN's packing ops. The compiled decoding step (``fixed_step``) keeps
the packed products, each one opaque operator in its graph (``packed_linear``): inductor's
own products there are MKL's, the slower at these shapes (256 into 8000 at 8 rows, one thread:
331 us packed by oneDNN, 674 ``F.linear``, 734 packed by MKL).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

PACK_MIN_D_MODEL = 256  # Multi30k's width: beam search 10% faster packed; d_model 64 slower


def worth_packing(model: nn.Module) -> bool:
    """Whether decoding ``model`` gains from packed weights: on a CPU, from ``PACK_MIN_D_MODEL``
    up, where this torch has oneDNN and its linear-weight packing ops."""
    return (
        next(model.parameters()).device.type == "cpu"
        and model.cfg.d_model >= PACK_MIN_D_MODEL
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


@torch.library.custom_op("transformer_core::packed_linear", mutates_args=())
def packed_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """oneDNN's product of ``x`` and a packed ``weight``, as one operator that torch.compile
    calls as it is: inductor's oneDNN fusion pass would otherwise rewrite the product around
    it, and fails to on dynamic shapes."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


@packed_linear.register_fake
def _(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x.new_empty(*x.shape[:-1], weight.size(0))


class PackedLinear(nn.Module):
    """``x W^T + b`` with W reordered once into oneDNN's layout (inference only: no gradient)."""

    def __init__(self, weight: Tensor, bias: Tensor | None):
        super().__init__()
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        self.dtype = weight.dtype
        self.weight = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())
        self.bias = None if bias is None else bias.detach().to(weight.dtype).contiguous()

    def forward(self, x: Tensor) -> Tensor:
        # Under bf16 autocast the caller's activations may be fp32 (a layer norm's output):
        # the packed kernel takes its own dtype only.
        x = x.to(self.dtype).contiguous()
        if torch.compiler.is_compiling():  # one opaque operator in the graph
            return packed_linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.dtype}"


def pack_linears(model: nn.Module) -> nn.Module:
    """Make ``model``'s Linear layers and vocabulary projection ``PackedLinear``, in place (call
    it on a decoding copy: the plain Linear layers are gone); returns ``model``."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, PackedLinear(child.weight, child.bias))
    model.vocabulary_projection = PackedLinear(model.embedding.weight, None)
    # The instance's project (a plain attribute, not a registered module) is the packed one.
    model.project = model.vocabulary_projection.forward
    return model
