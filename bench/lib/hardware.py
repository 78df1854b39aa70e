"""Where a benchmark writes its result: ``bench/results/<hardware>/<question>.json``.

A result is named by the question it answers and filed under the machine it was measured on,
so that results of one machine compare with each other and a rerun replaces its own file. The
hardware is the GPU's model for what ran on a GPU (``h100``, ``h200``), else the CPU's kind:
its maker's line and the widest vector unit it computes with (``epyc_avx512``, ``xeon_amx``,
``epyc_avx2``), read from /proc/cpuinfo. Every bench writes its result with ``write_result``;
results record the CPU's model (``cpu_model``) and, where one may be reused, the code that made
it (``code_fingerprint``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path

from transformer_core.files import atomic_write_text

BENCH = Path(__file__).resolve().parents[1]
RESULTS = BENCH / "results"
# The widest units first: a CPU's kind is the first it has.
CPU_UNITS = (
    ("amx_bf16", "amx"),
    ("avx512_bf16", "avx512"),
    ("avx512f", "avx512"),
    ("avx2", "avx2"),
)


def cpu_kind(cpuinfo: str | None = None) -> str:
    """``epyc_avx512``, ``xeon_amx``, ``epyc_avx2``: the CPU's line and widest unit (``cpu``
    and ``generic`` where /proc/cpuinfo does not say)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    name = model.group(1) if model else ""
    line = next((tag for tag in ("epyc", "xeon") if tag in name.lower()), "cpu")
    flags_line = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    flags = set(flags_line.group(1).split()) if flags_line else set()
    unit = next((unit for flag, unit in CPU_UNITS if flag in flags), "generic")
    return f"{line}_{unit}"


def gpu_kind() -> str:
    """The CUDA GPU's model in lower case: ``NVIDIA H100 80GB HBM3`` is ``h100``."""
    import torch

    words = torch.cuda.get_device_name().split()
    return (words[1] if words[0] == "NVIDIA" and len(words) > 1 else words[0]).lower()


def result_path(question: str, device: str = "cpu", suffix: str = ".json") -> Path:
    """The result file of ``question`` measured on ``device`` (``cpu`` or ``cuda``) here."""
    hardware = gpu_kind() if device == "cuda" else cpu_kind()
    return RESULTS / hardware / f"{question}{suffix}"


def write_result(
    path: str | Path, result: dict, *, indent: int = 1, append: bool = False, quiet: bool = False
) -> None:
    """Write a benchmark's ``result`` at ``path`` (its folders made), and say so unless
    ``quiet``: as JSON indented by ``indent``, through a temporary file and a rename, so that a
    run stopped midway leaves the file whole (a bench that writes after every row keeps what it
    measured; ``files.atomic_write_text``, which writes a device or a pipe through); or, with
    ``append``, as one more line of a JSON Lines file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(result, default=str) + "\n")
    else:
        atomic_write_text(path, json.dumps(result, indent=indent) + "\n")
    if not quiet:
        print(f"wrote {path}")


def code_fingerprint(*bench_modules: str) -> str:
    """The sha256 of the package's source and of ``bench_modules`` (files under bench/): what
    a result may be reused across runs on, where nothing that made it has changed."""
    root = BENCH.parent
    files = sorted((root / "transformer_core").rglob("*.py"))
    files += [BENCH / name for name in bench_modules]
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cpu_model() -> str:
    """The CPU's model name and whether it has avx512_bf16 / amx_bf16 (from /proc/cpuinfo)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name")), platform.machine())  # fmt: skip
    flags = [flag for flag in ("avx512_bf16", "amx_bf16") if f" {flag}" in info]
    return f"{name} ({', '.join(flags) or 'no native bf16'})"


def machine() -> dict[str, object]:
    """The machine a result was measured on, as the data-stage benches record it."""
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count()}  # fmt: skip


def description(doc: str) -> str:
    """A bench's ``--help`` description: the first sentence of its module docstring, whole (its
    first line alone may stop mid-sentence)."""
    text = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=[.?])\s", text, maxsplit=1)[0]
