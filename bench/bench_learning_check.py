"""A learning check that can fail: does a training path learn as the reference does, judged
against the reference's own spread over seeds?

A curve within 1% of another at every log interval holds for no two implementations of the
reversal task, even fp32 against fp32 without dropout (docs/gpu.md): rounding alone moves its
loss spikes. So the reference (eager, exact shapes; fp32 on a CPU, bf16 autocast on a GPU) is
trained with several seeds, each candidate path with the same seeds. A seed changes the initial
weights and the dropout masks; the batches stay the same (the sampler keeps seed 1). With NLL
per target token logged every ``interval`` steps, a candidate passes where

1. the mean over its seeds of the NLL of the run's last quarter lies within the reference
   seeds' range of that value, widened on each side by their standard deviation, and
2. its mean curve (over seeds) never leaves the reference's band (the seeds' minimum and
   maximum at each interval) by more than the band's own width there.

``seed_band_check`` is the criterion, a pure function (tests/unit/test_learning_check.py).
The broken candidates, label smoothing off and the learning rate doubled, show that it fails.

    python -m bench.bench_learning_check [--steps 1000] [--seeds 1 2 3 4 5] \
        [--candidates fixed compiled] [--device cuda --shape base --tokens 25000 --lengths 24 31]

Writes bench/results/HARDWARE/learning_check.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from bench.bench_shapes import LEARNING_VOCABULARY, nll_curve, reversal_corpus
from bench.bench_train import SHAPES
from bench.hardware import result_path, write_result
from transformer_core.device import autocast_dtype, choose_attention_backends, cpu_has_native_bf16
from transformer_core.errors import UserError
from transformer_core.model.config import model_config
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.random_state import seed_everything
from transformer_core.training.step import Trainer

# Paths a candidate may name: (batch shapes, compile, compute weights); the precision is the
# device's (``--precision``).
PATHS = {
    "reference": ("exact", "off", "fp32"),
    "fixed": ("fixed", "off", "fp32"),
    "compiled": ("fixed", "on", "fp32"),
    "compiled_bf16_weights": ("fixed", "on", "bf16"),
    "bf16_weights": ("exact", "off", "bf16"),
}
# Broken on purpose: the reference path with a recipe change the check must catch: a model
# setting, or ``lr_factor`` times the reference's learning rate.
BROKEN = {"no_label_smoothing": {"label_smoothing": 0.0}, "lr_doubled": {"lr_factor": 2.0}}


def last_quarter(curve: list[float]) -> float:
    """The mean of a curve's last quarter of intervals (at least one)."""
    tail = curve[-max(1, len(curve) // 4) :]
    return sum(tail) / len(tail)


def seed_band_check(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """Whether ``candidate``'s curves (one per seed, each the NLL per log interval) learn as
    ``reference``'s do (at least 2 seeds), by the two rules of the module's docstring; the
    numbers each rule compared, and where the mean curve strayed most."""
    if len(reference) < 2:
        raise ValueError("the reference needs at least 2 seeds for a spread")
    intervals = len(reference[0])
    if any(len(curve) != intervals for curve in [*reference, *candidate]):
        raise ValueError("every curve must have the same intervals")
    finals = [last_quarter(curve) for curve in reference]
    spread = statistics.stdev(finals)
    low, high = min(finals) - spread, max(finals) + spread
    final = statistics.fmean(last_quarter(curve) for curve in candidate)
    worst = {"excess_over_width": 0.0, "interval": None}
    for i in range(intervals):
        values = [curve[i] for curve in reference]
        lo, hi = min(values), max(values)
        mean = statistics.fmean(curve[i] for curve in candidate)
        outside = max(lo - mean, mean - hi, 0.0)
        excess = outside / (hi - lo) if hi > lo else (float("inf") if outside else 0.0)
        if excess > worst["excess_over_width"]:
            worst = {"excess_over_width": round(excess, 3), "interval": i + 1}
    final_ok = low <= final <= high
    band_ok = worst["excess_over_width"] <= 1.0
    return {
        "passes": final_ok and band_ok,
        "last_quarter": round(final, 4),
        "reference_last_quarter": [round(v, 4) for v in finals],
        "allowed_last_quarter": [round(low, 4), round(high, 4)],
        "last_quarter_within": final_ok,
        "curve_within_band": band_ok,
        "largest_excursion": worst,
    }


def train_curve(
    cfg, train_cfg: TrainSettings, dataset, ctx: DistContext, seed: int, steps: int, interval: int
) -> list[float]:
    """The NLL per target token every ``interval`` steps of one run: the batches of the
    sampler's seed (``train_cfg.seed``), the initial weights and dropout masks of ``seed``."""
    trainer = Trainer(cfg, train_cfg, ctx, dataset)
    try:
        seed_everything(seed)
        trainer.model.reset_parameters()
        if trainer.master:
            trainer.master.refresh()
        seed_everything(seed + 1_000_003)  # the masks: another stream than the weights'
        return nll_curve(trainer, steps, interval)
    finally:
        trainer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps a run (default: 1000)")
    parser.add_argument("--interval", type=int, default=50, help="log interval (default: 50)")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[1, 2, 3, 4, 5],
        help="the seeds of every path (default: 1-5; with 3 the band is too narrow to pass paths "
        "that differ only in their dropout masks: bench.learning_check_seeds)",
    )
    parser.add_argument(
        "--candidates",
        nargs="*",
        default=[],
        choices=[name for name in PATHS if name != "reference"],
        help="paths checked beside the reference (always: the reference with --precision "
        "auto where that differs, and the broken candidates)",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--shape", default="tiny", choices=["tiny", "base"])
    parser.add_argument("--tokens", type=int, default=1000, help="tokens a step (default: 1000)")
    parser.add_argument("--lengths", type=int, nargs=2, default=[2, 60], metavar=("LOW", "HIGH"))
    parser.add_argument("--dropout", type=float, default=0.1, help="P_drop (default: 0.1)")
    parser.add_argument(
        "--lr-scale", type=float, default=0.3, help="every path's lrate factor (default: 0.3)"
    )
    parser.add_argument("--warmup", type=int, default=100, help="warmup_steps (default: 100)")
    parser.add_argument(
        "--precision",
        default=None,
        choices=["fp32", "bf16"],
        help="the reference's precision (default: fp32 on a CPU, bf16 autocast on a GPU)",
    )
    parser.add_argument(
        "--broken",
        nargs="*",
        default=list(BROKEN),
        choices=list(BROKEN),
        help="the broken candidates run (default: all)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    device = torch.device(args.device)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    sizes = {} if args.shape == "base" else SHAPES[args.shape]
    ctx = DistContext(0, 0, 1, device, owns_group=False)
    choose_attention_backends(device)
    try:
        base_train = TrainSettings(
            max_tokens=args.tokens, tokens_per_step=args.tokens, warmup=args.warmup,
            lr_scale=args.lr_scale, precision=precision, device=args.device, seed=1,
        )  # fmt: skip
        autocast_dtype(device, precision)  # bf16 where the device cannot: before any run
    except UserError as error:  # a bad --tokens, --warmup, --lr-scale or --precision: named
        parser.error(str(error))
    runs: dict[str, tuple[dict, TrainSettings]] = {}
    for name in ["reference", *args.candidates]:
        shapes, compiled, weights = PATHS[name]
        runs[name] = ({}, replace(base_train, batch_shapes=shapes, compile=compiled,
                                  compute_weights=weights))  # fmt: skip
    native_bf16 = device.type == "cuda" or cpu_has_native_bf16()
    if precision == "fp32" and native_bf16:  # what `auto` trains with on this CPU
        runs["reference_bf16_autocast"] = ({}, replace(runs["reference"][1], precision="bf16"))
    for name in args.broken:
        changed = dict(BROKEN[name])
        train_cfg = runs["reference"][1]
        lr_scale = train_cfg.lr_scale * changed.pop("lr_factor", 1.0)
        runs[f"broken_{name}"] = (changed, replace(train_cfg, lr_scale=lr_scale))

    result: dict = {
        "bench": "learning_check", "torch": torch.__version__, "device": args.device,
        "shape": args.shape, "task": f"reversal, {20 * args.tokens:,} pairs of "
        f"{args.lengths[0]}-{args.lengths[1]} tokens", "tokens_per_step": args.tokens,
        "steps": args.steps, "log_interval": args.interval, "seeds": args.seeds,
        "dropout": args.dropout, "lr_scale": args.lr_scale, "warmup": args.warmup,
        "reference": f"eager, exact shapes, {precision}",
        "paths": {}, "checks": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        dataset = reversal_corpus(
            Path(tmp) / "reversal", LEARNING_VOCABULARY, 20 * args.tokens, tuple(args.lengths)
        )
        for name, (model_change, train_cfg) in runs.items():
            cfg = model_config(
                "base", **{**sizes, "vocab_size": LEARNING_VOCABULARY, "dropout": args.dropout},
                **model_change,
            )  # fmt: skip
            start, curves = time.perf_counter(), []
            for seed in args.seeds:
                curves.append(
                    train_curve(cfg, train_cfg, dataset, ctx, seed, args.steps, args.interval)
                )
                print(name, seed, curves[-1][-3:], flush=True)
            result["paths"][name] = {
                "batch_shapes": train_cfg.batch_shapes, "compile": train_cfg.compile,
                "precision": train_cfg.precision, "compute_weights": train_cfg.compute_weights,
                "lr_scale": train_cfg.lr_scale, "label_smoothing": cfg.label_smoothing,
                "curves": curves, "seconds": round(time.perf_counter() - start, 1),
            }  # fmt: skip
            if name != "reference":
                reference = result["paths"]["reference"]["curves"]
                result["checks"][name] = seed_band_check(reference, curves)
                print(name, json.dumps(result["checks"][name]), flush=True)
            # After each path: a run stopped at a deadline keeps the paths it finished.
            write_result(args.out or result_path("learning_check", args.device), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
