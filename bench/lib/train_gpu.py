"""The GPU section of ``bench.bench_train``: our Trainer's throughput and MFU on a CUDA GPU
for one variant (model shape, compile, batch shapes, cuDNN's attention, compute weights), a
profile of its steps, and the Hugging Face peer on the same batches."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.lib.profiles import host_summary, kernel_summary, python_host_time
from bench.lib.train_runners import (
    Ours,
    Steps,
    peer_throughput,
    synthetic_corpus,
    timed,
    train_settings,
)
from transformer_core.data.token_counts import TokenCounts
from transformer_core.model.config import model_config
from transformer_core.training.flops import device_spec, training_flops
from transformer_core.training.session import device_name

DENSE_KINDS = ("matrix product", "attention")  # profiles.KERNEL_KINDS: the FLOPs' kernels


@dataclass(frozen=True)
class GpuVariant:
    """One variant of the GPU section: the model shape (base or big) and the training path."""

    shape: str
    compile: str = "off"
    batch_shapes: str = "auto"
    cudnn_attention: bool = False
    compute_weights: str = "fp32"


@dataclass(frozen=True)
class GpuRun:
    """What every variant of a GPU section runs: its steps, the synthetic corpus's sentence
    lengths, and the steps profiled after the timed ones (0: none)."""

    steps: Steps
    lengths: tuple[int, int] = (3, 80)
    profile_steps: int = 0


def gpu_task(shape: str, workdir: Path, lengths: tuple) -> tuple:
    """The GPU section's model configuration and synthetic corpus for ``shape``."""
    cfg = model_config("big" if shape == "big" else "base", vocab_size=37000)
    prefix = workdir / f"gpu_{shape}_{lengths[0]}_{lengths[1]}"
    return cfg, synthetic_corpus(prefix, cfg.vocab_size, 60000, lengths=lengths)


def gpu_throughput(variant: GpuVariant, run: GpuRun, workdir: Path) -> dict:
    """Our trainer on the GPU: bf16 autocast (or, compute weights bf16, a bf16 copy of the
    weights), the run's steps after its warm-up (compilation happens there), then its profiled
    steps under the profiler (``gpu_profile``)."""
    from transformer_core.device import choose_attention_backends

    cfg, dataset = gpu_task(variant.shape, workdir, run.lengths)
    device, steps = torch.device("cuda", 0), run.steps
    ours = Ours(cfg, dataset, device, train_settings(
        "bf16", steps.max_tokens, steps.tokens_per_step, variant.compile, variant.batch_shapes,
        variant.compute_weights,
    ))  # fmt: skip
    torch.cuda.reset_peak_memory_stats(device)  # after CUDA's first use: it fails before it
    choose_attention_backends(device, cudnn=variant.cudnn_attention)
    try:
        warm_start = time.perf_counter()
        timed(ours, steps.warmup, device)
        warm_seconds = time.perf_counter() - warm_start
        counts_before = TokenCounts(**vars(ours.trainer.counts))
        tokens, seconds = timed(ours, steps.timed, device)
        counts = TokenCounts(
            **{k: v - getattr(counts_before, k) for k, v in vars(ours.trainer.counts).items()}
        )
        profile = gpu_profile(ours, run.profile_steps, device) if run.profile_steps else None
    finally:
        choose_attention_backends(device)
        ours.trainer.close()
    flops_per_s = training_flops(cfg, counts) / seconds
    spec = device_spec(device_name(device))
    peak = spec.bf16_tflops * 1e12 if spec and spec.bf16_tflops else None
    if profile and peak:
        # The MFU of a step whose every other kernel took no time: the bound that fusing and
        # overlapping the memory-bound work can approach, short of faster products.
        dense = sum(profile["by_kind"].get(k, {}).get("ms_per_step", 0.0) for k in DENSE_KINDS)
        flops_per_step = flops_per_s * seconds / steps.timed
        profile["mfu_if_only_products_and_attention"] = (
            round(flops_per_step / (dense / 1000) / peak, 4) if dense else None
        )
    return {
        **path_row(ours, variant, run),
        "warmup_seconds": round(warm_seconds, 1),
        "steps": steps.timed,
        "tgt_tokens_per_step": tokens / steps.timed,
        "step_ms": round(1000 * seconds / steps.timed, 2),
        "tgt_tokens_per_s": round(tokens / seconds, 1),
        "model_tflops_per_s": round(flops_per_s / 1e12, 2),
        "mfu": round(flops_per_s / peak, 4) if peak else None,
        "peak_bf16_tflops": spec.bf16_tflops if spec else None,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
        "profile": profile,
    }


def path_row(ours: Ours, variant: GpuVariant, run: GpuRun) -> dict:
    """What a GPU row says of the variant before its speed: the model, the machine and the
    path the Trainer took."""
    device = ours.trainer.ctx.device
    return {
        "shape": variant.shape,
        "params": ours.params,
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "precision": "bf16 weights" if ours.trainer.master else "bf16 autocast",
        "compile": variant.compile,
        "compiled": ours.trainer.compiled,
        "path_why": ours.trainer.path.why,
        "batch_shapes": variant.batch_shapes,
        "fixed_shapes": ours.trainer.fixed_shapes,
        "cuda_graphs": ours.trainer.cuda_graphs,
        "cudnn_attention": variant.cudnn_attention,
        "sentence_lengths": list(run.lengths),
        "max_tokens": run.steps.max_tokens,
        "accumulation": ours.trainer.accumulation,
        "warmup_steps": run.steps.warmup,
    }


def gpu_profile(ours: Ours, steps: int, device: torch.device) -> dict:
    """``steps`` training steps under torch.profiler: the share of their wall time in which no
    kernel ran on the GPU, and the 10 kernels that took the most GPU time
    (``profiles.kernel_summary``). Then ``steps`` more with Python's calls traced (which
    slows the host, so apart): the host's time per step by operator and by Python function."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        timed(ours, steps, device)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as traced:
        timed(ours, steps, device)
    return {
        **kernel_summary(prof.events(), steps),
        "host_traced": {
            **host_summary(traced),
            "python_functions": python_host_time(traced.events(), steps),
        },
    }


def gpu_peers(shapes, variants, run: GpuRun, workdir: Path, rows: list[dict]) -> list[dict]:
    """bench_train's GPU peers: per shape, each of ``variants`` ("eager", "compiled") on the
    batches our Trainer cuts; each of our ``rows`` gains its speed over the shape's faster peer."""
    peers, own = [], workdir / "peer"  # a corpus of its own: ours may still map its files
    own.mkdir(exist_ok=True)
    for shape in shapes:
        cfg, dataset = gpu_task(shape, own, run.lengths)
        for variant in variants:
            row = peer_throughput(
                cfg, dataset, torch.device("cuda", 0), run.steps, compile=variant == "compiled"
            )
            peers.append({"shape": shape, **row})
            print(f"gpu peer: {json.dumps(peers[-1])}", file=sys.stderr, flush=True)
        fastest = max((p["tgt_tokens_per_s"] for p in peers if p["shape"] == shape), default=None)
        for row in rows:
            if fastest and row["shape"] == shape:
                row["over_faster_peer"] = round(row["tgt_tokens_per_s"] / fastest, 3)
    return peers
