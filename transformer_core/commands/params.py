"""``transformer-core params``: exact parameter counts of base, big and every Table 3 row."""

from __future__ import annotations

import argparse
import json
import sys

from transformer_core.commands import add_paper_vocabulary

HELP = "Exact parameter count of base, big and every Table 3 row, beside the paper's column."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_paper_vocabulary(parser, "print JSON instead of a markdown table")


def run(args: argparse.Namespace) -> int:
    from transformer_core.errors import ConfigError
    from transformer_core.tables.params import format_markdown, parameter_table

    if args.vocab_size < 4:
        raise ConfigError(
            f"--vocab-size must be at least 4 (pad, unk, bos, eos), got {args.vocab_size}"
        )
    rows = parameter_table(args.vocab_size)
    sys.stdout.write(json.dumps(rows, indent=2) + "\n" if args.json else format_markdown(rows))
    return 0
