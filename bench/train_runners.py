"""The two trainers bench.bench_train times on the same batches, one optimizer step per call:
the project's Trainer and a Hugging Face MarianMTModel of the same shape, and the random
corpus of WMT-like lengths they train on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from transformer_core.data.binarized import BinarizedWriter
from transformer_core.data.dataset import ParallelDataset
from transformer_core.decoding.export_transformers import marian_config
from transformer_core.model.transformer import count_parameters
from transformer_core.settings import TrainConfig
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


class Ours:
    """Our Trainer: one ``train_step`` is a full optimizer step (data collation included)."""

    def __init__(
        self,
        cfg,
        dataset,
        device,
        precision,
        max_tokens,
        tokens_per_step,
        compile="off",
        batch_shapes="auto",
        compute_weights="fp32",
    ):
        ctx = DistContext(0, 0, 1, device, owns_group=False)
        train_cfg = TrainConfig(
            max_tokens=max_tokens,
            tokens_per_step=tokens_per_step,
            precision=precision,
            warmup=4000,
            compile=compile,
            batch_shapes=batch_shapes,
            compute_weights=compute_weights,
        )
        self.trainer = Trainer(cfg, train_cfg, ctx, dataset)
        self.params = count_parameters(self.trainer.model)

    def step(self) -> int:
        return self.trainer.train_step().tgt_tokens


class Peer:
    """Hugging Face MarianMTModel of the same shape, the same loss and optimizer, pre-collated batches."""

    def __init__(self, cfg, batches, device, autocast):
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
        self.batches, self.device, self.autocast, self.i = batches, device, autocast, 0
        self.eps, self.pad = cfg.label_smoothing, cfg.pad_id

    def step(self) -> int:
        batch = self.batches[self.i % len(self.batches)]
        self.i += 1
        src, tgt_in, tgt_out = (t.to(self.device) for t in (batch.src, batch.tgt_in, batch.tgt_out))
        labels = tgt_out.masked_fill(tgt_out == self.pad, -100)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = self.model(
                input_ids=src, attention_mask=src != self.pad, decoder_input_ids=tgt_in
            ).logits
            loss = F.cross_entropy(
                logits.float().view(-1, logits.size(-1)),
                labels.view(-1),
                ignore_index=-100,
                label_smoothing=self.eps,
                reduction="sum",
            )
        (loss / batch.tgt_tokens).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return batch.tgt_tokens
