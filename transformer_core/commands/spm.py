"""``transformer-core spm {train,encode,decode}``: the joint sentencepiece BPE model.

``train`` samples at most ``--sample-size`` lines of the inputs (seeded) and
trains a BPE model with pad/unk/bos/eos = 0/1/2/3; ``encode`` and ``decode``
turn text into space-separated pieces (or ``--ids``) and back, line by line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from transformer_core.commands import check_outputs
from transformer_core.settings import SentencePieceSettings, add_options, flag_values

HELP = "train a joint sentencepiece BPE model on a bounded sample; encode and decode text"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="spm_command", metavar="ACTION", required=True)
    train = sub.add_parser(
        "train", help="train a joint BPE model (writes PREFIX.model, PREFIX.vocab)"
    )
    train.add_argument(
        "--input", nargs="+", required=True, type=Path, help="text files (all languages)"
    )
    train.add_argument(
        "--vocab-size", type=int, required=True, help="e.g. 37000 (EN-DE), 32000 (EN-FR)"
    )
    train.add_argument("--model-prefix", required=True, type=Path)
    train.add_argument("--threads", type=int, help="training threads (default: all cores)")
    add_options(train, SentencePieceSettings)
    for name, what in (("encode", "text to pieces"), ("decode", "pieces to text")):
        action = sub.add_parser(name, help=f"{what}, line by line")
        action.add_argument("--model", required=True, type=Path, help="PREFIX.model")
        action.add_argument("--input", required=True, type=Path)
        action.add_argument("--output", required=True, type=Path)
        action.add_argument("--ids", action="store_true", help="ids instead of pieces")


def run(args: argparse.Namespace) -> int:
    if args.spm_command == "train":
        check_outputs({"--model-prefix": f"{args.model_prefix}.model"})
    else:
        check_outputs({"--output": args.output})
    from transformer_core.data import bpe

    if args.spm_command == "train":
        settings = flag_values(SentencePieceSettings, args)
        info = bpe.train(
            args.input,
            args.vocab_size,
            args.model_prefix,
            SentencePieceSettings(**settings),
            threads=args.threads,
        )
        print(
            f"spm train: {info['lines_sampled']} of {info['lines_total']} lines sampled, "
            f"vocabulary {info['vocab_size']} -> {info['model']}",
            file=sys.stderr,
        )
        print(json.dumps(info))
        return 0
    convert = bpe.encode_file if args.spm_command == "encode" else bpe.decode_file
    count = convert(args.model, args.input, args.output, ids=args.ids)
    print(f"spm {args.spm_command}: {count} lines -> {args.output}", file=sys.stderr)
    return 0
