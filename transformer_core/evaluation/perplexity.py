"""Per-word-piece perplexity on a held-out set (Table 3's PPL column).

PPL = exp(mean negative log-likelihood per target token), the mean taken over
every target word piece of the set including EOS and excluding padding, with
the model's plain softmax: no label smoothing, whatever the model was trained
with. Teacher-forced, one forward pass per batch.

``summed_nll`` and ``Perplexity`` are the one summation of per-batch NLLs and the
one formula behind both dev numbers: the training run's own dev evaluation
(``Trainer.evaluate``, the number Table 3 reports) and ``model_perplexity`` here (the
``ppl`` command), which therefore give the same number for the same checkpoint;
``exp_mean_nll`` is the formula, also of the training log's ppl.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_core.data.batching import TokenBucketSampler, collate
from transformer_core.data.dataset import ParallelDataset
from transformer_core.errors import UserError
from transformer_core.settings import INFERENCE_MAX_TOKENS

# (src, tgt_in, tgt_out) -> the batch's NLL summed over its non-pad target tokens (nats).
BatchNll = Callable[[Tensor, Tensor, Tensor], Tensor]


def exp_mean_nll(nll_sum: float, tokens: int) -> float:
    """exp(NLL per token): the perplexity of ``tokens`` tokens; inf when it overflows."""
    if tokens == 0:
        return float("nan")
    mean = nll_sum / tokens
    return float("inf") if mean > 700 else float(torch.tensor(mean, dtype=torch.float64).exp())


@dataclass(frozen=True)
class Perplexity:
    """Summed NLL (nats) over ``tokens`` target tokens of ``sentences`` sentences."""

    nll_sum: float
    tokens: int
    sentences: int

    @property
    def nll_per_token(self) -> float:
        return self.nll_sum / self.tokens

    @property
    def perplexity(self) -> float:
        """exp(NLL per token), by the formula of the training log's ppl."""
        return exp_mean_nll(self.nll_sum, self.tokens)

    def to_dict(self) -> dict:
        return {"perplexity": self.perplexity, "nll_per_token": self.nll_per_token, **asdict(self)}


def summed_nll(
    batch_nll: BatchNll,
    batches: Iterable[tuple[Tensor, Tensor, Tensor]],
    pad_id: int,
    device: torch.device,
) -> Perplexity:
    """``batch_nll`` summed over ``(src, tgt_in, tgt_out)`` batches, each (B, len), right-padded.

    Each batch is moved to ``device`` first; the sum is accumulated in float64, and the
    target tokens (positions where ``tgt_out`` is not ``pad_id``) and sentences are counted.
    """
    nll_sum, tokens, sentences = 0.0, 0, 0
    for src, tgt_in, tgt_out in batches:
        nll_sum += batch_nll(src.to(device), tgt_in.to(device), tgt_out.to(device)).double().item()
        tokens += int((tgt_out != pad_id).sum())
        sentences += src.size(0)
    return Perplexity(nll_sum, tokens, sentences)


@torch.inference_mode()
def model_perplexity(
    model: nn.Module,
    batches: Iterable[tuple[Tensor, Tensor, Tensor]],
    autocast: torch.dtype | None = None,
) -> Perplexity:
    """Perplexity of ``model`` over ``(src, tgt_in, tgt_out)`` batches, each (B, len), right-padded.

    ``tgt_in`` is BOS + pieces and ``tgt_out`` pieces + EOS; positions where
    ``tgt_out`` is padding do not count.
    """
    pad = model.cfg.pad_id
    device = next(model.parameters()).device

    def batch_nll(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            logits = model(src, tgt_in)  # (B, T, V)
        return F.cross_entropy(
            logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=pad, reduction="sum"
        )

    result = summed_nll(batch_nll, batches, pad, device)
    if result.tokens == 0:
        raise UserError("perplexity of an empty set: no target tokens")
    return result


def dataset_batches(
    dataset: ParallelDataset,
    max_tokens: int,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Every pair of a binarized split once, in length-bucketed batches of <= max_tokens per side.

    With ``world_size`` ranks, this rank's share of the batches (``TokenBucketSampler``).
    """
    sampler = TokenBucketSampler(
        dataset.src_lens, dataset.tgt_lens, max_tokens, rank=rank, world_size=world_size
    )
    for indices in sampler.batches(epoch=0):
        batch = collate(dataset, indices, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
        yield batch.src, batch.tgt_in, batch.tgt_out


def dataset_perplexity(
    model: nn.Module,
    prefix: str | os.PathLike,
    max_tokens: int = INFERENCE_MAX_TOKENS,
    autocast: torch.dtype | None = None,
) -> Perplexity:
    """Perplexity of ``model`` on the binarized split ``prefix``."""
    cfg = model.cfg
    dataset = ParallelDataset(prefix)
    if dataset.vocab_size > cfg.vocab_size:
        raise UserError(
            f"{prefix}: vocabulary of {dataset.vocab_size} ids, more than the model's "
            f"vocab_size={cfg.vocab_size}: data and checkpoint do not belong together"
        )
    if len(dataset) == 0:
        raise UserError(f"{prefix}: no sentence pairs")
    return model_perplexity(
        model, dataset_batches(dataset, max_tokens, cfg.pad_id, cfg.bos_id, cfg.eos_id), autocast
    )
