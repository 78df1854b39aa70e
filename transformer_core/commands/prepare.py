"""``transformer-core prepare``: normalize a parallel corpus and filter training pairs, with a report.

Writes the normalized (and, unless ``--no-filter``, filtered) pair of files,
a JSON report of every count, and a one-line summary on stderr. With
``--shard-index`` and ``--shard`` it prepares only that shard's lines of the
inputs (``transformer-core shards split``), and the report names the shard.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from transformer_core.commands import check_outputs
from transformer_core.settings import PrepareSettings, add_options, flag_values

HELP = "normalize (unicode, Moses punctuation, non-printing chars) and filter a parallel corpus"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src-in", required=True, type=Path)
    parser.add_argument("--tgt-in", required=True, type=Path)
    parser.add_argument("--src-out", required=True, type=Path)
    parser.add_argument("--tgt-out", required=True, type=Path)
    parser.add_argument("--report", required=True, type=Path, help="JSON report of the counts")
    add_options(parser, PrepareSettings)
    parser.add_argument(
        "--workers", type=int, default=1, help="processes normalizing in parallel (order is kept)"
    )
    parser.add_argument(
        "--shard-index",
        type=Path,
        help="index of --src-in/--tgt-in by `transformer-core shards split`: prepare one shard",
    )
    parser.add_argument(
        "--shard", type=int, help="the shard to prepare, 0 .. N-1 (with --shard-index)"
    )
    parser.add_argument(
        "--shards", type=int, help="check the index has this many shards (with --shard-index)"
    )


def run(args: argparse.Namespace) -> int:
    check_outputs({"--src-out": args.src_out, "--tgt-out": args.tgt_out, "--report": args.report})
    from transformer_core.data.prepare import prepare_corpus, prepare_shard, summary
    from transformer_core.data.shards import load_shard
    from transformer_core.errors import UserError
    from transformer_core.files import atomic_write_text

    settings = PrepareSettings(**flag_values(PrepareSettings, args))
    if (args.shard_index is None) != (args.shard is None):
        raise UserError("--shard-index and --shard go together")
    if args.shard_index is None:
        report = prepare_corpus(
            args.src_in, args.tgt_in, args.src_out, args.tgt_out, settings, workers=args.workers
        )
    else:
        shard = load_shard(args.shard_index, args.shard, args.shards)
        if (shard.src, shard.tgt) != (args.src_in, args.tgt_in):
            raise UserError(
                f"{args.shard_index} indexes {shard.src} and {shard.tgt}, "
                f"not --src-in {args.src_in} and --tgt-in {args.tgt_in}"
            )
        report = prepare_shard(shard, args.src_out, args.tgt_out, settings, workers=args.workers)
    atomic_write_text(args.report, json.dumps(report, indent=2) + "\n")
    print(summary(report), file=sys.stderr)
    return 0
