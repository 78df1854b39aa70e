"""Label-smoothed cross-entropy (paper section 5.4, eps_ls = 0.1).

The smoothed target of a token is ``q = (1 - eps) * onehot(y) + eps / V``: the
eps mass is spread uniformly over the whole vocabulary of V entries, as in
Szegedy et al. (2016), the label smoothing the paper cites. The loss of one
token is then

    -sum_k q_k log p_k = (1 - eps) * (-log p_y) + eps * mean_k(-log p_k),

which is what ``torch.nn.functional.cross_entropy(label_smoothing=eps)``
computes. (tensor2tensor spreads eps over the V - 1 wrong entries and subtracts
the constant entropy of q; for V = 37000 the gradients differ by about 1/V.)

The loss is computed together with the pre-softmax projection (see
``projected_label_smoothed_loss``). Padding positions are ignored. The
functions return *sums* over tokens so
that callers can normalize once per optimizer step by the global number of
target tokens (the gradient then equals that of one big batch, however the
tokens are split over micro-batches and devices). The unsmoothed NLL is
returned beside it: perplexity is exp(NLL per token), without smoothing.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable


class LossSums(NamedTuple):
    """Sums over the non-pad target tokens of one batch."""

    loss: Tensor  # label-smoothed cross-entropy, summed (what backward sees)
    nll: Tensor  # plain negative log-likelihood, summed (for perplexity)
    tokens: int  # number of non-pad target tokens


class _ProjectedSmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of ``hidden @ weight.T``, fused and chunked over tokens.

    For ``rows`` tokens at a time: logits, log-softmax in place, the loss, and at
    once the gradient d loss / d z = softmax(z) - q in place, pushed through the
    projection into d hidden and d weight (Liger-Kernel's fused linear
    cross-entropy). The (N, V) logits never exist whole: one (rows, V) buffer
    at a time instead of several (N, V) tensors, each of them a fresh, page-faulting
    allocation. Backward only scales the stored gradients by the incoming one.
    """

    @staticmethod
    def forward(
        ctx,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        epsilon: float,
        rows: int,
        need_grad: bool,
    ) -> tuple[Tensor, Tensor]:
        vocab = weight.size(0)
        dtype = torch.promote_types(
            weight.dtype, torch.float32
        )  # fp32 math for half-precision inputs
        nll = torch.zeros((), dtype=dtype, device=hidden.device)
        log_prob_sum = torch.zeros((), dtype=dtype, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if need_grad else None
        grad_weight = torch.zeros_like(weight, dtype=dtype) if need_grad else None
        # Without autocast, one logits buffer serves every chunk and the gradients are written in
        # place (out=, addmm_): no fresh (rows, V) or (V, d) tensors. Under autocast the
        # matmuls must be out-of-place to run in bf16.
        plain = (
            not torch.is_autocast_enabled(hidden.device.type)
            and hidden.dtype == weight.dtype == dtype
        )
        buffer = hidden.new_empty(min(rows, hidden.size(0)), vocab) if plain else None
        for start in range(0, hidden.size(0), rows):
            h, t = hidden[start : start + rows], target[start : start + rows, None]
            if plain:
                z = torch.mm(h, weight.t(), out=buffer[: h.size(0)])  # (rows, V)
            else:
                z = F.linear(h, weight).to(dtype)  # bf16 matmul under autocast, fp32 log-softmax
            torch.log_softmax(z, dim=-1, out=z)
            nll -= z.gather(1, t).sum()
            if epsilon:
                log_prob_sum += z.sum()
            if need_grad:
                grad = z.exp_()  # softmax
                grad.scatter_add_(1, t, grad.new_full(t.shape, epsilon - 1.0))
                if epsilon:
                    grad.sub_(epsilon / vocab)
                if plain:
                    torch.mm(grad, weight, out=grad_hidden[start : start + rows])
                    grad_weight.addmm_(grad.t(), h)
                else:
                    grad_hidden[start : start + rows] = grad @ weight
                    grad_weight += grad.t() @ h
        loss = (1.0 - epsilon) * nll - (epsilon / vocab) * log_prob_sum if epsilon else nll.clone()
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden.mul_(grad_loss), grad_weight.mul_(grad_loss), None, None, None, None


# Logits per chunk: 16M floats (64 MiB in fp32) on a CPU, four times that on a GPU.
CHUNK_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 26}


def projected_label_smoothed_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int = 0
) -> LossSums:
    """Summed label-smoothed loss and NLL of logits ``hidden @ weight.T`` against ``target``.

    ``hidden`` (..., d) are the decoder outputs, ``weight`` (V, d) the tied
    pre-softmax projection, ``target`` (...) the token ids; pad positions are
    dropped before the projection. Log-probabilities are fp32 even under bf16 autocast.
    """
    hidden = hidden.reshape(-1, hidden.size(-1))
    target = target.reshape(-1)
    keep = target != pad_id
    if not bool(keep.all()):
        hidden, target = hidden[keep], target[keep]
    rows = max(1, CHUNK_ELEMENTS.get(hidden.device.type, 1 << 24) // weight.size(0))
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    loss, nll = _ProjectedSmoothedCrossEntropy.apply(
        hidden, weight, target, float(epsilon), rows, need_grad
    )
    return LossSums(loss, nll, target.numel())


def perplexity(nll_sum: float, tokens: int) -> float:
    """exp(NLL per token); inf when it overflows."""
    if tokens == 0:
        return float("nan")
    mean = nll_sum / tokens
    return float("inf") if mean > 700 else float(torch.tensor(mean, dtype=torch.float64).exp())
