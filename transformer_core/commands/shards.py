"""``transformer-core shards {split,report,merge}``: a training corpus in shards, and back.

``split`` writes the shard index of a raw parallel corpus (the byte ranges of N
equal line ranges; nothing is copied), which ``prepare --shard-index`` reads;
``report`` adds the shards' prepare reports up into one; ``merge`` concatenates
the shards' binarized splits into one, streaming (checking their sentences against
the prepare report's pairs, when given). See
``transformer_core.data.shards``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from transformer_core.errors import UserError

HELP = "cut a training corpus into shards (an index of line ranges); merge their reports and binarized splits"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="shards_command", metavar="ACTION", required=True)
    split = sub.add_parser("split", help="write the shard index of a parallel text pair")
    split.add_argument("--src", required=True, type=Path, help="source text (plain, not gzip)")
    split.add_argument("--tgt", required=True, type=Path, help="target text, aligned with --src")
    split.add_argument("--shards", required=True, type=int, help="number of shards")
    split.add_argument("--out", required=True, type=Path, help="the index (JSON)")
    report = sub.add_parser("report", help="add the prepare reports of all shards up into one")
    report.add_argument(
        "--reports", nargs="+", required=True, type=Path, help="shard reports, in shard order"
    )
    report.add_argument("--out", required=True, type=Path)
    merge = sub.add_parser("merge", help="concatenate binarized splits, streaming, in order")
    merge.add_argument(
        "--parts", nargs="+", required=True, type=Path, help="split prefixes, in shard order"
    )
    merge.add_argument(
        "--out-prefix", required=True, type=Path, help="e.g. data/wmt14_en_de/bin/train"
    )
    merge.add_argument(
        "--prepare-report",
        type=Path,
        help="the merged prepare report: its pairs_out must equal the splits' sentences",
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.data import shards
    from transformer_core.data.binarized import concatenate, read_header
    from transformer_core.data.prepare import summary
    from transformer_core.files import atomic_write_text, check_output

    if args.shards_command == "split":
        check_output(args.out)
        index = shards.write_plan(args.src, args.tgt, args.shards, args.out)
        sizes = [entry["lines"] for entry in index["shards"]]
        print(
            f"shards split: {index['pairs']} pairs into {len(sizes)} shards of "
            f"{min(sizes)} to {max(sizes)} pairs -> {args.out}",
            file=sys.stderr,
        )
    elif args.shards_command == "report":
        check_output(args.out)
        reports = [_read_json(path) for path in args.reports]
        merged = shards.merge_reports(reports, [str(path) for path in args.reports])
        atomic_write_text(args.out, json.dumps(merged, indent=2) + "\n")
        print(f"shards report: {len(reports)} shards; {summary(merged)}", file=sys.stderr)
    else:
        if args.prepare_report is not None:
            prepared = _read_json(args.prepare_report).get("pairs_out")
            if not isinstance(prepared, int):
                raise UserError(f"{args.prepare_report}: not a prepare report (no pairs_out)")
            binarized = sum(read_header(part)["num_sentences"] for part in args.parts)
            if prepared != binarized:
                raise UserError(
                    f"{args.prepare_report} counts {prepared} prepared pairs, the splits hold "
                    f"{binarized}: a shard is stale; rerun its binarize"
                )
        header = concatenate(args.parts, args.out_prefix)
        print(
            f"shards merge: {len(args.parts)} splits, {header['num_sentences']} pairs, "
            f"{header['src_tokens']} source and {header['tgt_tokens']} target tokens "
            f"-> {args.out_prefix}.*",
            file=sys.stderr,
        )
    return 0


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: not JSON ({err})") from None
