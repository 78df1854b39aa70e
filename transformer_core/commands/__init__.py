"""One module per ``transformer-core`` subcommand.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. A command is a thin wrapper: it parses, calls pure
library functions, and writes outputs atomically. Heavy imports (torch) go
inside ``run`` so ``transformer-core --help`` stays fast.
"""

from __future__ import annotations

import argparse


def add_device_arguments(parser: argparse.ArgumentParser, precision_default: str, precision_help: str) -> None:
    """--device, --precision and --num-threads of the commands that run a model on one device."""
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda (default: auto)")
    parser.add_argument("--precision", default=precision_default, help=precision_help)
    parser.add_argument("--num-threads", type=int, default=None,
                        help="CPU threads for torch (default: torch's choice)")
