"""``transformer-core table4``: Table 4 (English constituency parsing, F1) with the paper beside ours."""

from __future__ import annotations

import argparse

from transformer_core.commands import add_decode_arguments, add_records, check_outputs
from transformer_core.settings import PARSING_SEARCH

HELP = "Assemble Table 4 (parsing F1 on the test section) from EVALB and training-summary files."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_records(
        parser,
        "--result",
        ("SETTING", "SEED", "EVALB_JSON", "SUMMARY_JSON"),
        "one run of our rows, once per seed: setting (wsj_only|semi_supervised), the run's "
        "seed, the `transformer-core evalb --json` file of its test split, and its training "
        "summary (a row shows the mean over its seeds and each seed's F1; a setting without "
        "--result shows as 'not run')",
        required=False,
    )
    parser.add_argument(
        "--treebank",
        required=True,
        help="what our rows were trained and tested on (wsj, nltk, smoke), for the table",
    )
    add_decode_arguments(
        parser.add_argument_group("the search our rows decoded with, for the table's note"),
        PARSING_SEARCH,
    )
    parser.add_argument("--out", required=True, help="CSV output")
    parser.add_argument("--markdown", help="markdown twin of the CSV")


def run(args: argparse.Namespace) -> int:
    check_outputs({"--out": args.out, "--markdown": args.markdown})
    from transformer_core.commands import decode_options
    from transformer_core.paper import TABLE4_NOTES
    from transformer_core.tables.evaluation_sets import TREEBANK_SETS, paper_label
    from transformer_core.tables.markdown import write_table
    from transformer_core.tables.table4 import search_note, table4

    results = [
        dict(zip(("setting", "seed", "evalb", "summary"), r, strict=True)) for r in args.result
    ]
    table = table4(results, args.treebank)
    notes, labels = (TABLE4_NOTES[0], search_note(decode_options(args)), *TABLE4_NOTES[1:]), {}
    if args.treebank != "wsj":
        notes += (
            f"Our rows are trained and tested on {TREEBANK_SETS.get(args.treebank, args.treebank)}, "
            "not WSJ sections 02-21 and 23: paper_f1 is the paper's value on WSJ section 23, "
            "shown for reference, not comparable with our F1.",
        )
        labels = {"paper_f1": paper_label("paper_f1", "WSJ section 23")}
    if ((table.status == "run") & table.f1.isna()).any():
        notes += (
            "An empty f1 in a row that ran: the model predicted no constituent that EVALB counts "
            "(precision and recall 0; EVALB prints nan).",
        )
    write_table(table, args.out, args.markdown, notes, labels)
    return 0
