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
import torch.nn.functional as F
from torch import Tensor


class LossSums(NamedTuple):
    """Sums over the non-pad target tokens of one batch."""

    loss: Tensor  # label-smoothed cross-entropy, summed (what backward sees)
    nll: Tensor  # plain negative log-likelihood, summed (for perplexity)
    tokens: int  # number of non-pad target tokens


def label_smoothed_nll_loss(logits: Tensor, target: Tensor, epsilon: float, pad_id: int = 0) -> LossSums:
    """Summed label-smoothed loss and NLL of ``logits`` (..., V) against ``target`` (...).

    Log-probabilities are taken in fp32 even under bf16 autocast.
    """
    vocab = logits.size(-1)
    lprobs = F.log_softmax(logits.reshape(-1, vocab).float(), dim=-1)  # (N, V)
    target = target.reshape(-1)
    keep = target != pad_id
    if not bool(keep.all()):
        lprobs, target = lprobs[keep], target[keep]
    nll = -lprobs.gather(1, target[:, None]).sum()
    if epsilon == 0.0:
        return LossSums(nll, nll.detach(), target.numel())
    smooth = -lprobs.sum() / vocab  # sum over tokens of mean_k(-log p_k)
    loss = (1.0 - epsilon) * nll + epsilon * smooth
    return LossSums(loss, nll.detach(), target.numel())


def perplexity(nll_sum: float, tokens: int) -> float:
    """exp(NLL per token); inf when it overflows."""
    if tokens == 0:
        return float("nan")
    mean = nll_sum / tokens
    return float("inf") if mean > 700 else float(torch.tensor(mean, dtype=torch.float64).exp())
