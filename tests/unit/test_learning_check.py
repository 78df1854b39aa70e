"""bench.bench_learning_check's criterion: a candidate learns as the reference does where its
last quarter lies within the reference seeds' range widened by their spread, and its mean
curve never leaves the reference's band by more than the band's width (the bench itself runs
in tests/commands/test_learning_check_bench.py)."""

import sys

import pytest

from bench.bench_learning_check import last_quarter, main, seed_band_check
from transformer_core.device import cpu_has_native_bf16

# Three reference seeds: 8 intervals falling from 4 to about 1.
REFERENCE = [
    [4.0, 3.0, 2.4, 2.0, 1.6, 1.3, 1.15, 1.05],
    [4.1, 3.1, 2.5, 2.1, 1.7, 1.35, 1.2, 1.1],
    [3.9, 3.05, 2.45, 2.05, 1.65, 1.4, 1.25, 1.15],
]


def test_a_candidate_inside_the_seed_spread_passes():
    check = seed_band_check(REFERENCE, [curve[:] for curve in REFERENCE[::-1]])
    assert check["passes"] and check["largest_excursion"]["excess_over_width"] == 0
    shifted = [[v + 0.05 for v in curve] for curve in REFERENCE]  # within one band width
    assert seed_band_check(REFERENCE, shifted)["passes"]


def test_a_candidate_that_learns_otherwise_fails_either_rule():
    slower = [[v * 1.25 for v in curve] for curve in REFERENCE]  # ends 25% higher
    check = seed_band_check(REFERENCE, slower)
    assert not check["passes"] and not check["last_quarter_within"]
    # The same end, but a detour mid-run: the second rule alone catches it.
    detour = [curve[:3] + [v + 1.0 for v in curve[3:5]] + curve[5:] for curve in REFERENCE]
    check = seed_band_check(REFERENCE, detour)
    assert check["last_quarter_within"] and not check["curve_within_band"]
    assert check["largest_excursion"]["interval"] in (4, 5) and not check["passes"]


def test_the_criterion_needs_a_spread_and_aligned_curves():
    assert last_quarter([4.0, 3.0, 2.0, 1.0]) == 1.0 and last_quarter([2.0]) == 2.0
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seed_band_check(REFERENCE[:1], REFERENCE)
    with pytest.raises(ValueError, match="same intervals"):
        seed_band_check(REFERENCE, [REFERENCE[0][:-1]])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--lr-scale", "-1"], "train.lr_scale"),
        pytest.param(
            ["--precision", "bf16"],
            "--precision bf16 needs native bfloat16",
            marks=pytest.mark.skipif(cpu_has_native_bf16(), reason="this CPU computes bf16"),
        ),
    ],
)
def test_the_bench_names_a_bad_option_before_any_run(monkeypatch, capsys, argv, named):
    """A usage error (exit 2) naming the option, not a traceback from the first run."""
    monkeypatch.setattr(sys, "argv", ["bench_learning_check", *argv, "--out", "/nonexistent/x"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2 and named in capsys.readouterr().err
