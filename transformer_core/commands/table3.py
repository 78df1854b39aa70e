"""``transformer-core table3``: Table 3 assembled from its per-row CSV files."""

from __future__ import annotations

import argparse

HELP = "Assemble Table 3 from per-row CSVs (paper row order), with a markdown twin."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", nargs="+", required=True, help="per-row CSVs from table3_row")
    parser.add_argument("--out", required=True, help="CSV output")
    parser.add_argument("--markdown", help="markdown twin of the CSV")


def run(args: argparse.Namespace) -> int:
    from transformer_core.paper import TABLE3_NOTES
    from transformer_core.tables import table3, write_table

    write_table(table3(args.rows), args.out, args.markdown, TABLE3_NOTES)
    return 0
