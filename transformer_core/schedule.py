"""The paper's learning-rate schedule (section 5.3).

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

It rises linearly for the first ``warmup_steps`` optimizer steps and then
decays with the inverse square root of the step; the peak, at
``step = warmup``, is ``(d_model * warmup)^-0.5`` (7.0e-4 for base with warmup
4000). ``scale`` multiplies the whole curve: 1.0 is the paper. Short smoke runs
on tiny models may raise it (a short run never reaches the inverse-sqrt tail
at useful rates) or lower it; NOTES.md records a post-norm model that collapsed
at a peak of 3.6e-3 and trained well at 1.6e-3.
"""

from __future__ import annotations

from transformer_core.errors import ConfigError


def learning_rate(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The learning rate of optimizer step ``step`` (1-based: the first update is step 1)."""
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    if warmup < 1:
        raise ConfigError(f"warmup must be a positive number of steps, got {warmup}")
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def peak_learning_rate(d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The schedule's maximum, reached at ``step == warmup``."""
    return learning_rate(warmup, d_model, warmup, scale)
