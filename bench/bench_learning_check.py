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

``seed_band_check`` is the criterion, a pure function (``bench.lib.learning_check``;
tests/unit/test_learning_check.py).
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
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from bench.lib.hardware import code_fingerprint, description, result_path, write_result
from bench.lib.learning_check import seed_band_check
from bench.lib.reversal import (
    LEARNING_VOCABULARY,
    reversal_config,
    reversal_corpus,
    task_name,
    train_curve,
)
from transformer_core.device import autocast_dtype, choose_attention_backends, cpu_has_native_bf16
from transformer_core.errors import UserError
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext

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

# What a reused reference (``--reference-from``) must share with this run, beside the code.
SHARED = ("device", "shape", "task", "tokens_per_step", "steps", "log_interval", "dropout",
          "lr_scale", "warmup", "reference", "torch")  # fmt: skip
BENCH_MODULES = (
    "bench_learning_check.py", "lib/learning_check.py", "lib/reversal.py", "lib/shapes.py"
)  # fmt: skip


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


def path_settings(args: argparse.Namespace, base_train: TrainSettings) -> dict[str, tuple]:
    """Every path run, by name: its model change and its training settings; the reference and
    the candidates of ``--candidates``, the reference under bf16 autocast where the device
    computes bf16 natively and the reference is fp32, and the broken candidates."""
    runs: dict[str, tuple[dict, TrainSettings]] = {}
    for name in ["reference", *args.candidates]:
        shapes, compiled, weights = PATHS[name]
        runs[name] = ({}, replace(base_train, batch_shapes=shapes, compile=compiled,
                                  compute_weights=weights))  # fmt: skip
    native_bf16 = args.device == "cuda" or cpu_has_native_bf16()
    if base_train.precision == "fp32" and native_bf16:  # what `auto` trains with on this CPU
        runs["reference_bf16_autocast"] = ({}, replace(runs["reference"][1], precision="bf16"))
    for name in args.broken:
        changed = dict(BROKEN[name])
        train_cfg = runs["reference"][1]
        lr_scale = train_cfg.lr_scale * changed.pop("lr_factor", 1.0)
        runs[f"broken_{name}"] = (changed, replace(train_cfg, lr_scale=lr_scale))
    return runs


def header(args: argparse.Namespace, precision: str) -> dict:
    """The result before any run: the settings a reused reference must share, and the code."""
    return {
        "bench": "learning_check", "torch": torch.__version__, "device": args.device,
        "shape": args.shape, "task": task_name(args.tokens, tuple(args.lengths)),
        "tokens_per_step": args.tokens,
        "steps": args.steps, "log_interval": args.interval, "seeds": args.seeds,
        "dropout": args.dropout, "lr_scale": args.lr_scale, "warmup": args.warmup,
        "reference": f"eager, exact shapes, {precision}",
        "code": code_fingerprint(*BENCH_MODULES), "paths": {}, "checks": {},
    }  # fmt: skip


@dataclass
class Check:
    """A learning check under way: its options, the task's corpus, the device's context, and
    the result, written to ``out`` after every seed."""

    args: argparse.Namespace
    dataset: object
    ctx: DistContext
    result: dict
    out: Path | str

    def run_path(self, name: str, change: dict, train_cfg: TrainSettings) -> None:
        """Train path ``name`` (``change``: its model's) with every seed, then judge it
        against the reference."""
        args, result = self.args, self.result
        cfg = reversal_config(args.shape, args.dropout, **change)
        record = result["paths"][name] = {
            "batch_shapes": train_cfg.batch_shapes, "compile": train_cfg.compile,
            "precision": train_cfg.precision, "compute_weights": train_cfg.compute_weights,
            "lr_scale": train_cfg.lr_scale, "label_smoothing": cfg.label_smoothing,
            "curves": [], "seed_times": [], "seconds": 0.0,
        }  # fmt: skip
        for seed in args.seeds:
            curve, times = train_curve(
                cfg, train_cfg, self.dataset, self.ctx, seed, args.steps, args.interval
            )
            record["curves"].append(curve)
            record["seed_times"].append({"seed": seed, **times})
            record["seconds"] = round(record["seconds"] + times["seconds"], 1)
            print(name, seed, curve[-3:], times, flush=True)
            # After each seed: a run stopped at a deadline keeps every seed it finished.
            write_result(self.out, result)
        if name != "reference":
            reference = result["paths"]["reference"]["curves"]
            result["checks"][name] = seed_band_check(reference, record["curves"])
            print(name, json.dumps(result["checks"][name]), flush=True)
            write_result(self.out, result)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
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
    runs = path_settings(args, base_train)
    result = header(args, precision)
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
        check = Check(args, dataset, ctx, result, out)
        for name, (model_change, train_cfg) in runs.items():
            if name not in result["paths"]:  # not the reused reference
                check.run_path(name, model_change, train_cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
