"""Attention on CPUs as batched matmuls, where they beat torch's fused kernel (SDPA).

``matmul_attention``: a training step's attention under bf16 (``MultiHeadAttention.attend``
takes it up to ``model.CPU_BF16_MATMUL_MAX_KEYS`` keys), its weights' forward and backward in
one autograd function with as few passes over the (B, h, T, S) weights as the arithmetic
needs. ``decoding_attention``: a decoding step's few queries against cached keys. Both compute
softmax(q k^T / sqrt(d_k)) v, SDPA's arithmetic, summed in another order (docs/bf16.md,
"Training kernels on CPUs"; docs/ctranslate2.md).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# On CPUs, torch's bmm multiplies matrices of fewer than this many multiply-adds in a scalar
# loop, not a BLAS kernel. A decoding step's self-attention is one query per row and head:
# q k^T and weights-times-v are 1 x d_k x t products, in that loop for t * d_k < 400 (up to 12
# keys at Multi30k's d_k 32). There, products and sums are faster in fp32: 318 us against 897
# for 128 rows of 8 heads over 12 keys, one thread; from 16 keys on the BLAS kernel wins (265 us
# against 396). In bf16, k q^T (the keys in their stored order) beats q k^T at every length:
# 501 us against 761 at 12 keys, 621 against 729 at 20 (docs/ctranslate2.md).
CPU_SMALL_BMM = 400
# torch's CPU softmax works row by row in vectors of 16 floats; a row shorter than one vector
# runs scalar. For 1,024 rows of 12 keys it took 217 us against 45 for exp(x - max) / sum over
# the whole tensor; at 24 keys it is the faster, 40 us against 80.
CPU_SHORT_SOFTMAX = 16


def _score_bias(
    mask: Tensor | None,
    is_causal: bool,
    shape: torch.Size,
    dtype: torch.dtype,
    device: torch.device,
) -> Tensor | None:
    """0 where a query may attend to a key, -inf where not, broadcastable to the scores
    (B * h, T, S) of ``shape`` (B, h, T, S): ``mask`` (True: allowed, broadcastable to the
    unflattened scores) and, with ``is_causal``, the future masked. None: nothing masked."""
    batch, heads, queries, keys = shape
    bias = None
    if mask is not None:
        mask = mask.view((1,) * (4 - mask.dim()) + tuple(mask.shape))
        bias = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, -math.inf)
        bias = bias.expand(batch, heads, -1, keys).reshape(batch * heads, -1, keys)
    if is_causal:
        future = torch.full((queries, keys), -math.inf, dtype=dtype, device=device).triu_(1)
        bias = future if bias is None else bias + future
    return bias


class _AttentionWeights(torch.autograd.Function):
    """softmax(q k^T + mask) over the last dimension, with fewer passes over the (B, h, T, S)
    weights than the same operators under autograd: the mask is added inside the product
    (baddbmm), where a weight is masked its gradient is zero without a pass of its own
    (softmax's backward is p * (g - sum(g p))), and the softmax is computed in fp32 and rounded
    once to the scores' dtype, as SDPA's is."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        batch, heads, queries, d_k = q.shape
        keys = k.size(-2)
        flat_q = q.reshape(batch * heads, queries, d_k)
        flat_kt = k.reshape(batch * heads, keys, d_k).transpose(1, 2)
        bias = _score_bias(mask, is_causal, (batch, heads, queries, keys), q.dtype, q.device)
        if bias is None:
            scores = torch.bmm(flat_q, flat_kt)
        else:
            scores = torch.baddbmm(bias, flat_q, flat_kt)
        weights = softmax_fp32(scores).to(q.dtype).view(batch, heads, queries, keys)
        ctx.save_for_backward(q, k, weights)
        return weights

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        q, k, weights = ctx.saved_tensors
        grad_scores = torch._softmax_backward_data(grad, weights, -1, weights.dtype)
        return grad_scores @ k, grad_scores.transpose(-2, -1) @ q, None, None


def matmul_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False
) -> Tensor:
    """softmax(q k^T / sqrt(d_k)) v, masked where ``mask`` is False and, with ``is_causal``,
    above the diagonal: the arithmetic of SDPA (q scaled before the product, as SDPA's math
    path scales it), as batched matmuls (``_AttentionWeights``)."""
    weights = _AttentionWeights.apply(q * q.size(-1) ** -0.5, k, mask, is_causal)
    return torch.matmul(weights, v)


def softmax_fp32(weights: Tensor) -> Tensor:
    """softmax over the last dimension, computed in fp32 (on a CPU: ``decoding_attention``); rows
    shorter than ``CPU_SHORT_SOFTMAX`` as exp(x - max) / sum over the whole tensor at once."""
    if weights.size(-1) >= CPU_SHORT_SOFTMAX:
        return torch.softmax(weights, dim=-1, dtype=torch.float32)
    weights = weights.float()
    exp = (weights - weights.amax(-1, keepdim=True)).exp_()
    return exp.div_(exp.sum(-1, keepdim=True))


def _one_batch(x: Tensor) -> bool:
    """Whether the leading dimensions (B, h) of ``x`` (B, h, t, d) are one batch of matrices
    without a copy: head-major caches are; position-major ones (``decoder_state.position_major``,
    (B, t, h, d) seen transposed) are not, and a matrix product would copy them first."""
    return x.stride(0) == x.size(1) * x.stride(1)


def decoding_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """``matmul_attention`` of a decoding step on a CPU: q (B, h, T, d_k), a few queries per row
    and head, against cached keys; the same arithmetic, summed in another order.

    One query per row and head in fp32: elementwise products and sums, below
    ``CPU_SMALL_BMM`` and at every length on position-major caches, taken in their memory
    order (a product of matrices would copy the caches first: 96 rows of 8 heads of 32, one
    thread, 527 us against 369 at 13 positions, 1,365 against 868 at 32). In bf16 as k q^T
    and weights v (bf16 products still accumulate in fp32). Short rows of weights:
    ``softmax_fp32``.
    """
    scale = q.size(-1) ** -0.5
    one_query = q.size(-2) == 1
    in_fp32 = one_query and q.dtype == torch.float32
    position_major = in_fp32 and not _one_batch(k)
    elementwise = position_major or (in_fp32 and k.size(-2) * q.size(-1) < CPU_SMALL_BMM)
    if position_major:  # (B, t, h, d) in memory: q (B, 1, h, d) against each position
        weights = (q.transpose(1, 2) * k.transpose(1, 2)).sum(-1).transpose(1, 2).unsqueeze(-2)
        weights = weights * scale  # (B, h, 1, t)
    elif elementwise:
        weights = (q * k).sum(-1).unsqueeze(-2) * scale  # (B, h, 1, S)
    elif one_query and q.dtype == torch.bfloat16:
        weights = torch.matmul(k, q.transpose(-2, -1)).transpose(-2, -1) * scale
    else:
        weights = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        weights = weights.masked_fill(~mask, -math.inf)
    weights = softmax_fp32(weights).to(v.dtype)
    if position_major:  # sum over t of weight (B, t, h, 1) times value (B, t, h, d)
        return (weights[:, :, 0].transpose(1, 2).unsqueeze(-1) * v.transpose(1, 2)).sum(1)[
            :, :, None
        ]
    if elementwise:
        return (weights.transpose(-2, -1) * v).sum(-2, keepdim=True)
    return torch.matmul(weights, v)
