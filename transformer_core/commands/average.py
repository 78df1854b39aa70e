"""``transformer-core average``: the mean of several checkpoints (paper section 6.1)."""

from __future__ import annotations

import argparse
import sys

HELP = "Average checkpoints (the last 5 for base, 20 for big) into one model checkpoint."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--checkpoints", nargs="+", metavar="CKPT", help="checkpoint files to average"
    )
    source.add_argument(
        "--run-dir",
        metavar="RUN_DIR",
        help="a training run directory: average its newest --last checkpoints",
    )
    parser.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="how many of RUN_DIR's newest checkpoints (paper: 5 base, 20 big)",
    )
    parser.add_argument(
        "--out", required=True, metavar="OUT.pt", help="the averaged checkpoint to write"
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.errors import UserError
    from transformer_core.training.average import average_files, last_checkpoints

    if args.run_dir is not None:
        if args.last is None:
            raise UserError(
                "--run-dir needs --last N (how many of the newest checkpoints to average)"
            )
        paths = last_checkpoints(args.run_dir, args.last)
    else:
        if args.last is not None:
            raise UserError(
                "--last goes with --run-dir; with --checkpoints, list the files to average"
            )
        paths = args.checkpoints
    average_files(paths, args.out)
    print(
        f"averaged {len(paths)} checkpoint(s) into {args.out}: {', '.join(map(str, paths))}",
        file=sys.stderr,
    )
    return 0
