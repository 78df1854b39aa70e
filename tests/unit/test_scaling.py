"""The scaling rule keeps what each Table 3 row changes relative to base."""

import pytest

from transformer_core.errors import ConfigError
from transformer_core.model.config import TABLE3_ROWS, model_config
from transformer_core.workflow_plan.scaling import scaled_model_overrides, scaled_steps


def test_identity_at_scale_one():
    for name in TABLE3_ROWS:
        assert model_config("base", **scaled_model_overrides(name, 1)) == model_config(name)


def test_widths_divided_heads_and_depth_kept():
    base = model_config("base", **scaled_model_overrides("base", 8))
    assert (base.d_model, base.d_ff, base.d_k, base.d_v, base.h, base.encoder_layers) == (
        64,
        256,
        8,
        8,
        8,
        6,
    )
    a1 = model_config("base", **scaled_model_overrides("A1", 8))
    assert (a1.h, a1.d_k, a1.h * a1.d_k) == (1, 64, base.d_model)
    b1 = model_config("base", **scaled_model_overrides("B1", 8))
    assert (b1.d_k, b1.d_v) == (2, 8)
    c1 = model_config("base", **scaled_model_overrides("C1", 8))
    assert c1.encoder_layers == 2 and c1.d_model == 64
    e = model_config("base", **scaled_model_overrides("E", 8))
    assert e.positional == "learned" and e.d_model == 64


def test_depth_divided_keeps_row_c_ordering():
    depths = [
        model_config("base", **scaled_model_overrides(row, 8, 2)).encoder_layers
        for row in ("C1", "C2", "base", "C3")
    ]
    assert depths == [1, 2, 3, 4]
    big = model_config("base", **scaled_model_overrides("big", 8, 2))
    assert (big.d_model, big.h, big.decoder_layers, big.dropout) == (128, 16, 3, 0.3)
    with pytest.raises(ConfigError, match="layer_divisor"):
        scaled_model_overrides("C1", 1, 4)


def test_steps_and_bad_divisors():
    assert scaled_steps("base", 500) == 200 and scaled_steps("big", 500) == 600
    with pytest.raises(ConfigError, match="scale_rule.width_divisor"):
        scaled_model_overrides("A4", 32)  # d_k = 16 is not divisible by 32
    with pytest.raises(ConfigError, match="step_divisor"):
        scaled_steps("base", 0)
