"""The two trainers the training benches time on the same batches, one optimizer step per
call: the project's Trainer and a Hugging Face MarianMTModel of the same shape; the random
corpus of WMT-like lengths they train on; and the peer's speed on the batches our Trainer cuts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from transformer_core.data.batching import TokenBucketSampler, collate
from transformer_core.data.binarized import BinarizedWriter
from transformer_core.data.dataset import ParallelDataset
from transformer_core.export.transformers import marian_config
from transformer_core.model.transformer import count_parameters
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.step import Trainer


def synthetic_corpus(
    prefix: Path, vocab_size: int, sentences: int, seed: int = 0, lengths: tuple = (3, 80)
) -> ParallelDataset:
    """Random ids with WMT-like lengths (log-normal around 22 word pieces), clipped to
    ``lengths`` (default 3..80; a narrow range gives few batch widths, so few compiled shapes)."""
    low, high = lengths
    rng = np.random.default_rng(seed)
    src_lens = np.clip(np.round(rng.lognormal(np.log(22), 0.5, sentences)), low, high).astype(int)
    tgt_lens = np.clip(np.round(src_lens * rng.normal(1.05, 0.1, sentences)), low, high)
    tgt_lens = tgt_lens.astype(int)
    with BinarizedWriter(prefix, vocab_size) as writer:
        for s, t in zip(src_lens, tgt_lens, strict=True):
            writer.add(
                rng.integers(4, vocab_size, s).tolist(), rng.integers(4, vocab_size, t).tolist()
            )
    return ParallelDataset(prefix)


def timed(runner, steps: int, device: torch.device) -> tuple[int, float]:
    """``steps`` optimizer steps of ``runner``: the target tokens and the seconds they took."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start, tokens = time.perf_counter(), 0
    for _ in range(steps):
        tokens += runner.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return tokens, time.perf_counter() - start


@dataclass(frozen=True)
class Steps:
    """How a bench steps: ``max_tokens`` target tokens a micro-batch, ``tokens_per_step`` a
    step, ``warmup`` untimed steps (compilation happens there), then ``timed`` steps."""

    max_tokens: int
    tokens_per_step: int
    timed: int
    warmup: int


def train_settings(
    precision: str,
    max_tokens: int,
    tokens_per_step: int,
    compile: str = "off",
    batch_shapes: str = "auto",
    compute_weights: str = "fp32",
) -> TrainSettings:
    """The training settings of a bench's Trainer: the paper's 4,000 warmup steps, the path
    (``compile``, ``batch_shapes``, ``compute_weights``) as given."""
    return TrainSettings(
        max_tokens=max_tokens,
        tokens_per_step=tokens_per_step,
        precision=precision,
        warmup=4000,
        compile=compile,
        batch_shapes=batch_shapes,
        compute_weights=compute_weights,
    )


class Ours:
    """Our Trainer: one ``train_step`` is a full optimizer step (data collation included)."""

    def __init__(self, cfg, dataset, device, train_cfg: TrainSettings):
        ctx = DistContext(0, 0, 1, device, owns_group=False)
        self.trainer = Trainer.fresh(cfg, train_cfg, ctx, dataset)
        self.params = count_parameters(self.trainer.model)

    def step(self) -> int:
        return self.trainer.train_step().tgt_tokens


def peer_steps(sampler: TokenBucketSampler, dataset, accumulation: int, count: int) -> list:
    """``count`` optimizer steps for the peer: the sampler's first batches, collated exactly
    (widths a multiple of 8), ``accumulation`` micro-batches a step, as our Trainer cuts its
    steps from the same sampler's batches."""
    batches = sampler.batches(0)[: count * accumulation]
    if len(batches) < count * accumulation:
        raise ValueError(f"the corpus holds {len(batches)} batches, not {count * accumulation}")
    collated = [collate(dataset, b, multiple=8) for b in batches]
    return [collated[i : i + accumulation] for i in range(0, len(collated), accumulation)]


class Peer:
    """Hugging Face MarianMTModel of the same shape, the same loss and optimizer, pre-collated
    steps (each a list of micro-batches whose gradients add up); ``compile``: its forward and
    loss through ``torch.compile`` (dynamic shapes, as the batch widths vary)."""

    def __init__(self, cfg, steps, device, autocast, compile=False):
        from transformers import MarianMTModel

        torch.manual_seed(0)
        config = marian_config(cfg)
        self.model = MarianMTModel(config).to(device).train()
        self.params = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        fused = {"fused": True} if device.type in ("cpu", "cuda") else {}
        self.optimizer = torch.optim.Adam(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=1e-4,
            betas=(0.9, 0.98),
            eps=1e-9,
            **fused,
        )
        self.steps, self.device, self.autocast, self.i = steps, device, autocast, 0
        self.eps, self.pad = cfg.label_smoothing, cfg.pad_id
        self.loss = torch.compile(self._loss) if compile else self._loss

    def _loss(self, src, tgt_in, tgt_out):
        """The summed label-smoothed loss of one micro-batch."""
        labels = tgt_out.masked_fill(tgt_out == self.pad, -100)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = self.model(
                input_ids=src, attention_mask=src != self.pad, decoder_input_ids=tgt_in
            ).logits
            return F.cross_entropy(
                logits.float().view(-1, logits.size(-1)),
                labels.view(-1),
                ignore_index=-100,
                label_smoothing=self.eps,
                reduction="sum",
            )

    def step(self) -> int:
        micro_batches = self.steps[self.i % len(self.steps)]
        self.i += 1
        tokens = sum(batch.tgt_tokens for batch in micro_batches)
        for batch in micro_batches:
            tensors = (t.to(self.device) for t in (batch.src, batch.tgt_in, batch.tgt_out))
            (self.loss(*tensors) / tokens).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return tokens


def peer_throughput(cfg, dataset, device, steps: Steps, compile: bool, seed: int = 1) -> dict:
    """The peer's target tokens per second under bf16 autocast on ``device``, on the batches
    our Trainer cuts from ``dataset`` (exact shapes, ``steps.max_tokens`` a micro-batch,
    ``steps.tokens_per_step`` a step): ``steps.warmup`` steps (compilation happens there), then
    ``steps.timed``."""
    accumulation = max(1, steps.tokens_per_step // steps.max_tokens)
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, steps.max_tokens, seed=seed)
    batches = peer_steps(sampler, dataset, accumulation, steps.warmup + steps.timed)
    peer = Peer(cfg, batches, device, True, compile)
    start = time.perf_counter()
    timed(peer, steps.warmup, device)
    warm_seconds = time.perf_counter() - start
    tokens, seconds = timed(peer, steps.timed, device)
    return {
        "peer": "MarianMTModel, torch.compile" if compile else "MarianMTModel, eager",
        "params": peer.params,
        "accumulation": accumulation,
        "warmup_steps": steps.warmup,
        "warmup_seconds": round(warm_seconds, 1),
        "steps": steps.timed,
        "tgt_tokens_per_step": tokens / steps.timed,
        "tgt_tokens_per_s": round(tokens / seconds, 1),
    }
