"""The paper's learning-rate schedule (section 5.3).

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

It rises linearly for the first ``warmup_steps`` optimizer steps and then
decays with the inverse square root of the step; the peak, at
``step = warmup``, is ``(d_model * warmup)^-0.5`` (7.0e-4 for base with warmup
4000). ``scale`` multiplies the whole curve: 1.0 is the paper. Short smoke runs
on tiny models may raise it (a short run never reaches the inverse-sqrt tail
at useful rates) or lower it: post-norm Multi30k models collapsed at peaks of 3.1e-3
(ours) and 3.6e-3 (Hugging Face Marian's) and trained well at 1.6e-3 (docs/multi30k.md).

``cooldown`` (off by default, as in the paper) multiplies the last ``cooldown`` steps of a
run of ``steps`` by a line falling from 1 towards 0: step ``steps - cooldown + 1`` takes the
whole rate, step ``steps`` a ``1 / cooldown`` of it. A run of fixed length ends in a smaller
step size than the inverse square root alone gives it; ``config/nltk_parsing.yaml`` uses it
(docs/table4.md).
"""

from __future__ import annotations

from transformer_core.errors import ConfigError


def learning_rate(
    step: int, d_model: int, warmup: int, scale: float = 1.0, cooldown: int = 0, steps: int = 0
) -> float:
    """The learning rate of optimizer step ``step`` (1-based: the first update is step 1),
    with the last ``cooldown`` of ``steps`` steps cooled down (0: the paper's schedule)."""
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    if warmup < 1:
        raise ConfigError(f"warmup must be a positive number of steps, got {warmup}")
    rate = scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    if cooldown:
        if not 0 < cooldown <= steps:
            raise ConfigError(f"cooldown must be from 0 to the run's {steps} steps, got {cooldown}")
        if step > steps:
            raise ValueError(f"step {step} is beyond the run's {steps} steps")
        rate *= min(1.0, (steps - step + 1) / cooldown)
    return rate


def peak_learning_rate(d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The schedule's maximum, reached at ``step == warmup``."""
    return learning_rate(warmup, d_model, warmup, scale)
