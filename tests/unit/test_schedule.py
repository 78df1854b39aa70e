"""The learning-rate schedule against the paper's formula, computed by hand."""

import math

import pytest

from transformer_core.errors import ConfigError
from transformer_core.training.schedule import learning_rate, peak_learning_rate


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (1, 512**-0.5 * 1 * 4000**-1.5),  # warmup branch: 1.747e-7
        (4000, 512**-0.5 * 4000**-0.5),  # both branches meet: 6.988e-4
        (100_000, 512**-0.5 * 100_000**-0.5),  # inverse-sqrt tail: 1.398e-4
    ],
)
def test_base_schedule_matches_formula(step, expected):
    assert learning_rate(step, 512, 4000) == pytest.approx(expected, rel=1e-12)


def test_known_values():
    assert learning_rate(1, 512, 4000) == pytest.approx(1.7469e-7, rel=1e-4)
    assert learning_rate(4000, 512, 4000) == pytest.approx(6.9877e-4, rel=1e-4)
    assert learning_rate(100_000, 512, 4000) == pytest.approx(1.3975e-4, rel=1e-4)


def test_peak_at_warmup_and_scale_multiplies():
    lrs = [learning_rate(s, 1024, 4000) for s in range(3990, 4011)]
    assert max(lrs) == learning_rate(4000, 1024, 4000) == peak_learning_rate(1024, 4000)
    assert learning_rate(123, 512, 4000, scale=2.5) == pytest.approx(
        2.5 * learning_rate(123, 512, 4000)
    )
    assert peak_learning_rate(512, 4000) == pytest.approx(1 / math.sqrt(512 * 4000))


def test_invalid_steps():
    with pytest.raises(ValueError, match="step counts from 1"):
        learning_rate(0, 512, 4000)
    with pytest.raises(ConfigError, match="warmup"):
        learning_rate(1, 512, 0)


def test_cooldown_falls_linearly_over_the_runs_last_steps():
    """Off (0) it is the paper's curve; on, step steps-K+1 takes the whole rate, step steps a
    1/K of it, the steps between a line."""
    steps, k = 1000, 100
    paper = [learning_rate(s, 128, 200, 0.2) for s in range(1, steps + 1)]
    cooled = [learning_rate(s, 128, 200, 0.2, cooldown=k, steps=steps) for s in range(1, steps + 1)]
    assert cooled[: steps - k + 1] == paper[: steps - k + 1]
    factors = [c / p for c, p in zip(cooled, paper, strict=True)][steps - k :]
    assert factors == pytest.approx([(k - i) / k for i in range(k)], rel=1e-12)
    assert learning_rate(5, 128, 200, cooldown=0, steps=0) == learning_rate(5, 128, 200)
    assert learning_rate(1, 128, 200, cooldown=10, steps=10) == learning_rate(1, 128, 200)


def test_cooldown_outside_the_run_is_refused():
    with pytest.raises(ConfigError, match="cooldown must be from 0 to the run's 10 steps, got 11"):
        learning_rate(1, 128, 200, cooldown=11, steps=10)
    with pytest.raises(ValueError, match="step 11 is beyond the run's 10 steps"):
        learning_rate(11, 128, 200, cooldown=5, steps=10)
