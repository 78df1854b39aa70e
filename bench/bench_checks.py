"""What the integrity checks cost: per checkpoint written and read, per data load.

- **checkpoints** of the base and big shapes (37,000 pieces, fp32 weights and Adam's two
  moments, as training writes them): seconds to write one (``save_checkpoint``, its
  checksum included) and to read one (``load_checkpoint``: checksum verified, weights
  checked finite), and how much of each the checks take (``tensor_checksums``,
  ``check_finite``, timed alone on the same payload).
- **binarized data**: seconds to open a split (``ParallelDataset``) whose offsets, lengths
  and token ids are verified, and the verification alone (``dataset._verify``), per
  100M tokens, on a synthetic split of newstest-like lengths.

Where the files go: ``--dir`` (default: a temporary folder; the big checkpoint is
about 2.6 GB). Writes ``bench/results/HARDWARE/integrity_checks_cost.json`` (``--out``).

    python -m bench.bench_checks [--quick]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.lib.hardware import cpu_model, result_path, write_result
from transformer_core.data import dataset
from transformer_core.data.binarized import BinarizedWriter, split_files
from transformer_core.model.checkpoint import (
    check_finite,
    load_checkpoint,
    save_checkpoint,
    tensor_checksums,
)
from transformer_core.model.config import model_config
from transformer_core.model.transformer import Transformer


def timed(fn, repeats: int = 3) -> float:
    """The best of ``repeats`` wall times of ``fn()``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def checkpoint_costs(name: str, folder: Path, repeats: int) -> dict:
    """Write and read one training checkpoint of preset ``name``; the checks' share."""
    cfg = model_config(name, vocab_size=37000)
    model = Transformer(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    model(torch.ones(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.long)).sum().backward()
    optimizer.step()  # Adam's moments exist, as in a training checkpoint
    path = folder / f"{name}.pt"
    state = {"step": 1, "optimizer": optimizer.state_dict()}
    write = timed(lambda: save_checkpoint(path, cfg, model.state_dict(), **state), repeats)
    read = timed(lambda: load_checkpoint(path), repeats)
    payload = load_checkpoint(path)
    checksum = timed(lambda: tensor_checksums(payload), repeats)
    finite = timed(lambda: check_finite(payload["model"], path), repeats)
    result = {
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "write_s": round(write, 3),
        "read_s": round(read, 3),
        "checksum_s": round(checksum, 3),
        "finite_check_s": round(finite, 3),
        "checks_share_of_write": round(checksum / write, 3),
        "checks_share_of_read": round((checksum + finite) / read, 3),
    }
    path.unlink()
    return result


def data_costs(folder: Path, sentences: int, repeats: int) -> dict:
    """Open a synthetic split (newstest-like lengths, 37,000 pieces); the verification's share."""
    rng = np.random.default_rng(2014)
    lengths = np.clip(rng.lognormal(np.log(22), 0.5, sentences), 3, 80).astype(int)
    prefix = folder / "split"
    with BinarizedWriter(prefix, 37000) as writer:
        for n in lengths:
            ids = rng.integers(4, 37000, n).tolist()
            writer.add(ids, ids)
    tokens = int(lengths.sum())
    opened = timed(lambda: dataset.ParallelDataset(prefix), repeats)
    split = dataset.ParallelDataset(prefix)
    files = split_files(prefix)

    def verify() -> None:
        for side, lens in (("src", split.src_lens), ("tgt", split.tgt_lens)):
            dataset._verify(
                files, side, split._ids[side], split._offsets[side], lens, split.vocab_size
            )

    checks = timed(verify, repeats)
    per = 1e8 / (2 * tokens)
    return {
        "sentences": sentences,
        "tokens_per_side": tokens,
        "open_s": round(opened, 4),
        "verify_s": round(checks, 4),
        "verify_s_per_100m_tokens": round(checks * per, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=result_path("integrity_checks_cost"))
    parser.add_argument("--dir", type=Path, help="folder for the files (default: a temporary one)")
    parser.add_argument("--quick", action="store_true", help="base only, 100,000 sentences")
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        presets = ["base"] if args.quick else ["base", "big"]
        results = {
            "cpu": cpu_model(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "checkpoints": {name: checkpoint_costs(name, folder, 3) for name in presets},
            "data": data_costs(folder, 100_000 if args.quick else 1_000_000, 3),
        }
    write_result(args.out, results, indent=2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
