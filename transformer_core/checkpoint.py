"""Checkpoint files: one ``torch.save`` dict that rebuilds its model without any other file.

Every checkpoint holds ``format``, ``model_config`` (``ModelConfig.to_dict()``,
nanoGPT's ``model_args`` habit) and ``model`` (the state dict); training adds
its own state (optimizer, schedule, step, RNG, data position). Files are written
atomically and read with ``weights_only=True``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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
