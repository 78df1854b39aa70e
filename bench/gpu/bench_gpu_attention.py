"""Attention at the training step's shapes on a GPU: which kernel, and whether packing pays.

At fixed batch shapes (``data/shapes.py``) a micro-batch of 25,000 target tokens is a few
hundred rows of 16 to 128 positions, and attention, whose FLOPs are few at such lengths, took
8 ms of base's 41 ms step and 16 ms of big's 85 ms on an H100 (docs/gpu.md). This times, in
bf16, forward and backward of the step's three kinds of attention (the encoder's over padded
keys, the decoder's causal self-attention, cross-attention over padded sources) at base's and
big's heads, with each of SDPA's kernels that takes the case (flash: no mask; memory-efficient
and cuDNN: a mask; the model today lets SDPA choose among flash and memory-efficient), and
with ``varlen_attn`` over the same sentences packed end to end (no padding, no mask: what
packed micro-batches would run). Sentence lengths are drawn between 3/4 of the width and the
width (``--lengths 24 31`` as bench_train's one-width task), the same for every kernel.

    python -m bench.gpu.bench_gpu_attention --out gpu_out/attention_gpu.json   # on a CUDA machine
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.lib.hardware import write_result

HEADS = {"base": 8, "big": 16}  # d_k = 64 in both
WIDTHS = [16, 32, 64, 128]
TOKENS = 25_000  # a micro-batch's slots
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def sentence_lengths(rows: int, low: int, high: int, seed: int = 0) -> torch.Tensor:
    """``rows`` lengths drawn uniformly from [low, high]."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, (rows,), generator=gen)


def key_mask(lengths: torch.Tensor, width: int, device: torch.device) -> torch.Tensor:
    """(B, 1, 1, width), True on each row's real keys: the model's padding mask."""
    return (torch.arange(width) < lengths[:, None])[:, None, None, :].to(device)


def cumulative(lengths: torch.Tensor, device: torch.device) -> torch.Tensor:
    """varlen_attn's cumulative lengths: (rows + 1,) int32, from 0."""
    return F.pad(lengths.cumsum(0), (1, 0)).to(device, torch.int32)


