"""sacreBLEU's bootstrap interval and paired test as the tables use them: seeded, both BLEU variants."""

import os
import random

import pytest
from sacrebleu.metrics import BLEU

from transformer_core.errors import UserError
from transformer_core.evaluation.bleu import paper_bleu
from transformer_core.evaluation.significance import (
    SEED_VARIABLE,
    confidence_interval,
    mean_std,
    paired_test,
    significant,
)

WORDS = "the a house cat dog sees runs big small green".split()


def corpus(seed, n=120):
    rng = random.Random(seed)
    refs = [" ".join(rng.choices(WORDS, k=rng.randint(4, 10))) for _ in range(n)]
    return rng, refs


def noisy(rng, refs, keep):
    """Each reference with every word kept with probability ``keep``, else replaced."""
    return [
        " ".join(w if rng.random() < keep else rng.choice(WORDS) for w in r.split()) for r in refs
    ]


def test_interval_is_sacrebleus_own_and_seeded():
    rng, refs = corpus(0)
    hyps = noisy(rng, refs, 0.7)
    interval = confidence_interval("sacrebleu", hyps, refs, 1000, 7)
    score = BLEU().corpus_score(hyps, [refs])
    assert interval.score == pytest.approx(score.score)
    assert interval.half_width > 0 and abs(interval.mean - interval.score) < interval.half_width
    assert confidence_interval("sacrebleu", hyps, refs, 1000, 7) == interval  # same seed, same draw
    assert confidence_interval("sacrebleu", hyps, refs, 1000, 8).half_width != interval.half_width
    assert SEED_VARIABLE not in os.environ or os.environ[SEED_VARIABLE] != "7"  # restored


def test_paper_variant_scores_like_multi_bleu():
    rng, refs = corpus(1)
    hyps = noisy(rng, refs, 0.6)
    assert confidence_interval("paper", hyps, refs, 200, 1).score == pytest.approx(
        paper_bleu(hyps, refs).bleu
    )


def test_paired_test_separates_a_real_difference_from_none():
    rng, refs = corpus(2)
    weak, strong = noisy(rng, refs, 0.5), noisy(rng, refs, 0.9)
    better = paired_test("sacrebleu", weak, strong, refs, 1000, 12345)
    assert better.delta > 0 and better.p_value < 0.05 and significant(better.p_value)
    same = paired_test("paper", weak, weak, refs, 1000, 12345)
    assert same.delta == 0 and same.p_value > 0.5 and not significant(same.p_value)


def test_errors_name_the_problem():
    with pytest.raises(UserError, match="at least 40"):
        confidence_interval("sacrebleu", ["a"], ["a"], 10, 1)
    with pytest.raises(UserError, match="same set"):
        paired_test("sacrebleu", ["a", "b"], ["a"], ["a", "b"], 100, 1)


def test_mean_and_std_over_seeds():
    assert mean_std([25.0]) == (25.0, None)
    mean, std = mean_std([1.0, 2.0, 3.0])
    assert mean == 2.0 and std == pytest.approx(1.0)
