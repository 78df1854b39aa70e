"""The learning check's criterion (``bench.bench_learning_check``): does a candidate path's
NLL curve over seeds learn as the reference's does, judged against the reference seeds' own
noise? Pure functions of the curves (one per seed, the NLL per target token at every log
interval): rule 1 (the last quarter within the reference seeds' range widened by their sd),
rule 2' (the mean curve within the reference's noise at every interval, Bonferroni over the
intervals), the gate that makes a check void unless the reference learns, and the former rule
2's band excursion, reported beside them."""

from __future__ import annotations

import math
import statistics

# Rule 2': the candidate's mean curve, at each interval, differs from the reference's mean by
# at most LIMIT standard errors, the noise unit floored by the reference's RMS spread.
FAMILY_ALPHA = 0.05  # the chance that a path learning as the reference does fails rule 2'
GATE_WIDTHS = 5.0  # the reference's fall, in its last-quarter sds, below which a check is void


def last_quarter(curve: list[float]) -> float:
    """The mean of a curve's last quarter of intervals (at least one)."""
    tail = curve[-max(1, len(curve) // 4) :]
    return sum(tail) / len(tail)


def z_limit(intervals: int, alpha: float = FAMILY_ALPHA) -> float:
    """The two-sided normal quantile Phi^-1(1 - alpha / (2K)) for K intervals (Bonferroni):
    2.87 for 12 intervals, 3.02 for 20."""
    return statistics.NormalDist().inv_cdf(1 - alpha / (2 * intervals))


def noise_check(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """Rule 2': the largest |z| over intervals of the candidate's mean curve against the
    reference's, z_i = (m_cand,i - m_ref,i) / (sigma_i sqrt(1/n_ref + 1/n_cand)), sigma_i the
    reference seeds' sd at i floored by their RMS sd over all intervals; within ``z_limit``."""
    intervals, n_ref, n_cand = len(reference[0]), len(reference), len(candidate)
    sds = [statistics.stdev(curve[i] for curve in reference) for i in range(intervals)]
    floor = math.sqrt(sum(sd * sd for sd in sds) / intervals)
    worst = {"z": 0.0, "interval": None}
    for i, sd in enumerate(sds):
        unit = max(sd, floor) * math.sqrt(1 / n_ref + 1 / n_cand)
        gap = statistics.fmean(c[i] for c in candidate) - statistics.fmean(c[i] for c in reference)
        z = gap / unit if unit > 0 else (math.inf if gap else 0.0)
        if abs(z) > abs(worst["z"]):
            worst = {"z": round(z, 3), "interval": i + 1}
    limit = z_limit(intervals)
    return {"within": abs(worst["z"]) <= limit, "largest_z": worst, "z_limit": round(limit, 3),
            "noise_floor": round(floor, 5)}  # fmt: skip


def band_excursion(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """The former rule 2, reported beside rule 2': how far the candidate's mean curve leaves
    the reference seeds' band (minimum to maximum), in band widths, at its worst interval."""
    worst = {"excess_over_width": 0.0, "interval": None}
    for i in range(len(reference[0])):
        values = [curve[i] for curve in reference]
        lo, hi = min(values), max(values)
        mean = statistics.fmean(curve[i] for curve in candidate)
        outside = max(lo - mean, mean - hi, 0.0)
        excess = outside / (hi - lo) if hi > lo else (math.inf if outside else 0.0)
        if excess > worst["excess_over_width"]:
            worst = {"excess_over_width": round(excess, 3), "interval": i + 1}
    return worst


def validity(reference: list[list[float]]) -> dict:
    """The gate: the check is void unless the reference learns far beyond its own noise, its
    mean first-interval NLL above its mean last-quarter NLL by at least ``GATE_WIDTHS`` sds of
    the seeds' last-quarter NLL (a reference seed that collapses widens that sd)."""
    finals = [last_quarter(curve) for curve in reference]
    fall = statistics.fmean(curve[0] for curve in reference) - statistics.fmean(finals)
    spread = statistics.stdev(finals)
    widths = fall / spread if spread > 0 else (math.inf if fall > 0 else 0.0)
    return {"valid": widths >= GATE_WIDTHS, "fall_in_sds": round(widths, 2)}


def seed_band_check(reference: list[list[float]], candidate: list[list[float]]) -> dict:
    """Whether ``candidate``'s curves (one per seed, each the NLL per log interval) learn as
    ``reference``'s do (at least 2 seeds), by rules 1 and 2' (``bench.bench_learning_check``'s docstring), where
    the gate finds the check valid: ``passes`` True or False, None where void; the numbers each
    rule compared, and the former rule 2's band excursion beside them."""
    if len(reference) < 2:
        raise ValueError("the reference needs at least 2 seeds for a spread")
    if not candidate:
        raise ValueError("the candidate needs at least 1 seed")
    intervals = len(reference[0])
    if any(len(curve) != intervals for curve in [*reference, *candidate]):
        raise ValueError("every curve must have the same intervals")
    finals = [last_quarter(curve) for curve in reference]
    spread = statistics.stdev(finals)
    low, high = min(finals) - spread, max(finals) + spread
    final = statistics.fmean(last_quarter(curve) for curve in candidate)
    final_ok = low <= final <= high
    noise, gate = noise_check(reference, candidate), validity(reference)
    excursion = band_excursion(reference, candidate)
    return {
        "passes": (final_ok and noise["within"]) if gate["valid"] else None,
        "valid": gate["valid"],
        "reference_fall_in_sds": gate["fall_in_sds"],
        "last_quarter": round(final, 4),
        "reference_last_quarter": [round(v, 4) for v in finals],
        "allowed_last_quarter": [round(low, 4), round(high, 4)],
        "last_quarter_within": final_ok,
        "curve_within_noise": noise["within"],
        "largest_z": noise["largest_z"],
        "z_limit": noise["z_limit"],
        "noise_floor": noise["noise_floor"],
        "curve_within_band": excursion["excess_over_width"] <= 1.0,
        "largest_excursion": excursion,
    }
