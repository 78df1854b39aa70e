"""What a training step's loss weighs, exact batches against fixed shapes, on a real corpus.

A step's loss is the sum of its target tokens' losses over its real target tokens, so a token
of a step that holds few tokens weighs more. Fixed shapes give each ladder width one number of
rows, so their steps' token counts vary more than exact batches' (docs/gpu.md): this counts, for
one epoch of a binarized corpus, each layout's step sizes by the mean sentence length of the
step, the share of the loss's weight that falls on EOS tokens (what teaches a model to stop),
and the mean target length weighted by loss weight. No training: the sampler alone.

    python -m bench.batch_weights --data data/en_de/bin/train [--tokens 2000] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench.hardware import write_result
from transformer_core.data.batching import TokenBucketSampler
from transformer_core.data.dataset import ParallelDataset

LENGTH_BANDS = ((1, 8), (9, 12), (13, 16), (17, 24), (25, 40), (41, 10_000))


def layout_weights(ds: ParallelDataset, tokens: int, fixed: bool, seed: int = 1) -> dict:
    """One epoch's steps of ``tokens`` target tokens, exact or on fixed shapes: their sizes,
    the EOS share of the loss weight, the loss-weighted mean target length, by length band."""
    sampler = TokenBucketSampler(ds.src_lens, ds.tgt_lens, tokens, seed=seed, fixed_shapes=fixed)
    batches = sampler.batches(0)
    target = ds.tgt_lens + 1  # with EOS
    sizes = np.array([target[b].sum() for b in batches])
    mean_len = np.array([target[b].mean() for b in batches])
    weight = len(batches)  # every step's tokens weigh 1 in all
    eos = sum(len(b) / size for b, size in zip(batches, sizes, strict=True))
    lengths = sum((target[b] ** 2).sum() / size for b, size in zip(batches, sizes, strict=True))
    bands = {}
    for low, high in LENGTH_BANDS:
        chosen = (mean_len >= low) & (mean_len < high + 1)  # a mean of 8.5 is in 1-8
        if chosen.any():
            bands[f"{low}-{high}"] = {
                "steps": int(chosen.sum()),
                "mean_step_tokens": round(float(sizes[chosen].mean()), 1),
            }
    return {
        "steps": len(batches),
        "step_tokens": {
            "min": int(sizes.min()),
            "mean": round(float(sizes.mean()), 1),
            "max": int(sizes.max()),
            "sd": round(float(sizes.std()), 1),
        },  # fmt: skip
        "eos_share_of_loss_weight": round(float(eos) / weight, 5),
        "loss_weighted_mean_target_length": round(float(lengths) / weight, 3),
        "by_mean_sentence_length": bands,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="a binarized training corpus's prefix")
    parser.add_argument("--tokens", type=int, default=2000, help="tokens a step (default: 2000)")
    parser.add_argument("--out", default=None, help="JSON output (default: print only)")
    args = parser.parse_args()
    ds = ParallelDataset(args.data)
    target = ds.tgt_lens + 1
    result = {
        "bench": "batch_weights",
        "data": args.data,
        "tokens_per_step": args.tokens,
        "per_token_uniform": {
            "eos_share": round(len(target) / float(target.sum()), 5),
            "mean_target_length": round(float((target**2).sum() / target.sum()), 3),
        },
        "exact": layout_weights(ds, args.tokens, fixed=False),
        "fixed": layout_weights(ds, args.tokens, fixed=True),
    }
    for name in ("exact", "fixed"):
        print(name, result[name])
    if args.out:
        write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
