"""Benchmark of the sharded data stage: speed-up from shards, flat memory, the EN-FR projection.

A generated parallel corpus with WMT-like sentence lengths and characters (see
``generate``; written to a temporary folder, never committed) goes through the
commands the workflow's data rules run, each stage as its own process(es), the
shards of a stage at the same time (as Snakemake runs them with ``--cores N``)::

    shards split -> prepare (per shard) -> shards report -> spm train
                 -> binarize (per shard: sentencepiece encode + write) -> shards merge

It measures:

1. pairs/s of split + prepare + binarize + merge (+ report) with 1 shard and with
   2 shards on the same ``--pairs`` corpus (the speed-up; the goal on a
   2-core machine is 1.8x). spm train runs once per corpus (its sample is bounded
   and does not depend on the shards) and is reported on its own.
2. The peak RSS of every process of every stage (its VmHWM), with 1 shard, at
   ``--small-pairs`` and at ``--pairs``: streaming stages hold it flat (the goal:
   within 10%).
3. A projection for WMT14 EN-FR (36M pairs, ``pairs.en_fr.shards`` of
   config/config.yaml) on 8 and 32 cores: each stage's time as process start +
   pairs x seconds per pair, fitted to its 1-shard times at the two sizes; the
   parallel efficiency of 2 shards on 2 cores; split, report and merge alone,
   prepare and binarize in waves of ``cores`` shards. spm train, one job bounded
   by its sample, is left out of that sum and reported as measured.

Usage, from the repository root (``bench`` is a package):
python -m bench.bench_shards [--quick] [--pairs N] [--small-pairs N] [--out FILE.json]
(default output: bench/results/HARDWARE/data_shards.json). ``--quick`` uses 20,000 and
5,000 pairs and a small vocabulary, to check that the benchmark runs (a minute).
The full run (2M and 0.5M pairs, vocabulary 32000) takes about half an hour on 2 cores
and needs about 3 GB in the temporary folder; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.lib.hardware import machine, result_path, write_result
from bench.lib.shard_corpus import generate
from transformer_core.data import shards

REPO = Path(__file__).resolve().parents[1]
EN_FR_PAIRS = 36_000_000
PROJECTED_CORES = (8, 32)
STAGES = ("split", "prepare", "report", "spm_train", "binarize", "merge")
THROUGHPUT_STAGES = ("split", "prepare", "report", "binarize", "merge")

# Each command runs as ``transformer-core`` would, then writes its peak RSS (VmHWM: the
# high-water mark of its own memory since exec) to $BENCH_RSS_FILE. (``ru_maxrss`` of
# ``os.wait4`` would not do: Linux counts the forking parent's RSS at the exec in it.)
CHILD = """
import os, sys
from transformer_core.cli import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    hwm = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
with open(os.environ["BENCH_RSS_FILE"], "w") as out:
    out.write(hwm)
sys.exit(code)
"""


def run_parallel(commands: list[list[str]], logs: Path) -> dict:
    """Start every command at once; wait for all. Wall time and each process's peak RSS."""
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    procs = []
    for i, command in enumerate(commands):
        env = {**os.environ, "BENCH_RSS_FILE": str(logs / f"{i}.rss_kib")}
        with open(logs / f"{i}.log", "w") as log:
            procs.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env))
    for i, proc in enumerate(procs):
        if proc.wait() != 0:
            raise RuntimeError(f"{' '.join(map(str, commands[i][3:6]))} failed; see {logs}/{i}.log")
    seconds = time.perf_counter() - start
    peaks = [int((logs / f"{i}.rss_kib").read_text()) / 1024 for i in range(len(commands))]
    return {
        "seconds": seconds,
        "processes": len(commands),
        "peak_rss_mib": max(peaks),
        "peak_rss_mib_each": peaks,
    }


def cli(*args: object) -> list[str]:
    return [sys.executable, "-c", CHILD, *map(str, args)]


