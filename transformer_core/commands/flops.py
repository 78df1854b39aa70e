"""``transformer-core flops``: training cost of the paper's runs and of our own, two ways."""

from __future__ import annotations

import argparse
import json
import sys

from transformer_core.commands import add_paper_vocabulary

HELP = (
    "Training cost: the paper's method (time x devices x sustained FLOPS) and an analytic "
    "FLOPs count, for the paper's base and big runs and for train summary files."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--summary",
        nargs="*",
        default=[],
        metavar="SUMMARY_JSON",
        help="summary.json files written by `transformer-core train`",
    )
    add_paper_vocabulary(parser, "print JSON lines instead of a markdown table")


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from transformer_core.errors import UserError
    from transformer_core.paper import TABLE2, TABLE2_PRESET_ROWS
    from transformer_core.training.flops import paper_run_costs, summary_costs

    reported = {row.model: row.en_de_flops for row in TABLE2}
    rows = []
    for row in paper_run_costs(args.vocab_size):
        preset = row["run"].removeprefix("paper ")
        rows.append({**row, "flops_table2": reported[TABLE2_PRESET_ROWS[preset]]})
    for path in args.summary:
        try:
            summary = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UserError(f"cannot read training summary {path}: {err}") from err
        rows.append({**summary_costs(summary, where=path), "flops_table2": None})
    if args.json:
        sys.stdout.write("".join(json.dumps(r) + "\n" for r in rows))
        return 0
    lines = [
        "| run | device x count | hours | target tokens | FLOPs, paper's method | FLOPs, Table 2 "
        "| FLOPs, analytic | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['device']} x {r['devices']} | {r['hours']:.3g} | {r['tokens_tgt']:,} "
            f"| {_fmt(r['flops_paper_method'])} | {_fmt(r['flops_table2'])} "
            f"| {_fmt(r['flops_analytic'])} | {r['note']} |"
        )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
