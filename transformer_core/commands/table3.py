"""``transformer-core table3``: Table 3 assembled from its per-row CSV files, with the deltas
against base, their paired-bootstrap p-values, and the chart of them."""

from __future__ import annotations

import argparse

from transformer_core.commands import check_outputs
from transformer_core.settings import BootstrapSettings, add_options, settings_of

HELP = "Assemble Table 3 from per-row CSVs (paper row order) with deltas against base, p-values and a markdown twin."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", nargs="+", required=True, help="per-row CSVs from table3_row")
    parser.add_argument(
        "--hyp",
        nargs=3,
        action="append",
        default=[],
        metavar=("ROW", "SEED", "TRANSLATION"),
        help="a row's newstest2013 translation (last checkpoint) with one seed, for the paired "
        "test against base; repeatable. Without them the table has no deltas.",
    )
    parser.add_argument("--ref", help="the newstest2013 reference (needed with --hyp)")
    parser.add_argument(
        "--lang", default="de", help="target language of the paper-style BLEU (default: de)"
    )
    add_options(parser, BootstrapSettings)
    parser.add_argument(
        "--dataset",
        nargs=2,
        required=True,
        metavar=("PAIR", "DATASET"),
        help="the pair and registry dataset the rows were trained on (e.g. en_de wmt14_en_de): "
        "the notes name its dev set, and label the paper's columns where it is not WMT14",
    )
    parser.add_argument("--out", required=True, help="CSV output")
    parser.add_argument("--markdown", help="markdown twin of the CSV")
    parser.add_argument("--plot", help="PNG chart of the BLEU deltas against base (needs --hyp)")


def run(args: argparse.Namespace) -> int:
    check_outputs({"--out": args.out, "--markdown": args.markdown, "--plot": args.plot})
    from transformer_core.errors import UserError
    from transformer_core.figures.table3_deltas import plot_deltas
    from transformer_core.paper import TABLE3_NOTES
    from transformer_core.tables.deltas import BASE, add_deltas
    from transformer_core.tables.evaluation_sets import datasets_of, paper_labels, table3_notes
    from transformer_core.tables.markdown import write_table
    from transformer_core.tables.translation import DELTA_NOTES, INTERVAL_NOTES, table3

    table = table3(args.rows)
    if args.hyp:
        if not args.ref:
            raise UserError("--hyp needs --ref: the paired test scores against the reference")
        translations: dict[str, dict[int, str]] = {}
        for row, seed, path in args.hyp:
            translations.setdefault(row, {})[int(seed)] = path
        bootstrap = settings_of(BootstrapSettings, args)
        table = add_deltas(
            table, translations, args.ref, args.lang, bootstrap.resamples, bootstrap.seed
        )
    elif args.plot:
        raise UserError("--plot needs --hyp: the chart shows the deltas of the paired tests")
    datasets = datasets_of([args.dataset])
    [(pair, dataset)] = datasets.items()
    notes = table3_notes(pair, dataset) + TABLE3_NOTES + INTERVAL_NOTES
    notes += DELTA_NOTES if args.hyp else ()
    labels = paper_labels(datasets, ("paper_ppl", "paper_bleu", "paper_params"))
    write_table(table, args.out, args.markdown, notes, labels)
    if args.plot:
        plot_deltas(table, BASE, args.plot)
    return 0