def prepare_commands(raw: tuple[Path, Path], index: Path, prepared: dict, count: int) -> list:
    """``prepare`` of each shard (``prepared``: its name's source, target and report files)."""
    return [
        cli("prepare", "--src-in", raw[0], "--tgt-in", raw[1], "--shard-index", index,
            "--shard", i, "--shards", count, "--src-out", files[0], "--tgt-out", files[1],
            "--report", files[2], "--src-lang", "en", "--tgt-lang", "fr")
        for i, files in enumerate(prepared.values())
    ]  # fmt: skip


def binarize_commands(spm: Path, prepared: dict, work: Path) -> list:
    """``binarize`` of each prepared shard, one thread each, into ``work/bin``."""
    return [
        cli("binarize", "--spm", spm, "--src", files[0], "--tgt", files[1],
            "--out-prefix", work / "bin" / name, "--threads", 1)
        for name, files in prepared.items()
    ]  # fmt: skip


def pipeline(
    raw: tuple[Path, Path],
    count: int,
    work: Path,
    spm: Path | None,
    vocab_size: int,
    sample_size: int,
) -> tuple[dict, Path]:
    """The data rules for ``count`` shards; per stage results, and the spm model used
    (trained here when ``spm`` is None)."""
    work.mkdir(parents=True)
    index, logs = work / "index.json", work / "logs"
    names = [shards.name(i, count) for i in range(count)]
    prepared = {n: (work / f"{n}.src", work / f"{n}.tgt", work / f"{n}.report.json") for n in names}
    stages = {}
    stages["split"] = run_parallel(
        [cli("shards", "split", "--src", raw[0], "--tgt", raw[1], "--shards", count, "--out", index)],
        logs / "split",
    )  # fmt: skip
    stages["prepare"] = run_parallel(
        prepare_commands(raw, index, prepared, count), logs / "prepare"
    )
    report = work / "train.report.json"
    stages["report"] = run_parallel(
        [cli("shards", "report", "--reports", *(prepared[n][2] for n in names), "--out", report)],
        logs / "report",
    )
    if spm is None:
        spm = work / "spm.model"
        texts = [prepared[n][0] for n in names] + [prepared[n][1] for n in names]
        stages["spm_train"] = run_parallel(
            [cli("spm", "train", "--input", *texts, "--vocab-size", vocab_size,
                 "--sample-size", sample_size, "--model-prefix", work / "spm")],
            logs / "spm_train",
        )  # fmt: skip
    stages["binarize"] = run_parallel(binarize_commands(spm, prepared, work), logs / "binarize")
    stages["merge"] = run_parallel(
        [cli("shards", "merge", "--parts", *(work / "bin" / n for n in names),
             "--out-prefix", work / "train", "--prepare-report", report)],
        logs / "merge",
    )  # fmt: skip
    counts = json.loads(report.read_text())
    for stage in stages.values():
        stage["pairs_per_second"] = counts["pairs_in"] / stage["seconds"]
    seconds = sum(stages[s]["seconds"] for s in THROUGHPUT_STAGES)
    result = {
        "shards": count,
        "pairs_in": counts["pairs_in"],
        "pairs_out": counts["pairs_out"],
        "removed": counts["removed"],
        "stages": stages,
        "seconds_without_spm_train": seconds,
        "pairs_per_second": counts["pairs_in"] / seconds,
    }
    return result, spm


def linear_fit(small: dict, large: dict, stage: str) -> tuple[float, float]:
    """(seconds at 0 pairs: the start of a process; seconds per pair) of a 1-shard stage,
    from its times at the two corpus sizes."""
    (p0, t0), (p1, t1) = ((r["pairs_in"], r["stages"][stage]["seconds"]) for r in (small, large))
    per_pair = max(t1 - t0, 0.0) / (p1 - p0)
    return max(t0 - per_pair * p0, 0.0), per_pair


