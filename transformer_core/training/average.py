"""Checkpoint averaging (paper section 6.1): the element-wise mean of the last N checkpoints.

The paper averaged the last 5 checkpoints of base and the last 20 of big,
written 10 minutes apart. ``average_checkpoints`` is a pure function of the
loaded checkpoint dicts (fairseq's ``average_checkpoints`` shape): it refuses
checkpoints whose model configs, parameter names or shapes differ, sums in
float64 and casts back to each tensor's own dtype. The result is a normal
checkpoint (``model_config`` + ``model``) that ``load_model`` reads.

Only checkpoints of one training run are averaged: files whose recorded
sentencepiece fingerprint (``spm_sha256``) or ``run_id`` differ are refused, and so
is the same checkpoint given twice (one file, a link to it, or a copy: same run and
step). The average records the fingerprint and run of its sources.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from transformer_core.errors import UserError
from transformer_core.files import check_not_inputs, check_output
from transformer_core.model.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from transformer_core.model.config import ModelConfig
from transformer_core.training.run_dir import RunPaths


def average_checkpoints(
    checkpoints: list[dict], names: list[str] | None = None
) -> tuple[ModelConfig, dict]:
    """The model config and the mean state dict of ``checkpoints`` (loaded checkpoint dicts).

    ``names`` label the checkpoints in error messages (default: their positions).
    """
    if not checkpoints:
        raise UserError("no checkpoints to average")
    names = names or [f"checkpoint #{i + 1}" for i in range(len(checkpoints))]
    for ckpt, name in zip(checkpoints, names, strict=True):
        if "averaged_from" in ckpt:  # its sources would count once per average they are in
            raise UserError(
                f"{name} is itself an average (of {', '.join(map(str, ckpt['averaged_from']))}): "
                "average the training checkpoints it was made from instead"
            )
    first, first_name = checkpoints[0], names[0]
    for key, what in (
        ("spm_sha256", "their data were encoded with different sentencepiece models"),
        ("run_id", "they come from different training runs"),
    ):
        for ckpt, name in zip(checkpoints[1:], names[1:], strict=True):
            if first.get(key) and ckpt.get(key) and ckpt[key] != first[key]:
                raise UserError(
                    f"cannot average {name} with {first_name}: {what} ({key} "
                    f"{ckpt[key][:12]} and {first[key][:12]})"
                )
    seen: dict[tuple, str] = {}
    for ckpt, name in zip(checkpoints, names, strict=True):
        if ckpt.get("run_id") and ckpt.get("step") is not None:
            key = (ckpt["run_id"], ckpt["step"])
            if key in seen:
                raise UserError(
                    f"cannot average {name} with {seen[key]}: the same checkpoint (run "
                    f"{ckpt['run_id'][:12]}, step {ckpt['step']}) given twice"
                )
            seen[key] = name
    for ckpt, name in zip(checkpoints[1:], names[1:], strict=True):
        if ckpt["model_config"] != first["model_config"]:
            diff = sorted(
                k
                for k in set(first["model_config"]) | set(ckpt["model_config"])
                if first["model_config"].get(k) != ckpt["model_config"].get(k)
            )
            raise UserError(
                f"cannot average {name} with {first_name}: their model configs differ in "
                f"{', '.join(diff)}"
            )
        if ckpt["model"].keys() != first["model"].keys():
            extra = sorted(set(ckpt["model"]) ^ set(first["model"]))
            raise UserError(
                f"cannot average {name} with {first_name}: different parameters "
                f"({', '.join(extra[:5])})"
            )
        for key, tensor in ckpt["model"].items():
            ref = first["model"][key]
            if tensor.shape != ref.shape or tensor.dtype != ref.dtype:
                raise UserError(
                    f"cannot average {name} with {first_name}: {key} is {tuple(tensor.shape)} "
                    f"{tensor.dtype} there and {tuple(ref.shape)} {ref.dtype} here"
                )
    averaged = {}
    for key, ref in first["model"].items():
        if not ref.is_floating_point():  # integer buffers must agree; averaging them is meaningless
            for ckpt, name in zip(checkpoints[1:], names[1:], strict=True):
                if not torch.equal(ckpt["model"][key], ref):
                    raise UserError(
                        f"cannot average {name} with {first_name}: integer tensor {key} differs"
                    )
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
    directory = RunPaths(Path(run_dir)).checkpoints
    found = list_checkpoints(directory)
    if len(found) < n:
        raise UserError(
            f"{directory} holds {len(found)} checkpoint(s), {n} were asked for "
            "(train with a larger --keep-last, or average fewer)"
        )
    return [path for _, path in found[-n:]]


def average_files(paths: list[str | os.PathLike], out: str | os.PathLike) -> ModelConfig:
    """Average checkpoint files into ``out`` (written atomically); returns the model config."""
    check_output(out, "--out")
    check_not_inputs(
        {"--out": out}, {f"checkpoint {i + 1} of {len(paths)},": p for i, p in enumerate(paths)}
    )
    for i, path in enumerate(paths):
        for earlier in paths[:i]:
            if Path(path).exists() and Path(earlier).exists() and os.path.samefile(path, earlier):
                raise UserError(f"cannot average {path} with {earlier}: the same file given twice")
    loaded = [load_checkpoint(p) for p in paths]
    config, state = average_checkpoints(loaded, [str(p) for p in paths])
    provenance = {  # the run's, so that the average alone says what it is (the export's card)
        key: loaded[0][key]
        for key in ("spm_sha256", "spm_model", "run_id", "experiment", "train_config")
        if loaded[0].get(key)
    }
    save_checkpoint(
        out,
        config,
        state,
        averaged_from=[str(p) for p in paths],
        steps=[ckpt.get("step") for ckpt in loaded],
        **provenance,
    )
    return config
