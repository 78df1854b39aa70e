"""Label-smoothed cross-entropy (paper section 5.4, eps_ls = 0.1).

The smoothed target of a token is ``q = (1 - eps) * onehot(y) + eps / V``: the
eps mass is spread uniformly over the whole vocabulary of V entries, as in
Szegedy et al. (2016), the label smoothing the paper cites. The loss of one
token is then

    -sum_k q_k log p_k = (1 - eps) * (-log p_y) + eps * mean_k(-log p_k),

which is what ``torch.nn.functional.cross_entropy(label_smoothing=eps)``
computes. (tensor2tensor spreads eps over the V - 1 wrong entries and subtracts
the constant entropy of q; for V = 37000 the gradients differ by about 1/V.)

Padding positions are ignored. The functions return *sums* over tokens so
that callers can normalize once per optimizer step by the global number of
target tokens (the gradient then equals that of one big batch, however the
tokens are split over micro-batches and devices). The unsmoothed NLL is
returned beside it: perplexity is exp(NLL per token), without smoothing.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


class LossSums(NamedTuple):
    """Sums over the non-pad target tokens of one batch."""

    loss: Tensor  # label-smoothed cross-entropy, summed (what backward sees)
    nll: Tensor  # plain negative log-likelihood, summed (for perplexity)
    tokens: int  # number of non-pad target tokens


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of ``logits`` (N, V) with an analytic gradient.

    d loss_i / d z_ik = softmax(z_i)_k - q_ik. Forward is one fused log_softmax
    and one mean over its output; backward turns the saved log-probabilities into
    the gradient in place. Autograd through log_softmax, gather and sum makes
    about twice as many passes over the (N, V) tensors, the largest of a
    training step with a big vocabulary.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
        lprobs = torch.log_softmax(logits, dim=-1)  # (N, V)
        nll = -lprobs.gather(1, target[:, None]).sum()
        loss = nll.clone() if epsilon == 0.0 else (1.0 - epsilon) * nll - epsilon * lprobs.mean(-1).sum()
        ctx.save_for_backward(lprobs, target)
        ctx.epsilon = epsilon
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        lprobs, target = ctx.saved_tensors
        eps, vocab = ctx.epsilon, lprobs.size(-1)
        grad = lprobs.exp_()  # softmax, in place: the saved log-probabilities are not needed again
        grad.scatter_add_(1, target[:, None], grad.new_full((target.numel(), 1), eps - 1.0))
        grad.mul_(grad_loss)
        if eps:
            grad.sub_(grad_loss * (eps / vocab))
        return grad, None, None


def label_smoothed_nll_loss(logits: Tensor, target: Tensor, epsilon: float, pad_id: int = 0) -> LossSums:
    """Summed label-smoothed loss and NLL of ``logits`` (..., V) against ``target`` (...).

    Half-precision logits (bf16 autocast) are upcast to fp32 first.
    """
    logits = logits.reshape(-1, logits.size(-1))
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    target = target.reshape(-1)
    keep = target != pad_id
    if not bool(keep.all()):
        logits, target = logits[keep], target[keep]
    loss, nll = _SmoothedCrossEntropy.apply(logits, target, float(epsilon))
    return LossSums(loss, nll, target.numel())


def perplexity(nll_sum: float, tokens: int) -> float:
    """exp(NLL per token); inf when it overflows."""
    if tokens == 0:
        return float("nan")
    mean = nll_sum / tokens
    return float("inf") if mean > 700 else float(torch.tensor(mean, dtype=torch.float64).exp())
