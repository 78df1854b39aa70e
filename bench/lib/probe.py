"""What the CPU benchmarks share: the precisions they compare, and peak RSS in a fresh process."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from transformer_core.device import cpu_has_native_bf16

ROOT = Path(__file__).resolve().parents[2]


def add_precision_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--precisions`` (default: fp32, and bf16 where native) and ``--memory`` (peak RSS of ``what``)."""
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=["fp32", "bf16"],
        help="default: fp32, and bf16 where this CPU computes it natively",
    )
    parser.add_argument(
        "--memory", action="store_true", help=f"also the peak RSS of {what} (fresh processes)"
    )


def chosen_precisions(args: argparse.Namespace) -> list[str]:
    """``--precisions``, or fp32 plus bf16 where this CPU computes bf16 natively."""
    return args.precisions or (["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"])


def peak_rss_mib(code: str) -> float:
    """Peak RSS (MiB) of a fresh ``python -c code`` run from the repository root.

    A fresh process, because ru_maxrss only grows: in the benchmark's own process it
    would report the largest earlier measurement.
    """
    probe = f"{code}\nimport resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return int(out.stdout.split()[-1]) / 1024  # ru_maxrss is KiB on Linux
