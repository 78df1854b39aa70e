"""What a torch.profiler profile says: the CUDA kernels by kind of work, the share of the span
in which the GPU sat idle and the kernels that took the most; the host's operators, its waits
for the device, and its time by Python function (``bench.profile_command``, the GPU section of
``bench.bench_train``)."""

from __future__ import annotations

import torch

# Host calls that wait for the device: a synchronization, or a copy the host reads.
WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "Memcpy DtoH")


# What a kernel's name says it does, the first match winning: attention before matrix
# products (the memory-efficient attention kernels are CUTLASS's), inductor's matrix-product
# templates before its other (fused, memory-bound) kernels.
KERNEL_KINDS = (
    ("attention", ("flash", "fmha", "attention")),
    ("matrix product", ("nvjet", "gemm", "cutlass", "cublas", "xmma", "triton_tem")),
    ("optimizer", ("multi_tensor_apply", "adam")),
    ("compiled (inductor)", ("triton_",)),
    ("softmax", ("softmax",)),
    ("copy or cast", ("copy",)),
)
OTHER_KIND = "other elementwise or reduction"


def kernel_kind(name: str) -> str:
    """The kind of work of a CUDA kernel named ``name`` (``KERNEL_KINDS``)."""
    lower = name.lower()
    return next(
        (kind for kind, marks in KERNEL_KINDS if any(mark in lower for mark in marks)), OTHER_KIND
    )


def kernel_summary(events, steps: int = 1) -> dict:
    """The CUDA kernels among profiler ``events`` (not the annotations of regions on the GPU's
    timeline, such as the optimizer's step): their count (per step, of ``steps``), the span from
    the first kernel's start to the last one's end, the share of it in which no kernel ran
    (against the union of their intervals), their GPU time per step by kind of work
    (``kernel_kind``), and the 10 that took the most time."""
    kernels = [
        e
        for e in events
        if e.device_type == torch.autograd.DeviceType.CUDA
        and not getattr(e, "is_user_annotation", False)
    ]
    intervals = sorted((e.time_range.start, e.time_range.end) for e in kernels)
    busy, end = 0.0, float("-inf")
    for start, stop in intervals:  # the union of the intervals
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    span = intervals[-1][1] - intervals[0][0] if intervals else 0.0
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        entry = by_name.setdefault(e.name, [0.0, 0])
        entry[0] += e.time_range.end - e.time_range.start
        entry[1] += 1
    top = sorted(by_name.items(), key=lambda item: -item[1][0])[:10]
    by_kind: dict[str, float] = {}
    for name, (total, _) in by_name.items():
        kind = kernel_kind(name)
        by_kind[kind] = by_kind.get(kind, 0.0) + total
    return {
        "steps": steps,
        "kernels": len(kernels),
        "kernels_per_step": round(len(kernels) / steps, 1),
        "span_ms": round(span / 1000, 2),
        "gpu_busy_ms": round(busy / 1000, 2),
        "gpu_idle_share": round(1 - busy / span, 4) if span else None,
        "by_kind": {
            kind: {"ms_per_step": round(total / 1000 / steps, 2), "share": round(total / busy, 4)}
            for kind, total in sorted(by_kind.items(), key=lambda item: -item[1])
        },
        "top_kernels": [
            {
                "name": name[:120],
                "ms": round(total / 1000, 2),
                "share": round(total / busy, 4),
                "calls": calls,
            }
            for name, (total, calls) in top
        ],
    }


def host_summary(prof, top: int = 15) -> dict:
    """The operators with the most self CPU time, and the host's waits for the device."""
    averages = prof.key_averages()
    rows = sorted(averages, key=lambda a: -a.self_cpu_time_total)[:top]
    waits = [a for a in averages if any(w in a.key for w in WAITS)]
    return {
        "top_host_operators": [
            {
                "name": a.key[:120],
                "self_cpu_ms": round(a.self_cpu_time_total / 1000, 2),
                "calls": a.count,
            }
            for a in rows
        ],  # fmt: skip
        "device_waits": [
            {"name": a.key[:120], "cpu_ms": round(a.cpu_time_total / 1000, 2), "calls": a.count}
            for a in waits
        ],
    }


def python_host_time(events, steps: int = 1, top: int = 25) -> list[dict]:
    """From the events of a profile taken ``with_stack=True``: the Python functions of the
    training thread (the one that ran ``train_step``) that took the most host time, inclusive
    of what they called, per step of ``steps``, with their calls per step. The operators' own
    times leave out the Python between them: where a step's host time goes when the GPU waits
    for the host."""
    python = [e for e in events if getattr(e, "is_python_function", False)]
    threads = {e.thread for e in python if e.name.endswith(": train_step")}
    totals: dict[str, list[float]] = {}
    for e in python:
        if e.thread in threads:
            entry = totals.setdefault(e.name, [0.0, 0])
            entry[0] += e.time_range.end - e.time_range.start
            entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:top]
    return [
        {
            "name": name[:120],
            "ms_per_step": round(total / 1000 / steps, 3),
            "calls_per_step": round(calls / steps, 1),
        }
        for name, (total, calls) in ranked
    ]
