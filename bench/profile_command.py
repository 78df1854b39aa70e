"""A ``transformer-core`` command under torch.profiler: where its time goes, host and device.

Runs the command in this process (``transformer_core.cli.main``) inside ``torch.profiler``
and writes its wall time; the operators that took the most host time (self CPU time, calls);
the host's waits for the device (synchronizations and device-to-host copies, with their
count and time); and, on a GPU, the kernels: how many, the share of the span in which none
ran, their GPU time by kind of work, and the 10 that took the most. Made to find where a
decode's step goes on a GPU (docs/notes/gpu_history.md: the Multi30k test decode at 75 ms a step), and
usable for any command:

    python -m bench.profile_command --out translate_profile.json -- translate --checkpoint ...

Writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.lib.hardware import write_result
from bench.lib.profiles import host_summary, kernel_summary
from transformer_core.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="where to write the JSON summary")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --, e.g. -- translate --checkpoint ...")
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        status = cli_main(command)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    result = {
        "command": command,
        "status": status,
        "wall_s": round(time.perf_counter() - start, 2),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        **host_summary(prof),
        "kernels": kernel_summary(prof.events()) if torch.cuda.is_available() else None,
    }
    write_result(args.out, result)
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
