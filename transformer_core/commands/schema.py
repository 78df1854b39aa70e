"""``transformer-core schema``: write the workflow's configuration schema and config/README.md's
key table from the settings' declarations, or check that the committed ones are theirs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = (
    "write workflow/schemas/config.schema.yaml and config/README.md's key table from the "
    "settings' declarations (--check: exit 1 where a committed one is stale)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository (default: .)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1, naming each file, where it is not what this would write",
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.files import atomic_write_text
    from transformer_core.workflow_plan.schema import generated

    stale = []
    for path, text in generated(args.root).items():
        target = args.root / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(target)
            if not args.check:
                atomic_write_text(target, text)
    if args.check and stale:
        for target in stale:
            print(f"{target} is stale: run transformer-core schema", file=sys.stderr)
        return 1
    return 0
