"""The training path of a run: compiled or eager, fixed or exact batch shapes, fp32 or bf16
compute weights, as the run's settings and the device decide them, and kept across resumes.

Each setting is ``auto`` or explicit. ``auto`` decides:

- **compile**: where compiled training was measured faster and shown to learn as eager does
  (``device.AUTO_COMPILE``), and only where the run is long enough to repay its warm-up:
  each batch width a compiled step meets costs a compilation (and on a GPU a CUDA graph's
  capture) once, so compilation pays from ``BREAK_EVEN`` steps a width on. The log line
  names the numbers;
- **batch shapes**: fixed where compiled, exact elsewhere (``device.use_fixed_shapes``);
- **compute weights**: a bf16 copy of the weights where the step is compiled on a GPU under
  bf16 (measured faster than autocast there: docs/gpu.md, "bf16 compute weights"), fp32
  weights elsewhere.

A resumed run keeps the path its checkpoint recorded for every setting that is ``auto``, as
``max_tokens: auto`` keeps its micro-batch: what ``auto`` would pick changes with the steps
left and with the code, and a run changes neither its shapes nor its arithmetic halfway. An
explicit setting is used as given (the run folder refuses shapes that differ from the
record, ``run_dir.settings_mismatch``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from transformer_core.data.shapes import FixedShapes
from transformer_core.device import compile_choice, use_fixed_shapes
from transformer_core.settings import AUTO, TrainSettings

# Per device type: (seconds of warm-up a batch width costs a compiled step, seconds a compiled
# step saves over an eager one). The H100, base at 25,000 tokens a step (docs/gpu.md): 44 s a
# shape; 79.0 ms a step eager against 40.8 ms compiled on bf16 weights.
WARM_UP = {"cuda": (44.0, 0.0790 - 0.0408)}


def break_even(device: torch.device) -> int | None:
    """Steps a batch width must be trained for its compilation to pay (None: not measured)."""
    if device.type not in WARM_UP:
        return None
    warm_up, saved = WARM_UP[device.type]
    return math.ceil(warm_up / saved)


@dataclass(frozen=True)
class TrainingPath:
    """What a run trains with: ``compile`` on or off, ``batch_shapes`` fixed or exact,
    ``compute_weights`` fp32 or bf16; ``why``: the log line's account of the compile choice."""

    compile: str
    batch_shapes: str
    compute_weights: str
    why: str = ""

    @property
    def compiled(self) -> bool:
        return self.compile == "on"

    @property
    def fixed_shapes(self) -> bool:
        return self.batch_shapes == "fixed"

    def record(self) -> dict[str, str]:
        """What a checkpoint stores (``kept`` reads it back)."""
        return {
            "compile": self.compile,
            "batch_shapes": self.batch_shapes,
            "compute_weights": self.compute_weights,
        }


def widths_met(src_lens: np.ndarray, tgt_lens: np.ndarray) -> int:
    """The batch widths of the fixed-shape ladder (``data.shapes``) that a corpus's batches
    meet: one per ladder width of its sentences' longer side, with EOS or BOS."""
    longer = np.maximum(np.asarray(src_lens), np.asarray(tgt_lens)) + 1
    return len(np.unique(FixedShapes(1).widths(longer))) if len(longer) else 0


def resolve(
    device: torch.device,
    cfg: TrainSettings,
    autocast: torch.dtype | None,
    steps: int,
    widths: int,
) -> TrainingPath:
    """The path of ``cfg`` on ``device`` under ``autocast`` (None: fp32) for a run of
    ``steps`` steps whose batches meet ``widths`` widths."""
    compiled, why = compile_choice(device, cfg.compile, "train")
    if compiled and cfg.compile == AUTO and (per_width := break_even(device)) is not None:
        needed = per_width * widths
        warm_up, saved = WARM_UP[device.type]
        numbers = (
            f"{widths} batch widths x {per_width:,} steps a width = {needed:,} steps to repay "
            f"the warm-up ({warm_up:g} s a width, {1000 * saved:.1f} ms saved a step)"
        )
        if steps < needed:
            compiled, why = False, f"{why}; eager: {steps:,} steps, fewer than {numbers}"
        else:
            why = f"{why}; {steps:,} steps, at least {numbers}"
    fixed = use_fixed_shapes(cfg.batch_shapes, compiled)
    weights = cfg.compute_weights
    if weights == AUTO:
        fast = compiled and device.type == "cuda" and autocast == torch.bfloat16
        weights = "bf16" if fast else "fp32"
    return TrainingPath("on" if compiled else "off", "fixed" if fixed else "exact", weights, why)


def recorded(payload: dict[str, Any] | None) -> dict[str, str]:
    """The path a checkpoint recorded: its ``training_path``, or for a checkpoint written before
    paths were recorded its batch shapes, and its compile choice where both were ``auto``
    (then it compiled exactly where its shapes were fixed)."""
    if not payload:
        return {}
    if "training_path" in payload:
        return dict(payload["training_path"])
    fixed = bool(payload.get("data", {}).get("fixed_shapes", False))
    record = {"batch_shapes": "fixed" if fixed else "exact"}
    settings = payload.get("train_config", {})
    if settings.get("compile") == AUTO and settings.get("batch_shapes") == AUTO:
        record["compile"] = "on" if fixed else "off"
    return record


def kept(path: TrainingPath, cfg: TrainSettings, record: dict[str, str]) -> TrainingPath:
    """``path`` with each setting that ``cfg`` leaves ``auto`` taken from ``record`` (a
    resumed run's, ``recorded``), and the log line saying so."""
    changes = {
        name: record[name]
        for name in ("compile", "batch_shapes", "compute_weights")
        if getattr(cfg, name) == AUTO and name in record and record[name] != getattr(path, name)
    }
    if not changes:
        return path
    said = ", ".join(f"{name} {value}" for name, value in changes.items())
    why = path.why if "compile" not in changes else "--compile auto: kept from the run"
    return dataclasses.replace(path, **changes, why=f"{why}; resumed as recorded: {said}")
