"""``transformer-core table3_row``: one Table 3 row, so one ablation can be rebuilt alone."""

from __future__ import annotations

import argparse

from transformer_core.commands import add_records, check_outputs
from transformer_core.model.config import TABLE3_ROWS

HELP = "Write one Table 3 row (hyperparameters, dev PPL and BLEU, parameters) beside the paper's values."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--row", required=True, choices=TABLE3_ROWS, metavar="ROW",
        help=f"Table 3 row name: {', '.join(TABLE3_ROWS)}",
    )  # fmt: skip
    add_records(
        parser,
        "--run",
        ("SEED", "SCORE_JSON", "SUMMARY_JSON"),
        "one training run of the row, one per seed: its seed, its newstest2013 score JSON "
        "(beam search, no averaging) and its training summary (the final dev perplexity is "
        "the PPL column)",
        required=True,
    )
    parser.add_argument("--out", required=True, help="CSV output (one row)")


def run(args: argparse.Namespace) -> int:
    check_outputs({"--out": args.out})
    from transformer_core.tables.markdown import write_table
    from transformer_core.tables.translation import table3_row

    runs = [dict(zip(("seed", "score", "summary"), r, strict=True)) for r in args.run]
    write_table(table3_row(args.row, runs), args.out)
    return 0
