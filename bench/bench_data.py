"""Benchmark of the data stage: throughput and binarize memory, written as JSON.

1. Throughput (sentence pairs per second) of prepare (normalize + filter),
   binarize (sentencepiece encode + write) and the two together, on the real
   WMT training slice (``wmt_train_sample_opennmt``, 10k pairs) and on Multi30k
   train (29k pairs), each with a joint BPE 8000 model trained beforehand
   (its training time is reported separately).
2. Peak memory of binarize at two corpus sizes (Multi30k train repeated 1x and
   10x): each run is a fresh subprocess reporting its own
   ``resource.getrusage(RUSAGE_SELF).ru_maxrss``. Streaming means the two
   peaks are about equal.

Usage, from the repository root (``bench`` is a package):
python -m bench.bench_data [--quick] [--workers N] [--shared-data DIR] [--out FILE.json]
(default output: bench/results/HARDWARE/data_stage.json)
``--quick`` uses slices (seconds instead of minutes) to check the benchmark runs.
Needs ../shared/data (or --shared-data / TRANSFORMER_CORE_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.lib.hardware import machine, result_path, write_result
from bench.lib.shared_data import SHARED_DATA
from transformer_core.data import bpe
from transformer_core.data.binarized import binarize
from transformer_core.data.prepare import prepare_corpus
from transformer_core.files import read_lines
from transformer_core.settings import PrepareSettings

MEMORY_CHILD = """
import resource, sys
from transformer_core.data.binarized import binarize
header = binarize(*sys.argv[1:5])
print(header["num_sentences"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def throughput(
    name: str, src: list[str], tgt: list[str], langs: tuple[str, str], tmp: Path, workers: int
) -> dict:
    folder = tmp / name
    folder.mkdir()
    write_lines(folder / "raw.src", src)
    write_lines(folder / "raw.tgt", tgt)
    start = time.perf_counter()
    report = prepare_corpus(
        folder / "raw.src", folder / "raw.tgt", folder / "clean.src", folder / "clean.tgt",
        PrepareSettings(src_lang=langs[0], tgt_lang=langs[1]), workers=workers,
    )  # fmt: skip
    t_prepare = time.perf_counter() - start
    start = time.perf_counter()
    bpe.train([folder / "clean.src", folder / "clean.tgt"], 8000, folder / "bpe", threads=2)
    t_spm = time.perf_counter() - start
    start = time.perf_counter()
    header = binarize(
        folder / "bpe.model", folder / "clean.src", folder / "clean.tgt", folder / "train"
    )
    t_binarize = time.perf_counter() - start
    pairs = report["pairs_in"]
    return {
        "pairs_in": pairs,
        "pairs_kept": report["pairs_out"],
        "removed": report["removed"],
        "tokens": {"src": header["src_tokens"], "tgt": header["tgt_tokens"]},
        "seconds": {"prepare": t_prepare, "spm_train": t_spm, "binarize": t_binarize},
        "pairs_per_second": {
            "prepare": pairs / t_prepare,
            "binarize": header["num_sentences"] / t_binarize,
            "prepare_plus_binarize": pairs / (t_prepare + t_binarize),
        },
    }


def binarize_peak_memory(
    src: list[str], tgt: list[str], repeats: list[int], tmp: Path
) -> list[dict]:
    folder = tmp / "memory"
    folder.mkdir()
    write_lines(folder / "model.src", src)
    write_lines(folder / "model.tgt", tgt)
    bpe.train([folder / "model.src", folder / "model.tgt"], 8000, folder / "bpe", threads=2)
    results = []
    for repeat in repeats:
        write_lines(folder / f"x{repeat}.src", src * repeat)
        write_lines(folder / f"x{repeat}.tgt", tgt * repeat)
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, str(folder / "bpe.model"),
             str(folder / f"x{repeat}.src"), str(folder / f"x{repeat}.tgt"), str(folder / f"bin{repeat}")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        pairs, maxrss_kb = map(int, out.stdout.split())
        results.append(
            {
                "pairs": pairs,
                "text_bytes": (folder / f"x{repeat}.src").stat().st_size
                + (folder / f"x{repeat}.tgt").stat().st_size,
                "peak_rss_mib": maxrss_kb / 1024,
                "seconds": seconds,
            }
        )
        for side in ("src", "tgt"):
            (folder / f"x{repeat}.{side}").unlink()
    return results


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small slices, to check the benchmark runs"
    )
    parser.add_argument(
        "--shared-data",
        type=Path,
        default=SHARED_DATA,
    )
    parser.add_argument("--workers", type=int, default=1, help="prepare worker processes")
    parser.add_argument("--out", type=Path, default=result_path("data_stage"))
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    data = args.shared_data
    if not (data / "multi30k" / "train.en.gz").is_file():
        print(f"shared data not found at {data}; pass --shared-data", file=sys.stderr)
        return 2
    limit = 3000 if args.quick else None
    wmt = [
        read_lines(data / "wmt_train_sample_opennmt" / f"{s}-train.txt", limit=limit)
        for s in ("src", "tgt")
    ]
    m30k = [
        read_lines(data / "multi30k" / f"train.{lang}.gz", limit=limit) for lang in ("en", "de")
    ]
    repeats = [1, 5] if args.quick else [1, 10]

    results: dict = {
        "benchmark": "bench_data",
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "prepare_workers": args.workers,
        "throughput": {},
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results["throughput"]["wmt_train_sample_opennmt"] = throughput(
            "wmt", *wmt, ("en", "de"), tmp, args.workers
        )
        results["throughput"]["multi30k_train"] = throughput(
            "m30k", *m30k, ("en", "de"), tmp, args.workers
        )
        memory = binarize_peak_memory(*m30k, repeats, tmp)
    results["binarize_peak_memory"] = {
        "runs": memory,
        "growth_ratio_pairs": memory[-1]["pairs"] / memory[0]["pairs"],
        "growth_ratio_peak_rss": memory[-1]["peak_rss_mib"] / memory[0]["peak_rss_mib"],
    }
    print(json.dumps(results, indent=2))
    write_result(args.out, results, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
