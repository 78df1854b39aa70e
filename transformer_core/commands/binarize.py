"""``transformer-core binarize``: encode a text pair with the BPE model into a binarized split.

Writes PREFIX.{src,tgt}.{bin,idx,len} and the PREFIX.json header (see
``transformer_core.data.binarized``), streaming, so memory stays flat.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_core.commands import check_outputs

HELP = "encode a parallel text pair with a sentencepiece model into memory-mapped id arrays"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spm", required=True, type=Path, help="sentencepiece model (PREFIX.model)"
    )
    parser.add_argument(
        "--src", required=True, type=Path, help="source text, one sentence per line"
    )
    parser.add_argument("--tgt", required=True, type=Path, help="target text, aligned with --src")
    parser.add_argument(
        "--out-prefix", required=True, type=Path, help="e.g. data/wmt14_en_de/bin/train"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="sentencepiece encoding threads (default: 1)"
    )


def run(args: argparse.Namespace) -> int:
    check_outputs({"--out-prefix": f"{args.out_prefix}.json"})
    from transformer_core.data.binarized import binarize

    header = binarize(args.spm, args.src, args.tgt, args.out_prefix, threads=args.threads)
    print(
        f"binarize: {header['num_sentences']} pairs, {header['src_tokens']} source and "
        f"{header['tgt_tokens']} target tokens (vocabulary {header['vocab_size']}) -> {args.out_prefix}.*",
        file=sys.stderr,
    )
    return 0
