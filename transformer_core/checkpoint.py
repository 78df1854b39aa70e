"""Checkpoint files: one ``torch.save`` dict that rebuilds its model without any other file.

Every checkpoint holds ``format``, ``model_config`` (``ModelConfig.to_dict()``,
nanoGPT's ``model_args`` habit) and ``model`` (the state dict); training adds
its own state (optimizer, schedule, step, RNG, data position). Files are written
atomically and read with ``weights_only=True``, so everything stored is tensors
and plain Python data (numpy's RNG state as a list of ints).

A training run keeps numbered checkpoints ``checkpoints/step_NNNNNNN.pt`` and
prunes all but the newest few.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from transformer_core.config import ModelConfig
from transformer_core.errors import UserError
from transformer_core.io import atomic_open
from transformer_core.model import Transformer

FORMAT = "transformer-core-checkpoint/1"


def save_checkpoint(path: str | os.PathLike, model_config: ModelConfig, model_state: dict,
                    **extra: Any) -> None:
    """Write a checkpoint atomically: a killed job never leaves a truncated file behind."""
    payload = {"format": FORMAT, "model_config": model_config.to_dict(), "model": model_state, **extra}
    with atomic_open(path, "wb") as handle:
        torch.save(payload, handle)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint dict; a missing, truncated or foreign file is a UserError naming it."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for corrupt files
        raise UserError(f"cannot read checkpoint {path}: {err}") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"{path} is not a transformer-core checkpoint (expected format {FORMAT!r})")
    return payload


def load_model(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Transformer:
    """Rebuild the model stored in a checkpoint, in eval mode."""
    payload = load_checkpoint(path, map_location)
    model = Transformer(ModelConfig.from_dict(payload["model_config"], where=f"{path}:model_config"))
    model.load_state_dict(payload["model"])
    return model.to(map_location).eval()


# -- training runs: numbered checkpoints, retention, RNG state --------------------------------

CHECKPOINT_PATTERN = re.compile(r"^step_(\d+)\.pt$")


def checkpoint_path(directory: str | os.PathLike, step: int) -> Path:
    """``DIR/step_NNNNNNN.pt``: names sort in step order."""
    return Path(directory) / f"step_{step:07d}.pt"


def list_checkpoints(directory: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every numbered checkpoint in ``directory``, oldest first.

    Temporary files of an interrupted write (``.step_...tmp``) are not checkpoints.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = CHECKPOINT_PATTERN.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def prune_checkpoints(directory: str | os.PathLike, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` numbered checkpoints; returns the deleted paths."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    doomed = [path for _, path in list_checkpoints(directory)[:-keep_last]]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Make ``target`` the same file as ``source`` (hard link, else copy), replacing it atomically."""
    source, target = Path(source), Path(target)
    tmp = target.with_name(f".{target.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:  # another file system, or links not supported
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def rng_state() -> dict[str, Any]:
    """This process's random states (torch CPU and CUDA, Python, numpy) as weights_only-loadable data.

    numpy's MT19937 key becomes a plain list of ints, Python's state stays a tuple of ints.
    """
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {"algorithm": np_state[0], "key": np_state[1].tolist(), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state((n["algorithm"], np.asarray(n["key"], dtype=np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
