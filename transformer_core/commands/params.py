"""``transformer-core params``: exact parameter counts of base, big and every Table 3 row."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "Exact parameter count of base, big and every Table 3 row, beside the paper's column."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=37000,
        help="shared vocabulary size (default: 37000, the paper's EN-DE vocabulary)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON instead of a markdown table"
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.errors import ConfigError
    from transformer_core.params import format_markdown, parameter_table

    if args.vocab_size < 4:
        raise ConfigError(
            f"--vocab-size must be at least 4 (pad, unk, bos, eos), got {args.vocab_size}"
        )
    rows = parameter_table(args.vocab_size)
    sys.stdout.write(json.dumps(rows, indent=2) + "\n" if args.json else format_markdown(rows))
    return 0
