"""``transformer-core table2``: Table 2 (newstest2014 BLEU, training cost) with the paper beside ours."""

from __future__ import annotations

import argparse

from transformer_core.commands import add_records, check_outputs

HELP = "Assemble Table 2 (BLEU and training cost) from score and training-summary files."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_records(
        parser,
        "--result",
        ("MODEL", "PAIR", "SEED", "SCORE_JSON", "SUMMARY_JSON"),
        "one run of our rows: preset (base|big), pair (en_de|en_fr), its training seed, "
        "the newstest2014 score JSON of its averaged model, and its training summary "
        "(several seeds of one model and pair make one row: their mean)",
        required=True,
    )
    parser.add_argument(
        "--dataset",
        nargs=2,
        action="append",
        default=[],
        metavar=("PAIR", "DATASET"),
        help="the dataset of the registry a pair's runs were trained and tested on (e.g. en_de "
        "multi30k_en_de), for the notes: they name its test set, and label the paper's columns "
        "as WMT14 values where it is not WMT14; repeatable",
    )
    parser.add_argument("--out", required=True, help="CSV output")
    parser.add_argument("--markdown", help="markdown twin of the CSV")


def run(args: argparse.Namespace) -> int:
    check_outputs({"--out": args.out, "--markdown": args.markdown})
    from transformer_core.paper import TABLE2_NOTES
    from transformer_core.tables.evaluation_sets import datasets_of, paper_labels, table2_notes
    from transformer_core.tables.markdown import write_table
    from transformer_core.tables.translation import INTERVAL_NOTES, table2

    results = [
        dict(zip(("model", "pair", "seed", "score", "summary"), r, strict=True))
        for r in args.result
    ]
    datasets = datasets_of(args.dataset)
    write_table(
        table2(results),
        args.out,
        args.markdown,
        table2_notes(datasets) + TABLE2_NOTES + INTERVAL_NOTES,
        paper_labels(datasets, ("paper_bleu", "paper_flops")),
    )
    return 0
