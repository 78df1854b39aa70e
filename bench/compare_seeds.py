"""Two training paths over seeds, on the same task: are their test scores within the seeds'
noise? Each path is a workflow folder trained with several seeds (``seeds``); for each run it
reads the test score of the averaged model, the decoding settings chosen for it on dev, and
its training summary, and compares the two paths' test sacreBLEU by Welch's t-test (unequal
variances; two-sided p-value from Student's t distribution), beside the means, standard
deviations, chosen alphas and hypothesis/reference length ratios. Where a path translates
longer than the other, the dev decodes at the paper's alpha (the same setting for every model,
from the dev grid) show where: the hypothesis/reference length ratio of each band of
reference lengths, and Welch's test of the two paths' overall dev ratios.

    python -m bench.compare_seeds --path exact RUN_FOLDER_A --path fixed RUN_FOLDER_B \\
        [--pair en_de] [--out bench/results/HARDWARE/multi30k_exact_against_fixed_shapes.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from bench.lib.hardware import description, result_path, write_result
from transformer_core.decoding.dev_choice import read_score
from transformer_core.errors import UserError
from transformer_core.tables.translation import read_json


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float) -> float:
    """The two-sided p-value of Student's t statistic ``t`` with ``df`` degrees of freedom."""
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def welch(a: list[float], b: list[float]) -> dict:
    """Welch's t-test of the means of ``a`` and ``b`` (at least 2 values each)."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return {"t": round(t, 3), "df": round(df, 2), "p_two_sided": round(t_two_sided(t, df), 4)}


LENGTH_BANDS = ((1, 9), (10, 14), (15, 19), (20, 1000))  # reference words, both ends included
EQUAL_ALPHA = 0.6  # the paper's: every run's dev grid holds it


def length_ratios(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """Whitespace words of the hypotheses over those of the references: overall and for each
    band of reference lengths (``LENGTH_BANDS``)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    pairs = [(len(h.split()), len(r.split())) for h, r in zip(hypotheses, references, strict=True)]
    ratios = {"all": sum(h for h, _ in pairs) / max(1, sum(r for _, r in pairs))}
    for low, high in LENGTH_BANDS:
        band = [(h, r) for h, r in pairs if low <= r <= high]
        if band:
            ratios[f"{low}-{high}"] = sum(h for h, _ in band) / sum(r for _, r in band)
    return {band: round(ratio, 4) for band, ratio in ratios.items()}


def dev_length_ratios(folder: Path, pair: str, run: str) -> dict[str, float] | None:
    """``length_ratios`` of the run's averaged model on dev at ``EQUAL_ALPHA``, beam 4; None
    where its dev grid did not decode that point."""
    hyp = folder / "results" / "translations" / pair / f"{run}.dev.avg.beam4-alpha{EQUAL_ALPHA}.txt"
    if not hyp.is_file():
        return None
    ref = folder / "data" / pair / "prepared" / "dev.tgt"
    try:
        return length_ratios(hyp.read_text().splitlines(), ref.read_text().splitlines())
    except ValueError as error:
        raise SystemExit(f"compare_seeds: {hyp} against {ref}: {error}") from None


def mean_ratios(per_run: list[dict[str, float] | None]) -> dict[str, float] | None:
    """The mean of each band's ratio over the runs that have dev ratios."""
    found = [ratios for ratios in per_run if ratios]
    if not found:
        return None
    return {
        band: round(statistics.fmean(r[band] for r in found if band in r), 4) for band in found[0]
    }


def runs_of(folder: Path, pair: str) -> list[dict]:
    """Every run of ``folder`` with a test score of its averaged model: its name, seed, test
    scores and length ratio, the alpha chosen for it, its dev length ratios at the paper's
    alpha, its dev perplexity and training time."""
    found = []
    for score_path in sorted((folder / "results" / "scores" / pair).glob("*.test.avg.json")):
        run = score_path.name.removesuffix(".test.avg.json")
        summary_path = folder / "runs" / pair / run / "summary.json"
        try:  # a missing or cut file, a NaN score: named, never carried into the comparison
            score = read_score(score_path)
            summary = read_json(summary_path, ("train_config", "dev_ppl", "wall_seconds"))
        except UserError as error:
            raise SystemExit(f"compare_seeds: {error}") from None
        found.append(
            {
                "run": run,
                "seed": summary["train_config"]["seed"],
                "sacrebleu": round(score["sacrebleu"], 2),
                "bleu_paper_style": round(score["bleu_paper_style"], 2),
                "length_ratio": round(score["sacrebleu_stats"]["ratio"], 4),
                "alpha": (score.get("decoding") or {}).get("alpha"),
                "dev_length_ratios_at_equal_alpha": dev_length_ratios(folder, pair, run),
                "dev_ppl": round(summary["dev_ppl"], 3),
                "batch_shapes": summary["train_config"].get("batch_shapes"),
                "target_tokens": summary.get("tokens_tgt"),
                "train_seconds": round(summary["wall_seconds"]),
            }
        )
    return sorted(found, key=lambda run: run["seed"])


def main() -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--path", nargs=2, action="append", required=True,
                        metavar=("LABEL", "FOLDER"), help="a path's workflow folder; twice")  # fmt: skip
    parser.add_argument("--pair", default="en_de")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if len(args.path) != 2 or args.path[0][0] == args.path[1][0]:
        parser.error("give --path twice, with two labels: the two paths compared")
    paths = {label: runs_of(Path(folder), args.pair) for label, folder in args.path}
    for (label, folder), runs in zip(args.path, paths.values(), strict=True):
        if not runs:
            parser.error(f"{label}: {folder} holds no results/scores/{args.pair}/*.test.avg.json")
    summary = {}
    for label, runs in paths.items():
        scores = [run["sacrebleu"] for run in runs]
        summary[label] = {
            "seeds": [run["seed"] for run in runs],
            "sacrebleu_mean": round(statistics.fmean(scores), 2),
            "sacrebleu_sd": round(statistics.stdev(scores), 2) if len(scores) > 1 else None,
            "length_ratio_mean": round(statistics.fmean(r["length_ratio"] for r in runs), 4),
            "alphas": [run["alpha"] for run in runs],
            "dev_length_ratios_at_equal_alpha_mean": mean_ratios(
                [r["dev_length_ratios_at_equal_alpha"] for r in runs]
            ),
        }
    (a, runs_a), (b, runs_b) = paths.items()
    dev_ratios = [
        [
            r["dev_length_ratios_at_equal_alpha"]["all"]
            for r in runs
            if r["dev_length_ratios_at_equal_alpha"]
        ]
        for runs in (runs_a, runs_b)
    ]
    result = {
        "bench": "compare_seeds",
        "pair": args.pair,
        "runs": paths,
        "summary": summary,
        "welch_sacrebleu": welch([r["sacrebleu"] for r in runs_a], [r["sacrebleu"] for r in runs_b])
        if min(len(runs_a), len(runs_b)) > 1
        else None,
        "equal_alpha": EQUAL_ALPHA,
        "welch_dev_length_ratio_at_equal_alpha": welch(*dev_ratios)
        if min(map(len, dev_ratios)) > 1
        else None,
    }
    shown = ("summary", "welch_sacrebleu", "welch_dev_length_ratio_at_equal_alpha")
    print(json.dumps({key: result[key] for key in shown}, indent=1))
    write_result(args.out or result_path("multi30k_seed_comparison"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
