"""``transformer-core evalb``: EVALB's bracket scores of test trees against gold trees."""

from __future__ import annotations

import argparse
import json
import sys

from transformer_core.errors import UserError
from transformer_core.files import atomic_write_text, check_input_file, check_output, read_lines
from transformer_core.parsing.evalb import EvalbParams, evalb

HELP = "EVALB bracket scoring (COLLINS.prm semantics unless --prm is given); prints EVALB's report."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gold", required=True, help="gold trees, one per line")
    parser.add_argument(
        "--test", required=True, help="test trees, one per line, same number of lines"
    )
    parser.add_argument(
        "--prm", help="EVALB parameter file (default: the settings of COLLINS.prm, built in)"
    )
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument(
        "--json", help="write the summary numbers (all lengths and len<=CUTOFF_LEN) as JSON"
    )


def run(args: argparse.Namespace) -> int:
    for name in ("out", "json"):
        if getattr(args, name):
            check_output(getattr(args, name), f"--{name}")
    check_input_file(args.gold, "--gold")
    check_input_file(args.test, "--test")
    params = EvalbParams.read(args.prm) if args.prm else EvalbParams()
    gold, test = read_lines(args.gold), read_lines(args.test)
    if len(gold) != len(test):
        raise UserError(
            f"line counts differ: gold {args.gold}: {len(gold)}, test {args.test}: {len(test)}"
        )
    result = evalb(gold, test, params)
    if result.all.valid == 0:  # EVALB would print FMeasure = nan: no number to report
        raise UserError(
            f"{args.test}: no valid sentences to score against {args.gold} ({result.all.sentences} "
            f"sentence(s), {result.all.errors} with errors, {result.all.skipped} skipped): F1 cannot be computed"
        )
    for message in result.error_messages():
        print(message, file=sys.stderr)
    report = result.report()
    sys.stdout.write(report)
    if args.out:
        atomic_write_text(args.out, report)
    if args.json:
        atomic_write_text(args.json, json.dumps(result.as_dict(), indent=2) + "\n")
    return 0
