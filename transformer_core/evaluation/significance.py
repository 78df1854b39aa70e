"""Confidence intervals and paired significance tests for BLEU, by sacreBLEU's own bootstrap.

A Table 3 row differs from base by a few tenths of BLEU; whether that is the ablation or
the sampling of the dev set is what these numbers say. Both come from sacreBLEU's
implementation (``sacrebleu.significance``), not our own resampling:

- ``confidence_interval``: ``BLEU.corpus_score(..., n_bootstrap=N)``, the 95% interval
  sacreBLEU prints as "mu = mean +- half-width" (half the distance between the 2.5th and
  97.5th percentiles of the resampled scores, around their mean);
- ``paired_test``: ``PairedTest(test_type="bs")``, the paired bootstrap resampling test of
  Koehn (2004) as Moses' ``bootstrap-hypothesis-difference-significance.pl`` runs it: a
  system and a baseline scored on the same resampled sentence sets; the p-value is the
  probability of a difference at least as large as the observed one under the null.

Both read their random seed from the environment variable ``SACREBLEU_SEED`` (that is
sacreBLEU's interface); ``_seeded`` sets it for one call and restores it, so results are
reproducible and recorded with the seed that made them.

Each BLEU variant of the pipeline has its metric here (``VARIANTS``): ``sacrebleu`` is
sacreBLEU's default 13a BLEU on detokenized text; ``paper`` is sacreBLEU's BLEU without
tokenization or smoothing on the paper-style tokenized text (``bleu.paper_tokenized``),
which is multi-bleu.perl's corpus BLEU (tests/unit/test_bleu.py holds them equal);
``lowercased_tokenized`` is the same BLEU on the Multi30k literature's lowercased tokenized
text (``bleu.lowercased_tokenized``).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from transformer_core.errors import UserError
from transformer_core.evaluation.bleu import lowercased_tokenized, paper_tokenized, read_pair
from transformer_core.settings.evaluation import LEAST_RESAMPLES

# sacreBLEU's confidence level is fixed: its interval drops n // 40 resamples at each end.
CONFIDENCE = 0.95
SEED_VARIABLE = "SACREBLEU_SEED"
VARIANTS = ("paper", "sacrebleu", "lowercased_tokenized")  # the BLEU variants of a score file
# Each variant's key in a score file (``bleu.score_lines``); its interval is the key + "_ci".
SCORE_KEYS = {
    "paper": "bleu_paper_style",
    "sacrebleu": "sacrebleu",
    "lowercased_tokenized": "bleu_lowercased_tokenized",
}


@dataclass(frozen=True)
class Interval:
    """A score with sacreBLEU's bootstrap interval: ``mean`` +- ``half_width`` (95%)."""

    score: float
    mean: float
    half_width: float
    resamples: int
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PairedResult:
    """A system against a baseline on the same sentences: the difference and its p-value."""

    baseline: float
    system: float
    p_value: float
    resamples: int
    seed: int

    @property
    def delta(self) -> float:
        return self.system - self.baseline

    def to_dict(self) -> dict:
        return {**asdict(self), "delta": self.delta}


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """sacreBLEU's RNG seed (its environment variable) set to ``seed`` for the block."""
    before = os.environ.get(SEED_VARIABLE)
    os.environ[SEED_VARIABLE] = str(seed)
    try:
        yield
    finally:
        if before is None:
            del os.environ[SEED_VARIABLE]
        else:
            os.environ[SEED_VARIABLE] = before


def _metric(variant: str):
    from sacrebleu.metrics import BLEU

    if variant == "sacrebleu":
        return BLEU()
    if variant in ("paper", "lowercased_tokenized"):
        return BLEU(tokenize="none", smooth_method="none", force=True)
    raise ValueError(f"unknown BLEU variant {variant!r}; known: {', '.join(VARIANTS)}")


def _texts(
    variant: str, hyps: Sequence[str], refs: Sequence[str], lang: str
) -> tuple[list[str], list[str]]:
    """The lines the variant's metric reads: detokenized, the paper-style tokenized ones, or
    the Multi30k literature's lowercased tokenized ones."""
    if variant == "paper":
        return paper_tokenized(hyps, refs, lang)
    if variant == "lowercased_tokenized":
        return lowercased_tokenized(hyps, refs, lang)
    return list(hyps), list(refs)


