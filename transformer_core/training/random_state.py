"""The random states of a training run: seeded at its start, saved with each checkpoint (one
per rank) and restored on resume, so that a resumed run draws the dropout masks and the
batches' tie-breaks an uninterrupted one would have drawn."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), Python's and numpy's generators with ``seed``."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def rng_state() -> dict[str, Any]:
    """This process's random states (torch CPU and CUDA, Python, numpy) as weights_only-loadable data.

    numpy's MT19937 key becomes a plain list of ints, Python's state stays a tuple of ints.
    """
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "algorithm": np_state[0],
            "key": np_state[1].tolist(),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(
        (
            n["algorithm"],
            np.asarray(n["key"], dtype=np.uint32),
            n["pos"],
            n["has_gauss"],
            n["cached_gaussian"],
        )
    )
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
