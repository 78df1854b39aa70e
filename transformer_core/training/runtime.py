"""What a run trains with, resolved once from its settings on its device: the micro-batch
(``micro_batch``: ``max_tokens: auto`` a number), the autocast dtype (``device.autocast_dtype``)
and the training path (``path``: compiled or eager, batch shapes, compute weights).

The session resolves them before its run folder decides whether the run starts or resumes, so
both answers come at once: a fresh run's, and a resumed run's, which keeps what its checkpoint
recorded wherever the setting is ``auto``. The ``Trainer`` takes the one the folder chose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from transformer_core.device import autocast_dtype
from transformer_core.model.config import ModelConfig
from transformer_core.settings import AUTO, TrainSettings
from transformer_core.training import micro_batch
from transformer_core.training.path import TrainingPath, kept, recorded, resolve


@dataclass(frozen=True)
class TrainingRuntime:
    """A run's settings as resolved on its device: ``settings`` with ``max_tokens`` a number
    (what the run records), bf16 ``autocast`` or None (fp32), and its ``path``."""

    settings: TrainSettings
    autocast: torch.dtype | None
    path: TrainingPath


def resolve_runtime(
    cfg: TrainSettings,
    model_cfg: ModelConfig,
    device: torch.device,
    world_size: int,
    widths: int,
    payload: dict[str, Any] | None = None,
) -> tuple[TrainingRuntime, TrainingRuntime]:
    """``cfg`` for a model of ``model_cfg`` on ``device``, one of ``world_size`` ranks, whose
    batches meet ``widths`` batch widths (``path.widths_met``): as a fresh run takes it, and as
    a run resumed from ``payload`` (its newest checkpoint; None: there is none) keeps it, with
    its recorded micro-batch where ``max_tokens`` is ``auto`` and it fits ``device``
    (``micro_batch.recorded``, a UserError where it does not) and its recorded path for each
    ``auto`` of the path (``path.kept``)."""
    fresh = micro_batch.resolved(cfg, model_cfg, device, world_size)
    resumed = (
        micro_batch.recorded(fresh, payload, model_cfg, device) if cfg.max_tokens == AUTO else fresh
    )
    autocast = autocast_dtype(device, cfg.precision)
    path = resolve(device, resumed, autocast, cfg.steps, widths)
    return (
        TrainingRuntime(fresh, autocast, path),
        TrainingRuntime(resumed, autocast, kept(path, resumed, recorded(payload))),
    )