def _check_resamples(resamples: int) -> None:
    """The least resamples of ``settings.BootstrapSettings`` (its off, 0, is a command's: here
    an interval or a test is to be made)."""
    if resamples < LEAST_RESAMPLES:
        raise UserError(
            f"bootstrap resamples must be at least {LEAST_RESAMPLES} for a 95% interval, "
            f"not {resamples}"
        )


def confidence_interval(
    variant: str,
    hyps: Sequence[str],
    refs: Sequence[str],
    resamples: int,
    seed: int,
    lang: str = "de",
) -> Interval:
    """BLEU (``variant``: one of ``VARIANTS``) of ``hyps`` with sacreBLEU's 95% bootstrap interval."""
    _check_resamples(resamples)
    hyp_lines, ref_lines = _texts(variant, hyps, refs, lang)
    with _seeded(seed):
        score = _metric(variant).corpus_score(hyp_lines, [ref_lines], n_bootstrap=resamples)
    # sacreBLEU keeps the bootstrap mean and half-width in these fields (Score.estimate_ci).
    return Interval(score.score, float(score._mean), float(score._ci), resamples, seed)


def score_intervals(
    hyp_path: str | os.PathLike,
    ref_path: str | os.PathLike,
    resamples: int,
    seed: int,
    lang: str = "de",
) -> dict[str, dict]:
    """``bleu_paper_style_ci``, ``sacrebleu_ci`` and ``bleu_lowercased_tokenized_ci``: each
    BLEU of ``bleu.score_files`` with its 95% bootstrap interval, as JSON-ready dicts."""
    return line_intervals(*read_pair(hyp_path, ref_path), resamples, seed, lang)


def line_intervals(
    hyps: Sequence[str], refs: Sequence[str], resamples: int, seed: int, lang: str = "de"
) -> dict[str, dict]:
    """``score_intervals`` of lines already read."""
    return {
        f"{SCORE_KEYS[variant]}_ci": confidence_interval(
            variant, hyps, refs, resamples, seed, lang
        ).to_dict()
        for variant in VARIANTS
    }


def paired_test(
    variant: str,
    baseline: Sequence[str],
    system: Sequence[str],
    refs: Sequence[str],
    resamples: int,
    seed: int,
    lang: str = "de",
) -> PairedResult:
    """sacreBLEU's paired bootstrap test of ``system`` against ``baseline`` (same references)."""
    from sacrebleu.significance import PairedTest

    _check_resamples(resamples)
    if not len(baseline) == len(system) == len(refs):
        raise UserError(
            f"paired test: {len(baseline)} baseline, {len(system)} system and {len(refs)} "
            "reference lines: the translations must be of the same set"
        )
    base_lines, ref_lines = _texts(variant, baseline, refs, lang)
    system_lines, _ = _texts(variant, system, refs, lang)
    with _seeded(seed):
        test = PairedTest(
            [("baseline", base_lines), ("system", system_lines)],
            {"BLEU": _metric(variant)},
            [ref_lines],
            test_type="bs",
            n_samples=resamples,
        )
        _, scores = test()
    # scores: "System" -> the names, then the metric's name -> [baseline, system] results
    (metric,) = (name for name in scores if name != "System")
    base, other = scores[metric]
    # sacreBLEU counts resampled differences strictly above the observed one, so two systems
    # with equal scores on every resample (identical output, or BLEU 0 throughout) would get
    # its smallest p-value, 1/(N+1). No observed difference is never significant: p = 1.
    p_value = 1.0 if other.score == base.score else float(other.p_value)
    return PairedResult(base.score, other.score, p_value, resamples, seed)


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation over seeds (None for one seed: no spread to show)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean of no values")
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) if len(values) > 1 else None)


def significant(p_value: float | None, level: float = 1 - CONFIDENCE) -> bool:
    """Whether a p-value marks a significant difference (p < 0.05)."""
    return p_value is not None and not math.isnan(p_value) and p_value < level
