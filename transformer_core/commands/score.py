"""``transformer-core score``: BLEU of a detokenized hypothesis file, both ways, as JSON."""

from __future__ import annotations

import argparse
import json

from transformer_core.bleu import score_files
from transformer_core.io import atomic_write_text

HELP = "BLEU of a detokenized hypothesis file: paper-style (tokenized, ##AT##) and sacreBLEU 13a."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hyp", required=True, help="detokenized system output, one line per segment (.gz ok)"
    )
    parser.add_argument(
        "--ref", required=True, help="detokenized reference, same number of lines (.gz ok)"
    )
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument(
        "--lang",
        default="de",
        help="target language for the Moses tokenizer of the paper-style score (default: de)",
    )


def run(args: argparse.Namespace) -> int:
    result = score_files(args.hyp, args.ref, args.lang)
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(
        f"BLEU paper-style {result['bleu_paper_style']:.2f}, "
        f"sacreBLEU {result['sacrebleu']:.2f} ({result['sacrebleu_signature']}), {result['n_lines']} lines"
    )
    return 0
