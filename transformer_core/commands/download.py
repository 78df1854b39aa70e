"""``transformer-core download``: fetch (or generate) a dataset as plain text.

Leaves ``OUT/{train,dev,test}.{SRC,TGT}`` (one sentence per line) and
``OUT/manifest.json``. Registry datasets come from the cache, a ``--mirror``
(a directory or URL prefix holding the registry's files under their URL
basenames) or the network, with resumable downloads and checksum checks;
the ``smoke_*`` datasets are generated, with no network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_core.commands import check_outputs
from transformer_core.data.registry import SPLITS, load_registry

HELP = "fetch a dataset (WMT14, Multi30k) or generate the smoke corpus, as plain text"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        required=True,
        help="registry name, e.g. wmt14_en_de, multi30k_en_de, smoke_en_de",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="output folder for {train,dev,test}.{src,tgt}"
    )
    parser.add_argument(
        "--mirror",
        help="local folder or URL prefix holding the registry's files under their basenames "
        "(at its root or in the subfolder the registry names), tried before the files' own URLs",
    )
    parser.add_argument(
        "--cache", type=Path, help="download cache (default: OUT/../downloads, shared by datasets)"
    )
    parser.add_argument(
        "--splits", nargs="+", choices=SPLITS, default=list(SPLITS), help="splits to build"
    )
    parser.add_argument(
        "--retries", type=int, default=5, help="resume attempts per interrupted download"
    )


def run(args: argparse.Namespace) -> int:
    check_outputs(folders={"--out": args.out})
    from transformer_core.data.fetch import Fetcher
    from transformer_core.data.smoke import write_dataset
    from transformer_core.data.sources import build_dataset

    dataset = load_registry().dataset(args.dataset)
    if dataset.generate is not None:
        manifest = write_dataset(dataset, args.out, args.splits)
    else:
        cache = args.cache or args.out.parent / "downloads"
        fetcher = Fetcher(cache, mirror=args.mirror, retries=args.retries)
        manifest = build_dataset(dataset, load_registry(), fetcher, args.out, args.splits)
    print(
        f"{dataset.name}: "
        + ", ".join(f"{s} {n} lines" for s, n in manifest["lines"].items())
        + f" in {args.out}",
        file=sys.stderr,
    )
    return 0
