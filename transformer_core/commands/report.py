"""``transformer-core report``: results/report.md with the recipe, tables, learning curves and samples."""

from __future__ import annotations

import argparse

from transformer_core.commands import check_outputs

HELP = "Write the report: how each number was made, the tables, learning curves, figures, sample translations."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scale", required=True, help="name of the configuration's scale (paper, smoke, ...)"
    )
    parser.add_argument(
        "--table",
        nargs=2,
        action="append",
        default=[],
        metavar=("TITLE", "MARKDOWN"),
        help="a table's markdown file under a heading; repeatable",
    )
    parser.add_argument(
        "--score",
        nargs=2,
        action="append",
        default=[],
        metavar=("LABEL", "SCORE_JSON"),
        help="a score file, for the sacreBLEU signatures; repeatable",
    )
    parser.add_argument(
        "--run",
        nargs=2,
        action="append",
        default=[],
        metavar=("LABEL", "METRICS_JSONL"),
        help="a training run's metrics for the learning curves; repeatable",
    )
    parser.add_argument(
        "--sample",
        nargs=4,
        action="append",
        default=[],
        metavar=("LABEL", "SOURCE", "REFERENCE", "HYPOTHESIS"),
        help="a test set to show the first lines of; repeatable",
    )
    parser.add_argument(
        "--figure",
        nargs=2,
        action="append",
        default=[],
        metavar=("TITLE", "PNG"),
        help="a figure (the Table 3 deltas chart, the attention figures) under a heading; repeatable",
    )
    parser.add_argument(
        "--curve",
        nargs=2,
        action="append",
        default=[],
        metavar=("LABEL", "CURVE_JSON"),
        help="a run's dev BLEU by step (bleu_curve) for the BLEU-against-steps plot; repeatable",
    )
    parser.add_argument(
        "--decoding",
        nargs=2,
        action="append",
        default=[],
        metavar=("LABEL", "DECODE_CHOICE_JSON"),
        help="a model's decoding settings (`decode_choice`), with its dev sweep where it was "
        "chosen on dev; repeatable",
    )
    parser.add_argument("--curve-plot", help="PNG output of BLEU against steps (needs --curve)")
    parser.add_argument("--plot", help="PNG output for the learning curves (needs --run)")
    parser.add_argument("--out", required=True, help="markdown output")


def run(args: argparse.Namespace) -> int:
    check_outputs({"--out": args.out, "--plot": args.plot, "--curve-plot": args.curve_plot})
    from transformer_core.errors import UserError
    from transformer_core.figures.learning_curves import plot_learning_curves
    from transformer_core.tables.report import write_report

    if args.run and not args.plot:
        raise UserError("--run needs --plot: the learning curves go into that PNG")
    if bool(args.curve) != bool(args.curve_plot):
        raise UserError("--curve and --curve-plot go together: the curves go into that PNG")
    if args.plot:
        plot_learning_curves(dict(args.run), args.plot)
    figures = dict(args.figure)
    if args.curve:
        from transformer_core.figures.bleu_curves import plot_bleu_curves

        plot_bleu_curves(dict(args.curve), args.curve_plot)
        figures = {"BLEU against training steps (dev set)": args.curve_plot, **figures}
    if args.plot:
        figures = {"Learning curves": args.plot, **figures}
    samples = [tuple(s) for s in args.sample]
    tables, scores, choices = dict(args.table), dict(args.score), dict(args.decoding)
    write_report(args.out, args.scale, tables, scores, samples, figures, choices)
    return 0