def packed(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, h, W, d) padded rows -> (sum of lengths, h, d): the real positions end to end."""
    real = torch.arange(x.size(2), device=x.device) < lengths.to(x.device)[:, None]
    return x.transpose(1, 2)[real]


def time_ms(run, repeats: int, device: torch.device) -> float:
    """Median milliseconds of ``run`` (forward and backward) over ``repeats``, after 2 warm-ups
    (and the checked run before): CUDA events on a GPU, the host's clock on a CPU."""
    for _ in range(2):
        run()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            run()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            run()
            times.append(1000 * (time.perf_counter() - begin))
    return round(sorted(times)[len(times) // 2], 3)


@dataclass
class Case:
    """One width's inputs, the same for every kernel: bf16 queries, keys, values and the
    output's gradient, padded (B, h, W, d) with the padding mask, and packed end to end
    with varlen_attn's cumulative lengths."""

    width: int
    lens: torch.Tensor
    padded: tuple[torch.Tensor, ...]  # q, k, v, grad
    mask: torch.Tensor
    packed: tuple[torch.Tensor, ...]  # q, k, v, grad of the real positions
    cu: torch.Tensor


def make_case(model: str, width: int, lengths: tuple[int, int], device, tokens: int) -> Case:
    """``tokens // width`` rows of ``width`` at ``model``'s heads, lengths drawn from ``lengths``."""
    rows = tokens // width
    lens = sentence_lengths(rows, *lengths)
    gen = torch.Generator(device=device).manual_seed(1)
    q, k, v = (
        torch.randn(rows, HEADS[model], width, 64, device=device, generator=gen)
        .bfloat16()
        .requires_grad_()
        for _ in range(3)
    )
    grad = torch.randn_like(q)
    flat = tuple(packed(t.detach(), lens).requires_grad_() for t in (q, k, v, grad))
    return Case(width, lens, (q, k, v, grad), key_mask(lens, width, device), flat,
                cumulative(lens, device))  # fmt: skip


def kernel_runs(case: Case, causal: bool) -> dict:
    """Each kernel's forward and backward on ``case``: SDPA's that take it (flash: no mask),
    and varlen_attn over the packed sentences where this torch has it."""
    q, k, v, grad = case.padded
    attn_mask = None if causal else case.mask
    runs = {}
    for name, backend in BACKENDS.items():
        if name == "flash" and attn_mask is not None:
            continue  # flash takes no mask

        def sdpa(backend=backend):
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=causal)
            torch.autograd.grad(out, (q, k, v), grad)
            return out

        runs[name] = sdpa
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return runs
    # Causality is a window in recent torch, a flag in earlier releases.
    if "window_size" in inspect.signature(varlen_attn).parameters:
        how = {"window_size": (-1, 0) if causal else (-1, -1)}
    else:
        how = {"is_causal": causal}
    pq, pk, pv, pgrad = case.packed

    def varlen():
        out = varlen_attn(pq, pk, pv, case.cu, case.cu, case.width, case.width, **how)
        torch.autograd.grad(out, (pq, pk, pv), pgrad)
        return out

    runs["varlen, packed"] = varlen
    return runs


def timed_row(run, row: dict, want: torch.Tensor, case: Case, repeats: int, device) -> dict:
    """``row`` with the kernel's time and its largest error against ``want`` on the real
    positions, or why it did not run."""
    try:
        out = run().detach().float()
        ms = time_ms(run, repeats, device)
    except (RuntimeError, TypeError, ValueError) as error:  # a kernel that does not take the case
        row["not_run"] = str(error).splitlines()[0][:160]
        return row
    out = out if out.dim() == 3 else packed(out, case.lens)
    row |= {"real_tokens": int(case.lens.sum()), "ms_forward_backward": ms}
    row["max_abs_error"] = round(float((out - want).abs().max()), 4)
    return row


def case_rows(
    model: str,
    width: int,
    lengths: tuple[int, int],
    repeats: int,
    device: torch.device,
    tokens: int = TOKENS,
) -> list[dict]:
    """Every kernel's time for each kind of attention at one width, and its largest error
    against an fp32 reference on the real positions; a kernel that does not take the case
    (or the device) is recorded as not run, saying why."""
    case = make_case(model, width, lengths, device, tokens)
    q, k, v, _ = case.padded
    results = []
    for kind, causal in (("encoder self / cross", False), ("decoder self (causal)", True)):
        attn_mask = None if causal else case.mask
        runs = kernel_runs(case, causal)
        with sdpa_kernel([SDPBackend.MATH]), torch.no_grad():  # the reference, in fp32
            reference = F.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), attn_mask, is_causal=causal
            )
        want = packed(reference, case.lens)  # the real positions, against the padded reference
        for name, run in runs.items():
            row = {"model": model, "width": width, "rows": q.size(0), "kind": kind, "kernel": name}
            row = timed_row(run, row, want, case, repeats, device)
            print(json.dumps(row), flush=True)
            results.append(row)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["base", "big"], choices=list(HEADS))
    parser.add_argument("--widths", nargs="+", type=int, default=WIDTHS)
    parser.add_argument(
        "--lengths",
        type=int,
        nargs=2,
        default=None,
        metavar=("LOW", "HIGH"),
        help="sentence lengths (default: 3/4 of each width to the width)",
    )
    parser.add_argument("--repeats", type=int, default=20, help="timed runs, median (default: 20)")
    parser.add_argument(
        "--tokens", type=int, default=TOKENS, help="slots of a micro-batch (default: 25,000)"
    )
    parser.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu: a check of this script (varlen_attn and most kernels do not run there)",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_attention: needs a CUDA GPU (or --device cpu)", file=sys.stderr)
        return 2
    rows = []
    for model in args.models:
        for width in args.widths:
            lengths = tuple(args.lengths or (width * 3 // 4, width))
            rows += case_rows(model, width, lengths, args.repeats, device, args.tokens)
    name = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor()
    result = {
        "bench": "gpu_attention",
        "torch": torch.__version__,
        "device": name or "cpu",
        "tokens_per_micro_batch": args.tokens,
        "rows": rows,
    }
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
