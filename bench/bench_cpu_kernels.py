"""Two CPU kernels of a training step, each against the one torch would use.

Attention: torch's fused kernel (SDPA) against batched matmuls, forward and backward. In bf16 the fused kernel runs one small oneDNN matrix product per sentence, head and block,
and at translation lengths the calls' overhead is most of its time; batched matmuls make one
call per product but form the (B, h, T, S) weights. ``model.CPU_BF16_MATMUL_MAX_KEYS`` is
where the two cross. This measures both at token-bucket shapes (about 2000 tokens a batch,
8 heads of ``--d-head`` (32: Multi30k; 16: the NLTK parser), a padding mask), in bf16 and
fp32, as milliseconds per forward and backward (median of rounds), with the model's own
``matmul_attention``, freed memory kept in the process as ``train`` keeps it
(``host_memory.keep_freed_memory``: otherwise every large weights tensor is faulted in again).

Dropout: ``nn.Dropout`` (its ``bernoulli_`` mask) against ``dropout.Dropout`` (a mask from
16-bit integer draws), forward and backward at the shapes of a Multi30k step (2000 x 256) and
its feed-forward (2000 x 1024), and the kept fraction of each.

    python -m bench.bench_cpu_kernels           # writes bench/results/HARDWARE/training_kernels.json
    python -m bench.bench_cpu_kernels --threads 1 --d-head 16 --out bench/results/HARDWARE/training_kernels_parsing_shape.json
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from bench.lib.hardware import cpu_model, result_path, write_result
from transformer_core.model.cpu_attention import matmul_attention
from transformer_core.model.dropout import Dropout
from transformer_core.model.transformer import CPU_BF16_MATMUL_MAX_KEYS
from transformer_core.training.host_memory import keep_freed_memory

# (sentences, tokens): Multi30k's and WMT's buckets, then long sequences (parse trees).
SHAPES = [
    (130, 15),
    (64, 31),
    (30, 66),
    (16, 128),
    (4, 128),
    (10, 200),
    (8, 256),
    (2, 500),
    (1, 782),
]
HEADS = 8
KERNELS = {
    "sdpa": lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
    "matmul": matmul_attention,
}


def milliseconds(
    kernel, batch: int, length: int, d_head: int, dtype: torch.dtype, rounds: int
) -> float:
    """Median milliseconds of one forward and backward of ``kernel`` at the shape."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(batch, HEADS, length, d_head, generator=gen, dtype=dtype).requires_grad_()
        for _ in range(3)
    )
    mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    mask[::2, ..., length - length // 4 :] = False  # every other sentence padded by a quarter
    times = []
    for i in range(rounds + 3):  # 3 rounds of warm-up
        start = time.perf_counter()
        kernel(q, k, v, mask).sum().backward()
        if i >= 3:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def dropout_row(module: torch.nn.Module, shape: tuple[int, int], rounds: int) -> dict:
    """Median milliseconds of one forward and backward of ``module`` in fp32, and the
    fraction of elements it kept."""
    x = torch.randn(*shape).requires_grad_()
    times = []
    for i in range(rounds + 3):
        start = time.perf_counter()
        module(x).sum().backward()
        if i >= 3:
            times.append((time.perf_counter() - start) * 1000)
    kept = (module(x) != 0).float().mean().item()
    return {"ms": round(statistics.median(times), 3), "kept": round(kept, 5)}


def attention_rows(d_head: int, rounds: int) -> list[dict]:
    """Every shape of ``SHAPES`` in bf16 and fp32: each kernel's milliseconds, and their ratio."""
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for batch, length in SHAPES:
            row = {"dtype": str(dtype).removeprefix("torch."), "sentences": batch, "tokens": length}
            for name, kernel in KERNELS.items():
                row[f"{name}_ms"] = round(
                    milliseconds(kernel, batch, length, d_head, dtype, rounds), 2
                )
            row["sdpa_over_matmul"] = round(row["sdpa_ms"] / row["matmul_ms"], 2)
            print(row, flush=True)
            rows.append(row)
    return rows


def dropout_rows(rounds: int) -> list[dict]:
    """torch's dropout against ours at a Multi30k step's two shapes."""
    rows = []
    for shape in ((2000, 256), (2000, 1024)):
        row = {"shape": list(shape), "p": 0.1}
        for name, module in (("torch", torch.nn.Dropout(0.1)), ("ours", Dropout(0.1))):
            row[name] = dropout_row(module.train(), shape, rounds)
        row["torch_over_ours"] = round(row["torch"]["ms"] / row["ours"]["ms"], 2)
        print(row, flush=True)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--d-head", type=int, default=32, help="d_k = d_v of each head")
    parser.add_argument("--out", default=str(result_path("training_kernels")))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    rows = attention_rows(args.d_head, args.rounds)
    dropouts = dropout_rows(args.rounds)
    result = {
        "cpu": cpu_model(),
        "threads": args.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "heads": HEADS,
        "d_head": args.d_head,
        "cpu_bf16_matmul_max_keys": CPU_BF16_MATMUL_MAX_KEYS,
        "attention": rows,
        "dropout": dropouts,
    }
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
