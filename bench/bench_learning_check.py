"""A learning check that can fail: does a training path learn as the reference does, judged
against the reference's own noise over seeds?

A curve within 1% of another at every log interval holds for no two implementations of the
reversal task, even fp32 against fp32 without dropout (docs/gpu.md): rounding alone moves its
loss spikes. So the reference (eager, exact shapes; fp32 on a CPU, bf16 autocast on a GPU) is
trained with several seeds, each candidate path with the same seeds. A seed changes the initial
weights and the dropout masks; the batches stay the same (the sampler keeps seed 1). With NLL
per target token logged every ``interval`` steps, a candidate passes where

1. the mean over its seeds of the NLL of the run's last quarter lies within the reference
   seeds' range of that value, widened on each side by their standard deviation, and
2'. its mean curve stays within the reference's noise at every interval: with sigma_i the
   reference seeds' standard deviation at interval i, floored by their root mean square over
   all intervals, z_i = (candidate mean - reference mean) / (sigma_i sqrt(1/n_ref + 1/n_cand))
   never exceeds Phi^-1(1 - 0.05 / (2K)) in size (K intervals: 2.87 for 12, 3.02 for 20).

The check is void, neither pass nor fail, unless the reference learns: its mean first-interval
NLL must lie above its mean last-quarter NLL by at least 5 standard deviations of the seeds'
last-quarter NLL. Rule 2' replaced rule 2 (the mean curve within the seeds' min-max band, or
outside it by at most its width), whose unit shrinks to nothing where the seeds happen to
agree (docs/gpu.md, "The learning check"); that band's excursion is still reported.

``seed_band_check`` is the criterion, a pure function (tests/unit/test_learning_check.py).
The broken candidates, label smoothing off and the learning rate doubled, show that it fails.

    python -m bench.bench_learning_check [--steps 1000] [--seeds 1 2 3 4 5] \
        [--candidates fixed compiled] [--device cuda --shape base --tokens 25000 --lengths 24 31]
        [--broken [NAME ...]] [--reference-from EARLIER.json]

Writes bench/results/HARDWARE/learning_check.json (or --out) after every seed, each seed's
times beside its curve: the whole run, its warm-up (the first steps, compilation included) and
its mean step after that.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from bench.bench_shapes import LEARNING_VOCABULARY, nll_curve, reversal_corpus
from bench.bench_train import SHAPES
from bench.hardware import code_fingerprint, description, result_path, write_result
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


# Rule 2': the candidate's mean curve, at each interval, differs from the reference's mean by
# at most LIMIT standard errors, the noise unit floored by the reference's RMS spread.
FAMILY_ALPHA = 0.05  # the chance that a path learning as the reference does fails rule 2'
GATE_WIDTHS = 5.0  # the reference's fall, in its last-quarter sds, below which a check is void


def last_quarter(curve: list[float]) -> float:
    """The mean of a curve's last quarter of intervals (at least one)."""
    tail = curve[-max(1, len(curve) // 4) :]
    return sum(tail) / len(tail)


def z_limit(intervals: int, alpha: float = FAMILY_ALPHA) -> float:
    """The two-sided normal quantile Phi^-1(1 - alpha / (2K)) for K intervals (Bonferroni):
    2.87 for 12 intervals, 3.02 for 20."""
    return statistics.NormalDist().inv_cdf(1 - alpha / (2 * intervals))


def noise_check(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """Rule 2': the largest |z| over intervals of the candidate's mean curve against the
    reference's, z_i = (m_cand,i - m_ref,i) / (sigma_i sqrt(1/n_ref + 1/n_cand)), sigma_i the
    reference seeds' sd at i floored by their RMS sd over all intervals; within ``z_limit``."""
    intervals, n_ref, n_cand = len(reference[0]), len(reference), len(candidate)
    sds = [statistics.stdev(curve[i] for curve in reference) for i in range(intervals)]
    floor = math.sqrt(sum(sd * sd for sd in sds) / intervals)
    worst = {"z": 0.0, "interval": None}
    for i, sd in enumerate(sds):
        unit = max(sd, floor) * math.sqrt(1 / n_ref + 1 / n_cand)
        gap = statistics.fmean(c[i] for c in candidate) - statistics.fmean(c[i] for c in reference)
        z = gap / unit if unit > 0 else (math.inf if gap else 0.0)
        if abs(z) > abs(worst["z"]):
            worst = {"z": round(z, 3), "interval": i + 1}
    limit = z_limit(intervals)
    return {"within": abs(worst["z"]) <= limit, "largest_z": worst, "z_limit": round(limit, 3),
            "noise_floor": round(floor, 5)}  # fmt: skip


def band_excursion(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """The former rule 2, reported beside rule 2': how far the candidate's mean curve leaves
    the reference seeds' band (minimum to maximum), in band widths, at its worst interval."""
    worst = {"excess_over_width": 0.0, "interval": None}
    for i in range(len(reference[0])):
        values = [curve[i] for curve in reference]
        lo, hi = min(values), max(values)
        mean = statistics.fmean(curve[i] for curve in candidate)
        outside = max(lo - mean, mean - hi, 0.0)
        excess = outside / (hi - lo) if hi > lo else (math.inf if outside else 0.0)
        if excess > worst["excess_over_width"]:
            worst = {"excess_over_width": round(excess, 3), "interval": i + 1}
    return worst


def validity(reference: list[list[float]]) -> dict:
    """The gate: the check is void unless the reference learns far beyond its own noise, its
    mean first-interval NLL above its mean last-quarter NLL by at least ``GATE_WIDTHS`` sds of
    the seeds' last-quarter NLL (a reference seed that collapses widens that sd)."""
    finals = [last_quarter(curve) for curve in reference]
    fall = statistics.fmean(curve[0] for curve in reference) - statistics.fmean(finals)
    spread = statistics.stdev(finals)
    widths = fall / spread if spread > 0 else (math.inf if fall > 0 else 0.0)
    return {"valid": widths >= GATE_WIDTHS, "fall_in_sds": round(widths, 2)}


def seed_band_check(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """Whether ``candidate``'s curves (one per seed, each the NLL per log interval) learn as
    ``reference``'s do (at least 2 seeds), by rules 1 and 2' of the module's docstring, where
    the gate finds the check valid: ``passes`` True or False, None where void; the numbers each
    rule compared, and the former rule 2's band excursion beside them."""
    if len(reference) < 2:
        raise ValueError("the reference needs at least 2 seeds for a spread")
    if not candidate:
        raise ValueError("the candidate needs at least 1 seed")
    intervals = len(reference[0])
    if any(len(curve) != intervals for curve in [*reference, *candidate]):
        raise ValueError("every curve must have the same intervals")
    finals = [last_quarter(curve) for curve in reference]
    spread = statistics.stdev(finals)
    low, high = min(finals) - spread, max(finals) + spread
    final = statistics.fmean(last_quarter(curve) for curve in candidate)
    final_ok = low <= final <= high
    noise, gate = noise_check(reference, candidate), validity(reference)
    excursion = band_excursion(reference, candidate)
    return {
        "passes": (final_ok and noise["within"]) if gate["valid"] else None,
        "valid": gate["valid"],
        "reference_fall_in_sds": gate["fall_in_sds"],
        "last_quarter": round(final, 4),
        "reference_last_quarter": [round(v, 4) for v in finals],
        "allowed_last_quarter": [round(low, 4), round(high, 4)],
        "last_quarter_within": final_ok,
        "curve_within_noise": noise["within"],
        "largest_z": noise["largest_z"],
        "z_limit": noise["z_limit"],
        "noise_floor": noise["noise_floor"],
        "curve_within_band": excursion["excess_over_width"] <= 1.0,
        "largest_excursion": excursion,
    }


# The first steps of a run, timed apart: its warm-up, compilation included.
WARMUP_STEPS = 5
# What a reused reference (``--reference-from``) must share with this run, beside the code.
SHARED = ("device", "shape", "task", "tokens_per_step", "steps", "log_interval", "dropout",
          "lr_scale", "warmup", "reference", "torch")  # fmt: skip
BENCH_MODULES = ("bench_learning_check.py", "bench_shapes.py", "bench_train.py")


def train_curve(
    cfg, train_cfg: TrainSettings, dataset, ctx: DistContext, seed: int, steps: int, interval: int
) -> tuple[list[float], dict]:
    """The NLL per target token every ``interval`` steps of one run (the batches of the
    sampler's seed, ``train_cfg.seed``; the initial weights and dropout masks of ``seed``), and
    its times: the whole run, its first ``WARMUP_STEPS`` steps and the mean step after them."""
    start = time.perf_counter()
    trainer = Trainer(cfg, train_cfg, ctx, dataset)
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--steps", type=int, default=1000, help="steps a run (default: 1000)")
    parser.add_argument("--interval", type=int, default=50, help="log interval (default: 50)")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[1, 2, 3, 4, 5],
        help="the seeds of every path, distinct, at least 2 (default: 1-5, which rule 2' was "
        "fixed at: bench.learning_check_seeds)",
    )
    parser.add_argument(
        "--candidates",
        nargs="*",
        default=[],
        choices=[name for name in PATHS if name != "reference"],
        help="paths checked beside the reference (always: the reference with bf16 autocast "
        "where this CPU computes bf16 natively and the reference is fp32)",
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
        help="the broken candidates run (default: all; --broken alone: none)",
    )
    parser.add_argument(
        "--reference-from",
        type=Path,
        metavar="FILE",
        help="take the reference's curves from this earlier check instead of training them: "
        "refused unless it ran the same settings, seeds and code (the package and these "
        "benches, by their sha256)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.steps < 1 or not 1 <= args.interval <= args.steps:
        parser.error(
            f"--steps {args.steps} --interval {args.interval}: need 1 <= interval <= steps"
        )
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if len(set(args.seeds)) != len(args.seeds) or len(args.seeds) < 2 or min(args.seeds) < 0:
        parser.error(f"--seeds {args.seeds}: give at least 2 distinct seeds, none negative")
    if args.lengths[0] < 1 or args.lengths[0] > args.lengths[1]:
        parser.error(f"--lengths {args.lengths}: need 1 <= LOW <= HIGH")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    return args


def usage_error(message: str) -> None:
    """Stop as argparse does on a bad option: the message on stderr, exit status 2."""
    print(f"bench_learning_check: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def reused_reference(path: Path, result: dict, seeds: list[int]) -> dict:
    """The reference path of an earlier check at ``path`` for ``seeds``, where it ran the
    settings and code of ``result``; a UserError naming what differs otherwise."""
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
        path_record = earlier["paths"]["reference"]
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"--reference-from {path}: not a learning check ({error!r})") from None
    differ = [key for key in (*SHARED, "code") if earlier.get(key) != result.get(key)]
    if differ:
        key = differ[0]
        raise UserError(
            f"--reference-from {path}: its {key} is {earlier.get(key)!r}, this run's "
            f"{result.get(key)!r} (the reference is reused only where nothing differs)"
        )
    by_seed = dict(zip(earlier["seeds"], path_record["curves"], strict=False))
    missing = [seed for seed in seeds if seed not in by_seed]
    if missing:
        raise UserError(f"--reference-from {path}: it ran no seed {missing[0]}")
    times = dict(zip(earlier["seeds"], path_record.get("seed_times", []), strict=False))
    return {
        **path_record,
        "curves": [by_seed[seed] for seed in seeds],
        "seed_times": [times.get(seed) for seed in seeds],
        "reused_from": str(path),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
        usage_error(str(error))
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
        "code": code_fingerprint(*BENCH_MODULES), "paths": {}, "checks": {},
    }  # fmt: skip
    out = args.out or result_path("learning_check", args.device)
    if args.reference_from:
        try:
            result["paths"]["reference"] = reused_reference(args.reference_from, result, args.seeds)
        except UserError as error:
            usage_error(str(error))
    with tempfile.TemporaryDirectory() as tmp:
        dataset = reversal_corpus(
            Path(tmp) / "reversal", LEARNING_VOCABULARY, 20 * args.tokens, tuple(args.lengths)
        )
        for name, (model_change, train_cfg) in runs.items():
            if name in result["paths"]:  # the reused reference
                continue
            cfg = model_config(
                "base", **{**sizes, "vocab_size": LEARNING_VOCABULARY, "dropout": args.dropout},
                **model_change,
            )  # fmt: skip
            record = result["paths"][name] = {
                "batch_shapes": train_cfg.batch_shapes, "compile": train_cfg.compile,
                "precision": train_cfg.precision, "compute_weights": train_cfg.compute_weights,
                "lr_scale": train_cfg.lr_scale, "label_smoothing": cfg.label_smoothing,
                "curves": [], "seed_times": [], "seconds": 0.0,
            }  # fmt: skip
            for seed in args.seeds:
                curve, times = train_curve(
                    cfg, train_cfg, dataset, ctx, seed, args.steps, args.interval
                )
                record["curves"].append(curve)
                record["seed_times"].append({"seed": seed, **times})
                record["seconds"] = round(record["seconds"] + times["seconds"], 1)
                print(name, seed, curve[-3:], times, flush=True)
                # After each seed: a run stopped at a deadline keeps every seed it finished.
                write_result(out, result)
            if name != "reference":
                reference = result["paths"]["reference"]["curves"]
                result["checks"][name] = seed_band_check(reference, record["curves"])
                print(name, json.dumps(result["checks"][name]), flush=True)
                write_result(out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