def projection(small: dict, one: dict, two: dict, en_fr_shards: int) -> dict:
    """Time of the EN-FR data stage on 8 and 32 cores (see the module docstring, 3.).

    Each stage's time is start + pairs x seconds per pair (``linear_fit``); a shard's
    prepare and binarize run ``efficiency`` slower when all cores are busy, as measured
    with 2 shards on 2 cores (shared memory bandwidth, caches, turbo)."""
    parallel = ("prepare", "binarize")
    efficiency = sum(one["stages"][s]["seconds"] for s in parallel) / (
        2 * sum(two["stages"][s]["seconds"] for s in parallel)
    )
    fits = {stage: linear_fit(small, one, stage) for stage in THROUGHPUT_STAGES}
    shard_pairs = EN_FR_PAIRS / en_fr_shards
    serial = sum(fits[s][0] + fits[s][1] * EN_FR_PAIRS for s in ("split", "report", "merge"))
    per_shard = sum(fits[s][0] + fits[s][1] * shard_pairs / efficiency for s in parallel)
    result = {
        "pairs": EN_FR_PAIRS,
        "shards": en_fr_shards,
        "parallel_efficiency_2_shards": efficiency,
        "one_core_pairs_per_second": {
            s: 1 / per_pair if per_pair else None for s, (_, per_pair) in fits.items()
        },
        "process_start_seconds": {s: start for s, (start, _) in fits.items()},
        "serial_seconds": serial,
        "seconds_per_shard": per_shard,
        "spm_train_seconds_measured": one["stages"]["spm_train"]["seconds"],
        "note": "split, report and merge alone; prepare and binarize in waves of `cores` "
        "shards; spm train (one job, bounded by its sample) is not included",
    }
    for cores in PROJECTED_CORES:
        seconds = serial + math.ceil(en_fr_shards / cores) * per_shard
        result[f"{cores}_cores"] = {"seconds": seconds, "minutes": seconds / 60}
    return result


def memory(small: dict, large: dict) -> dict:
    """Peak RSS per stage at both sizes, and whether it stays within 10%."""
    out = {}
    for name in STAGES:
        a, b = small["stages"][name]["peak_rss_mib"], large["stages"][name]["peak_rss_mib"]
        out[name] = {
            f"{small['pairs_in']}_pairs": a,
            f"{large['pairs_in']}_pairs": b,
            "ratio": b / a,
            "flat_within_10_percent": abs(b / a - 1) <= 0.10,
        }
    return out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: check it runs")
    parser.add_argument("--pairs", type=int, help="the large corpus (default 2,000,000)")
    parser.add_argument("--small-pairs", type=int, help="the small corpus (default 500,000)")
    parser.add_argument("--vocab-size", type=int, help="BPE vocabulary (default 32000, EN-FR's)")
    parser.add_argument(
        "--spm-sample-size",
        type=int,
        help="lines sampled for spm train (default 200,000: below both corpora, so bounded)",
    )
    parser.add_argument("--tmp", type=Path, help="folder for the corpus (default: system temp)")
    parser.add_argument("--out", type=Path, default=result_path("data_shards"))
    args = parser.parse_args()
    quick = args.quick
    args.pairs = args.pairs or (20_000 if quick else 2_000_000)
    args.small_pairs = args.small_pairs or (5_000 if quick else 500_000)
    args.vocab_size = args.vocab_size or (1000 if quick else 32_000)
    args.spm_sample_size = args.spm_sample_size or (8_000 if quick else 200_000)
    return args


def corpora(tmp: Path, pairs: int, small: int) -> tuple[tuple[Path, Path], tuple[Path, ...]]:
    """The generated corpus of ``pairs`` pairs, and its first ``small`` pairs beside it."""
    (tmp / "large").mkdir()
    raw = generate(tmp / "large", pairs)
    (tmp / "small").mkdir()
    small_raw = tuple(tmp / "small" / path.name for path in raw)
    for path, head in zip(raw, small_raw, strict=True):  # the first small-pairs lines
        with open(path, encoding="utf-8") as source, open(head, "w", encoding="utf-8") as out:
            out.writelines(line for _, line in zip(range(small), source, strict=False))
    return raw, small_raw


