"""How many tokens one device's micro-batch holds when ``train.max_tokens`` is ``auto``.

A step's tokens (``tokens_per_step``, the paper's 25,000) are split over the devices, and on
each device into micro-batches whose gradients are accumulated. On a GPU a step of one large
micro-batch costs far less than the same tokens in several small ones: the host queues about
the same kernels for each, and small ones leave the GPU idle (one H100, base, eager:
79.0 ms for one micro-batch of 25,000 tokens, 45.2 ms for one of 3,125, so 8 of them cost
4.6x as much; docs/gpu.md). ``auto`` therefore gives each GPU its whole share of the step
where it fits the GPU's memory, and halves it until it does, down to the paper's 3,125
tokens (what each of its 8 GPUs ran). On a CPU the micro-batch sets no speed, only memory,
and ``auto`` is the paper's 3,125.

How a step is cut into micro-batches is a hardware choice, not the recipe's: the step holds
the same number of tokens either way. The choice is a setting of the run (``TrainSettings``),
which ``auto`` keeps when a run resumes (``recorded``): a cluster that requeues a job onto
another number of devices, where ``auto`` would choose otherwise, continues the run with its
recorded micro-batch wherever that fits the device, and is refused in one line where it does
not. A number given for ``max_tokens`` that differs from the run's is a change of its
trajectory (``run_dir``).

What the ranks cut (``cut``) is recorded in each checkpoint: a run resumed on another number of
ranks continues its trajectory only where these ranks cut the same micro-batches
(``planned_cut``, asked before the session decides to resume, ``run_dir.ranks_mismatch``).
"""

from __future__ import annotations

import dataclasses

import torch

from transformer_core.data.batching import TokenBucketSampler
from transformer_core.data.dataset import ParallelDataset
from transformer_core.errors import UserError
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import parameter_count
from transformer_core.settings import AUTO, TrainSettings

PAPER_MICRO_BATCH = 3125  # the paper's 25,000 tokens a step over its 8 GPUs
STATE_BYTES = 16  # per parameter: the fp32 weight, its gradient and Adam's two moments
# Bytes one token of a micro-batch holds per unit of model width and per layer over a
# training step (activations kept for the backward pass, bf16 autocast, eager): one H100
# measured 77 (base) and 71 (big) at 25,000 tokens of WMT-like lengths; 96 leaves a margin.
ACTIVATION_BYTES = 96
MEMORY_SHARE = 0.85  # of the GPU's memory a step may plan to use (the allocator's slack)


def step_memory(model_cfg: ModelConfig, tokens: int) -> int:
    """Bytes a training step of ``tokens`` tokens a micro-batch is planned to take on a GPU:
    the model's states, and the activations of one micro-batch."""
    layers = model_cfg.encoder_layers + model_cfg.decoder_layers
    return STATE_BYTES * parameter_count(model_cfg) + (
        ACTIVATION_BYTES * model_cfg.d_model * layers * tokens
    )


def fitting_micro_batch(model_cfg: ModelConfig, share: int, memory_bytes: int) -> int:
    """``share`` (a device's tokens per step), halved until a step fits ``MEMORY_SHARE`` of
    ``memory_bytes``, but not below ``PAPER_MICRO_BATCH`` (nor above ``share``)."""
    tokens = share
    while tokens > PAPER_MICRO_BATCH and step_memory(model_cfg, tokens) > (
        MEMORY_SHARE * memory_bytes
    ):
        tokens = -(-tokens // 2)
    return tokens


def micro_batch_tokens(
    cfg: TrainSettings, model_cfg: ModelConfig, device: torch.device, world_size: int
) -> int:
    """``cfg.max_tokens``, or where it is ``auto`` the tokens of a micro-batch on ``device``
    with ``world_size`` devices: on a GPU its share of the step as it fits the GPU's memory
    (``fitting_micro_batch``), elsewhere the paper's 3,125 (less where the share is less)."""
    if cfg.max_tokens != AUTO:
        return cfg.max_tokens
    share = -(-cfg.tokens_per_step // world_size)
    if device.type != "cuda":
        return min(PAPER_MICRO_BATCH, share)
    memory = torch.cuda.get_device_properties(device).total_memory
    return fitting_micro_batch(model_cfg, share, memory)


def resolved(
    cfg: TrainSettings, model_cfg: ModelConfig, device: torch.device, world_size: int
) -> TrainSettings:
    """``cfg`` with ``max_tokens`` a number (``micro_batch_tokens``): what the run records."""
    return dataclasses.replace(
        cfg, max_tokens=micro_batch_tokens(cfg, model_cfg, device, world_size)
    )


def recorded(
    cfg: TrainSettings, payload: dict | None, model_cfg: ModelConfig, device: torch.device
) -> TrainSettings:
    """``cfg`` (``max_tokens`` resolved from ``auto``) with the micro-batch the run resumed
    from (``payload``, its newest checkpoint) recorded, where that fits ``device``; a run
    whose micro-batch does not fit is a UserError saying so."""
    stored = ((payload or {}).get("train_config") or {}).get("max_tokens")
    if not isinstance(stored, int) or stored == cfg.max_tokens:
        return cfg
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory
        if step_memory(model_cfg, stored) > MEMORY_SHARE * memory:
            raise UserError(
                f"cannot resume: the run's micro-batches hold {stored:,} tokens (max_tokens auto "
                f"when it began), which do not fit this GPU's {memory / 2**30:.0f} GiB; resume "
                f"it on the devices it began on, or give --max-tokens {stored} where it fits"
            )
    return dataclasses.replace(cfg, max_tokens=stored)


def check_step_size(cfg: TrainSettings, train_set: ParallelDataset, world_size: int) -> None:
    """A step accumulates micro-batches only up to the training set's target tokens (with
    EOS): past them it would hold the corpus more than once per update (at 10^12 tokens, 10^9
    micro-batches, its memory growing). One micro-batch a step (a small corpus) is fine."""
    tokens = int(train_set.tgt_lens.sum()) + len(train_set.tgt_lens)
    if cfg.tokens_per_step > tokens and cfg.accumulation(world_size) > 1:
        raise UserError(
            f"--tokens-per-step {cfg.tokens_per_step:,} is more than the training set's "
            f"{tokens:,} target tokens: a step of {cfg.accumulation(world_size):,} "
            "micro-batches would hold the whole corpus more than once"
        )


def cut(sampler: TokenBucketSampler, fixed_shapes: bool, per_step: int) -> dict[str, int]:
    """The micro-batches a run's ranks cut: whether their shapes are fixed, their token budget,
    the number an epoch holds (all ranks together), and how many make an optimizer step."""
    return {
        "fixed_shapes": fixed_shapes,
        "micro_batch_tokens": sampler.batch_tokens,
        "epoch_batches": sampler.epoch_batches(),
        "micro_batches_per_step": per_step,
    }


def planned_cut(
    cfg: TrainSettings, train_set: ParallelDataset, world_size: int, fixed_shapes: bool
) -> dict[str, int]:
    """``cut`` of the micro-batches ``world_size`` ranks would cut from ``train_set`` under
    ``cfg`` (``max_tokens`` a number), before any rank builds its sampler: the epoch's batches
    are the same on every rank."""
    sampler = TokenBucketSampler(
        train_set.src_lens,
        train_set.tgt_lens,
        cfg.max_tokens,
        seed=cfg.seed,
        world_size=world_size,
        batch_tokens=cfg.batch_tokens(world_size),
    )
    return cut(sampler, fixed_shapes, world_size * cfg.accumulation(world_size))
