"""The learning check's criterion (bench.lib.learning_check, run by bench.bench_learning_check):
a candidate learns as the reference does where its last quarter lies within the reference
seeds' range widened by their spread, and its mean curve stays within the reference's noise at
every interval (rule 2': a z-score whose unit is floored by the reference's spread over the
whole run); a reference that does not learn makes the check void (the bench itself runs in
tests/commands/test_learning_check_bench.py)."""

import json
import statistics
import sys

import pytest

from bench.bench_learning_check import SHARED, main, reused_reference
from bench.lib.learning_check import last_quarter, seed_band_check, z_limit
from transformer_core.device import cpu_has_native_bf16
from transformer_core.errors import UserError

# Three reference seeds: 8 intervals falling from 4 to about 1.
REFERENCE = [
    [4.0, 3.0, 2.4, 2.0, 1.6, 1.3, 1.15, 1.05],
    [4.1, 3.1, 2.5, 2.1, 1.7, 1.35, 1.2, 1.1],
    [3.9, 3.05, 2.45, 2.05, 1.65, 1.4, 1.25, 1.15],
]


def test_a_candidate_inside_the_seed_spread_passes():
    check = seed_band_check(REFERENCE, [curve[:] for curve in REFERENCE[::-1]])
    assert check["passes"] and check["largest_z"]["z"] == 0 and check["valid"]
    shifted = [[v + 0.05 for v in curve] for curve in REFERENCE]  # within one band width
    assert seed_band_check(REFERENCE, shifted)["passes"]


def test_a_candidate_that_learns_otherwise_fails_either_rule():
    slower = [[v * 1.25 for v in curve] for curve in REFERENCE]  # ends 25% higher
    check = seed_band_check(REFERENCE, slower)
    assert not check["passes"] and not check["last_quarter_within"]
    # The same end, but a detour mid-run: the second rule alone catches it.
    detour = [curve[:3] + [v + 1.0 for v in curve[3:5]] + curve[5:] for curve in REFERENCE]
    check = seed_band_check(REFERENCE, detour)
    assert check["last_quarter_within"] and not check["curve_within_noise"]
    assert check["largest_z"]["interval"] in (4, 5) and not check["passes"]
    assert not check["curve_within_band"]  # the former rule 2 agrees here


def _agreeing_at(interval):
    """REFERENCE with its seeds exactly equal at ``interval`` (0-based): a band of no width."""
    reference = [curve[:] for curve in REFERENCE]
    for curve in reference:
        curve[interval] = 2.0
    floor = (
        statistics.fmean(
            statistics.stdev(c[i] for c in reference) ** 2 for i in range(len(reference[0]))
        )
        ** 0.5
    )
    return reference, floor


def test_where_the_seeds_agree_the_unit_is_the_runs_noise_not_zero():
    reference, floor = _agreeing_at(2)
    mean = [statistics.fmean(c[i] for c in reference) for i in range(len(reference[0]))]

    def shifted(by):
        return [[v + (by if i == 2 else 0.0) for i, v in enumerate(mean)] for _ in reference]

    small = seed_band_check(reference, shifted(0.1 * floor))  # a tenth of the run's noise
    assert small["passes"] and small["curve_within_noise"]
    assert not small["curve_within_band"]  # the former rule failed it: a band of no width
    large = seed_band_check(reference, shifted(3.0 * floor))  # three times it
    assert not large["passes"] and large["largest_z"]["interval"] == 3
    assert abs(large["largest_z"]["z"]) > large["z_limit"] == round(z_limit(8), 3)


def test_a_reference_that_does_not_learn_voids_the_check():
    collapsed = [curve[:] for curve in REFERENCE]
    collapsed[1] = [4.1, 4.0, 4.0, 3.9, 3.9, 3.9, 3.9, 3.9]  # one seed never learns
    check = seed_band_check(collapsed, REFERENCE)
    assert check["passes"] is None and not check["valid"]
    assert check["reference_fall_in_sds"] < 5
    assert z_limit(12) == pytest.approx(2.865, abs=1e-3)
    assert z_limit(20) == pytest.approx(3.023, abs=1e-3)


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
        (["--steps", "0"], "need 1 <= interval <= steps"),
        (["--interval", "0"], "need 1 <= interval <= steps"),
        (["--dropout", "1.5"], "--dropout must be in [0, 1)"),
        (["--seeds", "1"], "give at least 2 distinct seeds"),
        (["--seeds", "1", "1"], "give at least 2 distinct seeds"),
        (["--seeds", "-1", "2"], "none negative"),
        (["--lengths", "10", "5"], "need 1 <= LOW <= HIGH"),
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


def test_a_reference_is_reused_only_where_settings_seeds_and_code_agree(tmp_path):
    settings = {key: f"value of {key}" for key in SHARED} | {"code": "sha256 of the code"}
    earlier = tmp_path / "earlier.json"
    curves = {1: [4.0, 2.0], 2: [4.1, 2.1], 3: [3.9, 1.9]}
    earlier.write_text(json.dumps({**settings, "seeds": [1, 2, 3], "paths": {"reference": {
        "curves": list(curves.values()), "seed_times": [{"seed": s} for s in curves]}}}))  # fmt: skip
    reused = reused_reference(earlier, settings, [3, 1])
    assert reused["curves"] == [curves[3], curves[1]] and reused["reused_from"] == str(earlier)
    assert [t["seed"] for t in reused["seed_times"]] == [3, 1]
    with pytest.raises(UserError, match="it ran no seed 4"):
        reused_reference(earlier, settings, [1, 4])
    with pytest.raises(UserError, match="its code is 'sha256 of the code', this run's 'other'"):
        reused_reference(earlier, {**settings, "code": "other"}, [1, 2])
    with pytest.raises(UserError, match="its steps is"):
        reused_reference(earlier, {**settings, "steps": 7}, [1, 2])
    (tmp_path / "cut.json").write_text("{")
    with pytest.raises(UserError, match="not a learning check"):
        reused_reference(tmp_path / "cut.json", settings, [1, 2])


def test_the_help_says_what_the_bench_asks_in_a_whole_sentence():
    from bench import compare_seeds
    from bench.bench_learning_check import __doc__ as doc
    from bench.lib.hardware import description

    assert description(doc).endswith("judged against the reference's own noise over seeds?")
    assert description(compare_seeds.__doc__).endswith("within the seeds' noise?")