def measure(args: argparse.Namespace, results: dict) -> None:
    """The three pipelines (the small corpus on 1 shard, the large on 1 and on 2) into
    ``results``, with the corpus's generation and whether 1 and 2 shards wrote the same bytes."""
    pairs, vocab, sample = args.pairs, args.vocab_size, args.spm_sample_size
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="bench_shards.") as tmp_name:
        tmp = Path(tmp_name)
        start = time.perf_counter()
        raw, small_raw = corpora(tmp, pairs, args.small_pairs)
        results["generate_seconds"] = time.perf_counter() - start
        results["text_bytes"] = sum(path.stat().st_size for path in raw)
        print(f"generated {pairs} pairs in {results['generate_seconds']:.0f} s", file=sys.stderr)
        small_run, _ = pipeline(small_raw, 1, tmp / "small_1", None, vocab, sample)
        print(f"{args.small_pairs} pairs, 1 shard: done", file=sys.stderr)
        one, spm = pipeline(raw, 1, tmp / "large_1", None, vocab, sample)
        print(f"{pairs} pairs, 1 shard: {one['pairs_per_second']:.0f} pairs/s", file=sys.stderr)
        two, _ = pipeline(raw, 2, tmp / "large_2", spm, vocab, sample)
        print(f"{pairs} pairs, 2 shards: {two['pairs_per_second']:.0f} pairs/s", file=sys.stderr)
        identical = all(
            (tmp / "large_1" / f"train.{key}").read_bytes()
            == (tmp / "large_2" / f"train.{key}").read_bytes()
            for key in ("src.bin", "src.idx", "src.len", "tgt.bin", "tgt.idx", "tgt.len")
        )
    results["runs"] = {"small_1_shard": small_run, "large_1_shard": one, "large_2_shards": two}
    results["speedup_2_shards"] = two["pairs_per_second"] / one["pairs_per_second"]
    results["binarized_bytes_identical_1_vs_2_shards"] = identical


def summary(results: dict) -> dict:
    """What the run found, in a few numbers: the speed-up, peak RSS ratios, the projection."""
    one, two = results["runs"]["large_1_shard"], results["runs"]["large_2_shards"]
    return {
        "speedup_2_shards": results["speedup_2_shards"],
        "pairs_per_second": {
            "1_shard": one["pairs_per_second"],
            "2_shards": two["pairs_per_second"],
        },
        "peak_rss_ratio": {k: v["ratio"] for k, v in results["peak_rss"].items()},
        "en_fr_minutes": {
            f"{c}_cores": results["projection_wmt14_en_fr"][f"{c}_cores"]["minutes"]
            for c in PROJECTED_CORES
        },
        "identical": results["binarized_bytes_identical_1_vs_2_shards"],
    }


def main() -> int:
    args = parse_args()
    en_fr = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["pairs"]["en_fr"]
    results: dict = {
        "benchmark": "bench_shards",
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "settings": {
            "pairs": args.pairs,
            "small_pairs": args.small_pairs,
            "vocab_size": args.vocab_size,
            "spm_sample_size": args.spm_sample_size,
        },  # fmt: skip
    }
    measure(args, results)
    runs = results["runs"]
    results["peak_rss"] = memory(runs["small_1_shard"], runs["large_1_shard"])
    results["projection_wmt14_en_fr"] = projection(
        runs["small_1_shard"], runs["large_1_shard"], runs["large_2_shards"],
        en_fr.get("shards", shards.UNKNOWN_SIZE_SHARDS),
    )  # fmt: skip
    write_result(args.out, results, indent=2)
    print(json.dumps(summary(results), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
