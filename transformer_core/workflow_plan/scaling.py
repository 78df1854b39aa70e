"""The one rule that shrinks the paper's experiments to smaller scales (docs/recipe.md, Scales).

Every width (d_model, d_ff, d_k, d_v) is divided by ``width_divisor`` and every
layer count by ``layer_divisor``; heads are kept. Each Table 3 row therefore
still changes the same thing relative to base (row A trades heads against d_k at
a fixed h*d_k, row C doubles or halves depth or width, and so on). Training
steps are divided by ``step_divisor``. At divisors of 1 this is the paper's
recipe unchanged.
"""

from __future__ import annotations

from typing import Any

from transformer_core.errors import ConfigError
from transformer_core.model.config import BASE, experiment

WIDTHS = ("d_model", "d_ff", "d_k", "d_v")
DEPTHS = ("encoder_layers", "decoder_layers")


def scaled_model_overrides(
    name: str, width_divisor: int = 1, layer_divisor: int = 1
) -> dict[str, Any]:
    """ModelConfig overrides of base for experiment ``name`` with widths and depths divided."""
    values = {**BASE.to_dict(), **experiment(name).model}
    overrides = dict(experiment(name).model)
    for divisor, label, keys in (
        (width_divisor, "width_divisor", WIDTHS),
        (layer_divisor, "layer_divisor", DEPTHS),
    ):
        if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 1:
            raise ConfigError(f"scale_rule.{label} must be a positive integer, got {divisor!r}")
        for key in keys:
            if values[key] % divisor:
                raise ConfigError(
                    f"scale_rule.{label}={divisor} does not divide {key}={values[key]} of experiment {name!r}"
                )
            overrides[key] = values[key] // divisor
    return overrides


def scaled_steps(name: str, step_divisor: float = 1) -> int:
    """The paper's training steps of ``name`` divided by ``step_divisor`` (at least 1)."""
    if (
        isinstance(step_divisor, bool)
        or not isinstance(step_divisor, (int, float))
        or step_divisor <= 0
    ):
        raise ConfigError(
            f"scale_rule.step_divisor must be a positive number, got {step_divisor!r}"
        )
    return max(1, round(experiment(name).train_steps / step_divisor))
