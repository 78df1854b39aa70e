"""Fixed micro-batch shapes against exact ones: padding and distinct shapes over 1,000 steps,
and what a compiled step's warm-up costs, first and from the inductor cache.

Shapes (any machine: it counts): a WMT-sized synthetic corpus of 4.5M pairs (source lengths
log-normal, median 22 pieces, mean 27, clipped to 1-250; targets within 0.8-1.25 of them, like WMT14
EN-DE in word pieces), 25,000 target tokens per step on one device, micro-batches of 3,125
(the config's default: 8 per step), 12,500 and 25,000 tokens. For each, the first 1,000 steps'
micro-batches in training order, collated exactly (widths a multiple of 8, as on GPUs) and to
fixed shapes (``data.shapes``): their padding share, their distinct shapes, and how many of
those the first 10 and 100 steps meet.

Warm-up (``--warmup``, 2 CPU threads): a fresh process trains the Multi30k shape, compiled,
with fixed shapes, for 5 steps of 1,000 tokens, with an empty inductor cache and then again
with the cache the first left; each reports the seconds to its first step and to its fifth.

Learning (``--learning STEPS``): the tiny shape trained on a reversal task (each target its
source reversed, a vocabulary of 100), 1,000 tokens a step on fixed shapes, the schedule at
0.3 of the paper's rate, eager and compiled, in fp32 and, where the CPU computes it natively,
in bf16 autocast and with bf16 compute weights (``train.compute_weights``): the NLL per
target token every 50 steps, side by side. On a GPU (``--learning-device cuda``,
``--learning-shape base``, ``--learning-tokens 25000``) eager bf16 autocast against compiled
bf16 autocast (CUDA graphs) and compiled with bf16 compute weights: whether compiled code on
fixed shapes, and the bf16 copy, learn as today's eager code does. ``--learning-dropout 0``
trains without dropout: no masks, so the paths differ in their arithmetic alone (the "other
masks" run is then the reference again).

    python -m bench.bench_shapes [--warmup] [--learning 600]
    python -m bench.bench_shapes --no-shapes --learning 1000 --learning-device cuda \
        --learning-shape base --learning-tokens 25000 --learning-lengths 24 31

Writes bench/results/HARDWARE/batch_shapes.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.lib.hardware import result_path, write_result
from bench.lib.reversal import ReversalRun, learning_report
from transformer_core.data.batching import TokenBucketSampler, padding_stats
from transformer_core.device import cpu_has_native_bf16

PAIRS = 4_500_000
TOKENS_PER_STEP = 25_000
STEPS = 1_000
MICRO_BATCHES = (3_125, 12_500, 25_000)


def wmt_like_lengths(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Source and target lengths in pieces, as the module's docstring describes them."""
    rng = np.random.default_rng(seed)
    src = np.clip(rng.lognormal(3.1, 0.6, n).astype(np.int64), 1, 250)
    tgt = np.clip((src * rng.uniform(0.8, 1.25, n)).astype(np.int64), 1, 250)
    return src, tgt


def first_steps(sampler: TokenBucketSampler, micro_batches: int) -> list[list[int]]:
    """The micro-batches of the first STEPS steps (epochs continue where one ends)."""
    batches, epoch = [], 0
    while len(batches) < STEPS * micro_batches:
        batches += sampler.batches(epoch)
        epoch += 1
    return batches[: STEPS * micro_batches]


