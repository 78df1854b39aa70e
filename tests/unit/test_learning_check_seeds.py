"""bench.learning_check_seeds: the learning check re-judged on every k-seed subset of its runs
counts how often a path passes with k seeds."""

import json

import pytest

from bench.learning_check_seeds import main, seed_counts, subset_verdicts

# Four reference seeds, 4 intervals; seeds 1 and 2 agree exactly at the first interval.
REFERENCE = [
    [4.0, 3.0, 2.0, 1.0],
    [4.0, 3.1, 2.1, 1.1],
    [4.1, 3.2, 2.2, 1.2],
    [3.9, 2.9, 1.9, 0.9],
]
# Like the reference but 0.05 higher at the first interval, where seeds 1 and 2 agree.
NEAR = [[curve[0] + 0.05, *curve[1:]] for curve in REFERENCE]
BROKEN = [[v + 1.0 for v in curve] for curve in REFERENCE]


def test_a_path_like_the_reference_passes_every_subset_where_the_band_failed_narrow_ones():
    two, four = subset_verdicts(REFERENCE, NEAR, 2), subset_verdicts(REFERENCE, NEAR, 4)
    assert two["subsets"] == 6 and two["pass"] == 6 and two["rule_1"] == 6
    assert two["rule_2_noise"] == 6 and two["void"] == 0
    # The former rule 2: seeds 1 and 2 agree at the first interval, a band of no width.
    assert two["rule_2_band"] < 6 and two["largest_excursion"] == float("inf")
    assert {k: four[k] for k in ("subsets", "pass", "rule_1", "rule_2_noise", "rule_2_band")} == {
        "subsets": 1, "pass": 1, "rule_1": 1, "rule_2_noise": 1, "rule_2_band": 1,
    }  # fmt: skip
    assert four["largest_z"] < four["z_limit"]


def test_a_broken_path_fails_every_subset_and_the_reference_passes_every_one():
    paths = {"reference": REFERENCE, "broken": BROKEN, "same": REFERENCE}
    counts = seed_counts({"paths": {name: {"curves": c} for name, c in paths.items()}})
    assert [counts["broken"][k]["pass"] for k in "234"] == [0, 0, 0]
    assert [counts["same"][k]["pass"] for k in "234"] == [6, 4, 1]
    with pytest.raises(ValueError, match="same seeds"):
        subset_verdicts(REFERENCE, BROKEN[:3], 2)


def test_the_command_writes_its_counts_and_names_a_file_that_is_no_check(tmp_path, capsys):
    check = tmp_path / "learning_check.json"
    check.write_text(json.dumps({"seeds": [1, 2, 3, 4], "paths": {
        "reference": {"curves": REFERENCE}, "near": {"curves": NEAR}}}))  # fmt: skip
    assert main([str(check)]) == 0
    written = json.loads((tmp_path / "learning_check_seeds.json").read_text())
    assert written["checks"]["learning_check.json"]["near"]["4"]["pass"] == 1
    bad = tmp_path / "other.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        main([str(bad)])
    assert exit_.value.code == 2 and "other.json: not a finished learning check" in (
        capsys.readouterr().err
    )
