"""Checkpoint averaging (paper section 6.1): the element-wise mean of the last N checkpoints.

The paper averaged the last 5 checkpoints of base and the last 20 of big,
written 10 minutes apart. ``average_checkpoints`` is a pure function of the
loaded checkpoint dicts (fairseq's ``average_checkpoints`` shape): it refuses
checkpoints whose model configs, parameter names or shapes differ, sums in
float64 and casts back to each tensor's own dtype. The result is a normal
checkpoint (``model_config`` + ``model``) that ``load_model`` reads.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from transformer_core.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from transformer_core.config import ModelConfig
from transformer_core.errors import UserError


def average_checkpoints(checkpoints: list[dict], names: list[str] | None = None) -> tuple[ModelConfig, dict]:
    """The model config and the mean state dict of ``checkpoints`` (loaded checkpoint dicts).

    ``names`` label the checkpoints in error messages (default: their positions).
    """
    if not checkpoints:
        raise UserError("no checkpoints to average")
    names = names or [f"checkpoint #{i + 1}" for i in range(len(checkpoints))]
    first, first_name = checkpoints[0], names[0]
    for ckpt, name in zip(checkpoints[1:], names[1:], strict=True):
        if ckpt["model_config"] != first["model_config"]:
            diff = sorted(k for k in set(first["model_config"]) | set(ckpt["model_config"])
                          if first["model_config"].get(k) != ckpt["model_config"].get(k))
            raise UserError(f"cannot average {name} with {first_name}: their model configs differ in "
                            f"{', '.join(diff)}")
        if ckpt["model"].keys() != first["model"].keys():
            extra = sorted(set(ckpt["model"]) ^ set(first["model"]))
            raise UserError(f"cannot average {name} with {first_name}: different parameters "
                            f"({', '.join(extra[:5])})")
        for key, tensor in ckpt["model"].items():
            ref = first["model"][key]
            if tensor.shape != ref.shape or tensor.dtype != ref.dtype:
                raise UserError(f"cannot average {name} with {first_name}: {key} is {tuple(tensor.shape)} "
                                f"{tensor.dtype} there and {tuple(ref.shape)} {ref.dtype} here")
    averaged = {}
    for key, ref in first["model"].items():
        if not ref.is_floating_point():  # integer buffers must agree; averaging them is meaningless
            for ckpt, name in zip(checkpoints[1:], names[1:], strict=True):
                if not torch.equal(ckpt["model"][key], ref):
                    raise UserError(f"cannot average {name} with {first_name}: integer tensor {key} differs")
            averaged[key] = ref.clone()
            continue
        total = torch.zeros(ref.shape, dtype=torch.float64)
        for ckpt in checkpoints:
            total += ckpt["model"][key].to(torch.float64)
        averaged[key] = (total / len(checkpoints)).to(ref.dtype)
    config = ModelConfig.from_dict(first["model_config"], where=f"{first_name}:model_config")
    return config, averaged


def last_checkpoints(run_dir: str | os.PathLike, n: int) -> list[Path]:
    """The newest ``n`` numbered checkpoints of a training run directory, oldest first."""
    if n < 1:
        raise UserError(f"--last must be at least 1, got {n}")
    directory = Path(run_dir) / "checkpoints"
    found = list_checkpoints(directory)
    if len(found) < n:
        raise UserError(f"{directory} holds {len(found)} checkpoint(s), {n} were asked for "
                        "(train with a larger --keep-last, or average fewer)")
    return [path for _, path in found[-n:]]


def average_files(paths: list[str | os.PathLike], out: str | os.PathLike) -> ModelConfig:
    """Average checkpoint files into ``out`` (written atomically); returns the model config."""
    loaded = [load_checkpoint(p) for p in paths]
    config, state = average_checkpoints(loaded, [str(p) for p in paths])
    save_checkpoint(out, config, state, averaged_from=[str(p) for p in paths],
                    steps=[ckpt.get("step") for ckpt in loaded])
    return config