def shapes_report(pairs: int) -> list[dict]:
    src, tgt = wmt_like_lengths(pairs)
    rows = []
    for max_tokens in MICRO_BATCHES:
        micro_batches = -(-TOKENS_PER_STEP // max_tokens)
        for fixed in (False, True):
            start = time.perf_counter()
            sampler = TokenBucketSampler(src, tgt, max_tokens, seed=1)
            shapes = sampler.fixed_shapes() if fixed else None
            batches = first_steps(sampler, micro_batches)
            # exact: as a GPU collates them, widths rounded up to a multiple of 8
            stats = padding_stats(batches, src, tgt, shapes, multiple=8)
            row = {
                "max_tokens": max_tokens,
                "micro_batches_per_step": micro_batches,
                "shapes": "fixed" if fixed else "exact (widths a multiple of 8)",
                "micro_batches": len(batches),
                "distinct_shapes": stats["shapes"],
                "padding_share": round(stats["padding_share"], 4),
                "tgt_tokens_per_step": round(stats["tgt_tokens"] / STEPS),  # real, with EOS
                "shapes_by_step": {  # how long a warm-up meets new shapes
                    steps: padding_stats(
                        batches[: steps * micro_batches], src, tgt, shapes, multiple=8
                    )["shapes"]
                    for steps in (10, 100, STEPS)
                },
                "seconds": round(time.perf_counter() - start, 1),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def warmup_report(precision: str) -> dict:
    """Seconds to the first compiled step and to the fifth, in a fresh process with an empty
    inductor cache and again with the cache it left."""
    code = (
        "import sys, time, tempfile, torch; from pathlib import Path; "
        "from bench.lib.shapes import SHAPES; "
        "from bench.lib.train_runners import Ours, synthetic_corpus, train_settings; "
        "from transformer_core.model.config import model_config; "
        "torch.set_num_threads(2); start = time.perf_counter(); "
        "cfg = model_config('base', **SHAPES['multi30k']); "
        "ds = synthetic_corpus(Path(tempfile.mkdtemp()) / 'c', cfg.vocab_size, sentences=2000); "
        "ours = Ours(cfg, ds, torch.device('cpu'), train_settings(sys.argv[1], 1000, 1000, 'on')); "
        "marks = []\n"
        "for _ in range(5):\n"
        "    ours.step(); marks.append(time.perf_counter() - start)\n"
        "print(round(marks[0], 1), round(marks[-1], 1))\n"
        "ours.trainer.close()"
    )
    result = {"precision": precision, "steps": 5}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        for run in ("cold", "cached"):
            out = subprocess.run(
                [sys.executable, "-c", code, precision],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            result[run] = {"first_step_s": float(out[0]), "five_steps_s": float(out[1])}
    print(json.dumps(result), flush=True)
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=PAIRS, help="corpus pairs (default: 4.5M)")
    parser.add_argument(
        "--warmup", action="store_true", help="also time a compiled step's warm-up, cold and cached"
    )
    parser.add_argument(
        "--learning",
        type=int,
        default=0,
        metavar="STEPS",
        help="also train STEPS steps on a reversal task, eager and compiled (the CPU's "
        "precisions: fp32 the reference, bf16 autocast and bf16 weights where native; CUDA's: "
        "eager bf16 autocast the reference, compiled bf16 autocast and bf16 weights), and the "
        "reference again with other dropout masks (what masks alone move the curve)",
    )
    parser.add_argument(
        "--learning-shape", default="tiny", choices=["tiny", "base"], help="(default: tiny)"
    )
    parser.add_argument("--learning-device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--learning-tokens", type=int, default=1000, help="tokens a step (default: 1000)"
    )
    parser.add_argument(
        "--learning-lengths",
        type=int,
        nargs=2,
        default=[2, 60],
        metavar=("LOW", "HIGH"),
        help="the task's sentence lengths (default: 2 60; 24 31: one batch width)",
    )
    parser.add_argument(
        "--learning-dropout",
        type=float,
        default=0.1,
        metavar="P",
        help="P_drop of the learning runs (default: 0.1, base's; 0: no masks, so the paths "
        "differ in arithmetic alone)",
    )
    parser.add_argument(
        "--no-shapes", action="store_true", help="skip the padding and shapes count"
    )
    parser.add_argument(
        "--out", default=None, help="default: bench/results/HARDWARE/batch_shapes.json"
    )
    return parser.parse_args()


def learning_variants(device: str) -> list[tuple[str, str, str]]:
    """The learning runs' paths, (kind, precision, compute weights), the reference first:
    CUDA's eager bf16 autocast, or the CPU's fp32, then the rest the device computes."""
    if device == "cuda":
        return [("eager", "bf16", "fp32"), ("reseeded", "bf16", "fp32"),
                ("compiled", "bf16", "fp32"), ("compiled", "bf16", "bf16")]  # fmt: skip
    native = [("bf16", "fp32"), ("bf16", "bf16")] if cpu_has_native_bf16() else []
    return [("eager", "fp32", "fp32"), ("reseeded", "fp32", "fp32")] + [
        (kind, *p) for kind in ("eager", "compiled") for p in [("fp32", "fp32"), *native]
    ]


def main() -> int:
    args = parse_args()
    result = {
        "bench": "batch_shapes",
        "torch": torch.__version__,
        "pairs": args.pairs,
        "tokens_per_step": TOKENS_PER_STEP,
        "steps": STEPS,
        "shapes": None if args.no_shapes else shapes_report(args.pairs),
        "warmup": None,
        "learning": None,
    }
    if args.learning:
        run = ReversalRun(
            args.learning, 50, args.learning_shape, args.learning_device, args.learning_tokens,
            tuple(args.learning_lengths), args.learning_dropout,
        )  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            result["learning"] = learning_report(
                run, learning_variants(args.learning_device), Path(tmp)
            )
    if args.warmup:
        precisions = ["fp32"] + (["bf16"] if cpu_has_native_bf16() else [])
        result["warmup"] = [warmup_report(p) for p in precisions]
    write_result(args.out or result_path("batch_shapes", "cpu"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
