"""bench.compare_seeds' Welch's t-test: Student's t distribution against its printed quantiles,
and the test itself against a hand-worked case."""

import pytest

from bench.compare_seeds import length_ratios, runs_of, t_two_sided, welch


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [(12.706, 1, 0.05), (4.303, 2, 0.05), (2.776, 4, 0.05), (2.571, 5, 0.05), (4.604, 4, 0.01),
     (1.960, 1e6, 0.05), (0.0, 3, 1.0)],
)  # fmt: skip
def test_the_t_distribution_meets_its_table(t, df, p):
    assert t_two_sided(t, df) == pytest.approx(p, abs=2e-4)


def test_welch_on_a_worked_case():
    # Means 37.0 and 36.0, variances 0.25 and 1.0 over 3 seeds each: t = 1 / sqrt(1.25 / 3).
    result = welch([36.5, 37.0, 37.5], [35.0, 36.0, 37.0])
    assert result["t"] == pytest.approx(1.549, abs=1e-3)
    assert result["df"] == pytest.approx(2.94, abs=0.01)  # (1.25/3)^2 / ((1/12)^2/2 + (1/3)^2/2)
    assert 0.2 < result["p_two_sided"] < 0.25


def test_length_ratios_by_reference_band():
    references = ["a b c", "a b c d e f g h i j k l", "a " * 25]
    hypotheses = ["a b c d", "a b c d e f", "a " * 20]
    ratios = length_ratios(hypotheses, references)
    assert ratios["all"] == pytest.approx(30 / 40, abs=1e-4)
    assert ratios["1-9"] == pytest.approx(4 / 3, abs=1e-4)
    assert ratios["10-14"] == 0.5
    assert ratios["20-1000"] == 0.8
    assert "15-19" not in ratios  # no reference of that length
    with pytest.raises(ValueError, match="2 hypotheses for 3 references"):
        length_ratios(hypotheses[:2], references)


@pytest.mark.parametrize(
    ("score", "summary", "named"),
    [
        ('{"sacrebleu": NaN, "bleu_paper_style": 30.0}', True, "sacrebleu is nan"),
        ('{"sacrebleu": 30', True, "not a score file"),
        ('{"sacrebleu": 30.0, "bleu_paper_style": 31.0}', False, "result file not found"),
    ],
)
def test_a_missing_cut_or_nan_result_is_named_not_carried(tmp_path, score, summary, named):
    scores = tmp_path / "results" / "scores" / "en_de"
    scores.mkdir(parents=True)
    (scores / "base.test.avg.json").write_text(score)
    if summary:
        run = tmp_path / "runs" / "en_de" / "base"
        run.mkdir(parents=True)
        (run / "summary.json").write_text('{"train_config": {}, "dev_ppl": 5, "wall_seconds": 1}')
    with pytest.raises(SystemExit, match=named):
        runs_of(tmp_path, "en_de")
