"""The reversal task, the learnable synthetic task of the learning benches
(``bench.bench_shapes --learning``, ``bench.bench_learning_check``): each target its source
reversed, over a vocabulary of ``LEARNING_VOCABULARY``; its corpus, its model, and the NLL
curves of training runs on it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bench.lib.shapes import SHAPES
from transformer_core.data.binarized import BinarizedWriter
from transformer_core.data.dataset import ParallelDataset
from transformer_core.device import choose_attention_backends
from transformer_core.model.config import ModelConfig, model_config
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.random_state import seed_everything
from transformer_core.training.step import Trainer

LEARNING_VOCABULARY = 100  # the reversal task's: learned within a few hundred steps
# The first steps of a run, timed apart: its warm-up, compilation included.
WARMUP_STEPS = 5


@dataclass(frozen=True)
class ReversalRun:
    """Training on the reversal task: ``steps`` steps of ``tokens`` tokens, the NLL logged
    every ``interval``, the model ``shape`` (tiny or base) with P_drop ``dropout`` on
    ``device``, sentences of ``lengths`` tokens (24 to 31: every batch 32 wide, one shape)."""

    steps: int
    interval: int = 50
    shape: str = "tiny"
    device: str = "cpu"
    tokens: int = 1000
    lengths: tuple[int, int] = (2, 60)
    dropout: float = 0.1


def task_name(tokens: int, lengths: tuple[int, int]) -> str:
    """The task as results name it: its pairs (20 steps' worth) and their lengths."""
    return f"reversal, {20 * tokens:,} pairs of {lengths[0]}-{lengths[1]} tokens"


def reversal_config(shape: str, dropout: float, **changes) -> ModelConfig:
    """The model of ``shape`` (tiny: ``shapes.SHAPES``; base: the paper's) over the task's
    vocabulary, with P_drop ``dropout`` and any further model ``changes``."""
    sizes = {} if shape == "base" else SHAPES[shape]
    return model_config(
        "base", **{**sizes, "vocab_size": LEARNING_VOCABULARY, "dropout": dropout}, **changes
    )


def reversal_corpus(
    prefix: Path, vocab_size: int, sentences: int, lengths: tuple[int, int] = (2, 60)
) -> ParallelDataset:
    """A learnable synthetic task: each target is its source reversed (lengths log-normal
    around 15, clipped to ``lengths``: 24 to 31 makes every batch 32 wide, one shape)."""
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(15), 0.5, sentences), *lengths).astype(int)
    with BinarizedWriter(prefix, vocab_size) as writer:
        for n in lengths:
            ids = rng.integers(4, vocab_size, n).tolist()
            writer.add(ids, ids[::-1])
    return ParallelDataset(prefix)


def nll_curve(
    trainer: Trainer, steps: int, interval: int, clock: list[float] | None = None
) -> list[float]:
    """``steps`` training steps of ``trainer``: the NLL per target token of every ``interval``;
    ``clock`` (a list) gets the time at the end of each step, the device synchronized."""
    curve, tokens = [], 0
    for step in range(1, steps + 1):
        tokens += trainer.train_step().tgt_tokens
        if clock is not None:
            if trainer.ctx.device.type == "cuda":
                torch.cuda.synchronize(trainer.ctx.device)
            clock.append(time.perf_counter())
        if step % interval == 0:
            curve.append(round(trainer.interval_sums()[1] / tokens, 4))
            tokens = 0
    return curve


def train_curve(
    cfg, train_cfg: TrainSettings, dataset, ctx: DistContext, seed: int, steps: int, interval: int
) -> tuple[list[float], dict]:
    """The NLL per target token every ``interval`` steps of one run (the batches of the
    sampler's seed, ``train_cfg.seed``; the initial weights and dropout masks of ``seed``), and
    its times: the whole run, its first ``WARMUP_STEPS`` steps and the mean step after them."""
    start = time.perf_counter()
    trainer = Trainer.fresh(cfg, train_cfg, ctx, dataset)
    try:
        seed_everything(seed)
        trainer.model.reset_parameters()
        if trainer.master:
            trainer.master.refresh()
        seed_everything(seed + 1_000_003)  # the masks: another stream than the weights'
        begin, clock = time.perf_counter(), []
        curve = nll_curve(trainer, steps, interval, clock)
    finally:
        trainer.close()
    warm = min(WARMUP_STEPS, len(clock))
    after = clock[-1] - clock[warm - 1] if len(clock) > warm else 0.0
    times = {
        "seconds": round(time.perf_counter() - start, 2),
        "warmup_seconds": round(clock[warm - 1] - begin, 3),
        "step_ms": round(1000 * after / (len(clock) - warm), 2) if after else None,
    }
    return curve, times


def learning_report(run: ReversalRun, variants: list[tuple[str, str, str]], workdir: Path) -> dict:
    """The loss curves (NLL per target token, per log interval) of ``run.shape`` on the reversal
    task, fixed shapes all, for each of ``variants`` ((eager, reseeded or compiled, precision,
    compute weights); the first is the reference), and each one's largest relative gap to the
    reference. The same initial weights and batches; compiled code draws other dropout masks
    (inductor's own generator), eager code the reference's, and reseeded code (eager) masks
    from another seed: its gap is what other masks alone move the curve, the floor for
    compiled code's. With ``run.dropout`` 0 there are no masks: the paths differ in arithmetic
    alone. On CUDA, compiled code runs as CUDA graphs."""
    cfg = reversal_config(run.shape, run.dropout)
    dataset = reversal_corpus(workdir / "reversal", cfg.vocab_size, 20 * run.tokens, run.lengths)
    ctx = DistContext(0, 0, 1, torch.device(run.device), owns_group=False)
    choose_attention_backends(ctx.device)  # as training does: cuDNN's attention left out
    curves: dict[str, dict] = {}
    for kind, dtype, weights in variants:
        name = f"{kind} {dtype}" + (" weights" if weights == "bf16" else "")
        name = name.replace("reseeded", "eager") + (", other masks" if kind == "reseeded" else "")
        if name in curves:
            continue
        train_cfg = TrainSettings(
            max_tokens=run.tokens, tokens_per_step=run.tokens, warmup=100, lr_scale=0.3,
            precision=dtype, compile="on" if kind == "compiled" else "off",
            batch_shapes="fixed", device=run.device, compute_weights=weights,
        )  # fmt: skip
        trainer = Trainer.fresh(cfg, train_cfg, ctx, dataset)
        if kind == "reseeded":  # dropout's generator only: the batches have a sampler's own
            torch.manual_seed(train_cfg.seed + 1)
        start = time.perf_counter()
        try:
            curve = nll_curve(trainer, run.steps, run.interval)
        finally:
            trainer.close()
        reference = next(iter(curves.values()), {"nll_per_token": curve})["nll_per_token"]
        gap = max(abs(y - x) / x for x, y in zip(reference, curve, strict=True))
        curves[name] = {
            "nll_per_token": curve,
            "largest_relative_gap": round(gap, 4),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(name, json.dumps(curves[name]), flush=True)
    return {
        "shape": run.shape, "vocab_size": LEARNING_VOCABULARY, "device": run.device,
        "task": task_name(run.tokens, run.lengths),
        "tokens_per_step": run.tokens, "lr_scale": 0.3, "dropout": run.dropout,
        "steps": run.steps, "log_interval": run.interval,
        "reference": " ".join(variants[0][:2]), "curves": curves,
    }  # fmt: skip
