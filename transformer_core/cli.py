"""The ``transformer-core`` command line: one subcommand per pipeline stage.

Subcommands live in ``transformer_core.commands.<name>``; ``COMMANDS`` lists
them in pipeline order. A ``UserError`` (bad config, missing file) is printed
as ``transformer-core <cmd>: error: ...`` with exit status 2, never as a
traceback; under torchrun by rank 0 alone (torchrun then adds its own report of
the ranks' exit status).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from transformer_core import __version__
from transformer_core.errors import UserError

# Errors of the machine, not of the code: a full disk or quota, a read-only file system, a
# folder without permission. One line naming the file, exit 2, like a UserError.
ENVIRONMENT_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)

# Pipeline order (then `schema`, the configuration's generator); the name is both the
# subcommand and the module under commands/.
COMMANDS = (
    "download",
    "shards",
    "prepare",
    "spm",
    "binarize",
    "train",
    "average",
    "translate",
    "export",
    "score",
    "decode_choice",
    "bleu_curve",
    "ppl",
    "flops",
    "params",
    "treebank",
    "evalb",
    "table2",
    "table3_row",
    "table3",
    "table4",
    "attention",
    "report",
    "schema",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-core",
        description="Reproduce 'Attention Is All You Need': data, training, decoding, scoring, tables.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"transformer_core.commands.{name}")
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UserError as err:
        # Under torchrun every rank meets the same mistake: rank 0 alone says it.
        if os.environ.get("RANK", "0") == "0":
            print(f"transformer-core {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in ENVIRONMENT_ERRORS:
            raise
        where = f"{err.filename}: " if err.filename else ""
        print(f"transformer-core {args.command}: error: {where}{err.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"transformer-core {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
