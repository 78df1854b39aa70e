"""CPU training steps with and without ``host_memory.keep_freed_memory``, in alternating processes.

The setting is process-wide (glibc's malloc), so each measurement is a fresh process: the
Multi30k shape (``shapes.SHAPES["multi30k"]``), 2000 target tokens a step (as
config/multi30k.yaml), bf16 autocast where this CPU computes it natively (else fp32),
``--threads`` threads, on ``train_runners``' synthetic corpus. Each process trains
``--warmup`` steps, then ``--steps`` timed ones, and reports target tokens per second and the
minor page faults and the CPU time (kernel and user, all threads) per timed step
(``getrusage``): page faults are the kernel's work, so its time shows their cost where the
wall clock varies from round to round. Rounds alternate the two settings so that a noisy
machine slows both alike; the medians are reported.

    python -m bench.bench_host_memory      # writes bench/results/HARDWARE/training_freed_memory.json
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.lib.hardware import cpu_model, result_path, write_result
from bench.lib.shapes import SHAPES
from bench.lib.train_runners import Ours, synthetic_corpus, train_settings
from transformer_core.device import cpu_has_native_bf16
from transformer_core.model.config import model_config
from transformer_core.training.host_memory import keep_freed_memory

ROOT = Path(__file__).resolve().parents[1]
TOKENS_PER_STEP = 2000
SETTINGS = ("default", "kept")


def measure(setting: str, threads: int, warmup: int, steps: int) -> dict:
    """One process's measurement (run as ``--child SETTING``)."""
    if setting == "kept" and not keep_freed_memory():
        raise SystemExit("keep_freed_memory did not take: this C library is not glibc")
    torch.set_num_threads(threads)
    precision = "bf16" if cpu_has_native_bf16() else "fp32"
    shape = SHAPES["multi30k"]
    cfg = model_config("base", **shape)
    with tempfile.TemporaryDirectory() as tmp:
        dataset = synthetic_corpus(Path(tmp) / "train", shape["vocab_size"], 20000)
        runner = Ours(cfg, dataset, torch.device("cpu"), train_settings(
            precision, TOKENS_PER_STEP, TOKENS_PER_STEP
        ))  # fmt: skip
        for _ in range(warmup):
            runner.step()
        before = resource.getrusage(resource.RUSAGE_SELF)
        start, tokens = time.perf_counter(), 0
        for _ in range(steps):
            tokens += runner.step()
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "setting": setting,
        "precision": precision,
        "tgt_tokens_per_s": round(tokens / seconds, 1),
        "page_faults_per_step": round((after.ru_minflt - before.ru_minflt) / steps),
        # CPU seconds a step, all threads: the kernel's (page faults are its work) and the user's
        "system_ms_per_step": round((after.ru_stime - before.ru_stime) / steps * 1000, 1),
        "user_ms_per_step": round((after.ru_utime - before.ru_utime) / steps * 1000, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def alternating_rounds(args: argparse.Namespace) -> dict[str, list[dict]]:
    """``--rounds`` rounds of a fresh process per setting, in turn: each one's measurement."""
    runs: dict[str, list[dict]] = {setting: [] for setting in SETTINGS}
    for _ in range(args.rounds):
        for setting in SETTINGS:
            command = [sys.executable, "-m", "bench.bench_host_memory", "--child", setting]
            command += ["--threads", str(args.threads), "--warmup", str(args.warmup)]
            command += ["--steps", str(args.steps)]
            output = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
            row = json.loads(output.stdout.splitlines()[-1])
            print(row, flush=True)
            runs[setting].append(row)
    return runs


def medians(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """Each setting's median of every measured quantity over its rounds."""
    keys = (
        "tgt_tokens_per_s",
        "page_faults_per_step",
        "system_ms_per_step",
        "user_ms_per_step",
        "peak_rss_mib",
    )
    return {
        setting: {key: statistics.median(row[key] for row in rows) for key in keys}
        for setting, rows in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(result_path("training_freed_memory")))
    args = parser.parse_args()
    if args.child:  # one measurement, its line read by the parent
        print(json.dumps(measure(args.child, args.threads, args.warmup, args.steps)))
        return
    runs = alternating_rounds(args)
    summary = medians(runs)
    kept, default = summary["kept"], summary["default"]
    result = {
        "cpu": cpu_model(),
        "threads": args.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "shape": "multi30k",
        "tgt_tokens_per_step": TOKENS_PER_STEP,
        "precision": runs["kept"][0]["precision"],
        "steps": args.steps,
        "median": summary,
        "kept_over_default": round(kept["tgt_tokens_per_s"] / default["tgt_tokens_per_s"], 3),
        "rounds": runs,
    }
    print(json.dumps(result["median"]), "kept / default:", result["kept_over_default"])
    write_result(args.out, result, indent=2)


if __name__ == "__main__":
    main()
