"""How many seeds the learning check needs: its criterion re-applied to every subset of k seeds
of a finished check's runs.

The check (``bench.bench_learning_check``, its criterion ``bench.lib.learning_check``) judges a candidate against the reference's seeds.
Its former rule 2, a band of the seeds' minimum to maximum, is narrow where few seeds happen to
agree, so a candidate that differs only by its dropout masks may leave it; rule 2' floors its
unit by the reference's noise over the whole run. Both are counted here. Re-judging each candidate on every k-seed subset of the same runs
(the reference and the candidate on the same seeds) counts, for each k, how often a path
passes: a path that learns as the reference does should pass at every subset of the chosen k,
a broken one at none. No training: it reads the curves a check wrote.

    python -m bench.learning_check_seeds bench/results/epyc_avx2/learning_check.json \
        [more checks of the same reference ...] [--out FILE]

Writes ``learning_check_seeds.json`` beside the first file (or ``--out``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from bench.lib.hardware import write_result
from bench.lib.learning_check import seed_band_check


def subset_verdicts(reference: list[list[float]], candidate: list[list[float]], k: int) -> dict:
    """The criterion on each subset of ``k`` seeds (the same seeds of both): how many subsets
    there are, how many pass, are void (the gate), meet rule 1, rule 2' and the former rule 2,
    and the largest |z| and band excursion among them."""
    if len(candidate) != len(reference):
        raise ValueError("the candidate and the reference must have run the same seeds")
    checks = [
        seed_band_check([reference[i] for i in seeds], [candidate[i] for i in seeds])
        for seeds in itertools.combinations(range(len(reference)), k)
    ]
    return {
        "subsets": len(checks),
        "pass": sum(check["passes"] is True for check in checks),
        "void": sum(check["passes"] is None for check in checks),
        "rule_1": sum(check["last_quarter_within"] for check in checks),
        "rule_2_noise": sum(check["curve_within_noise"] for check in checks),
        "rule_2_band": sum(check["curve_within_band"] for check in checks),
        "largest_z": max(abs(c["largest_z"]["z"]) for c in checks),
        "z_limit": checks[0]["z_limit"],
        "largest_excursion": max(c["largest_excursion"]["excess_over_width"] for c in checks),
    }


def seed_counts(result: dict) -> dict:
    """Each candidate of one check's ``result``, judged on its subsets of every size from 2
    seeds to all of them."""
    reference = result["paths"]["reference"]["curves"]
    return {
        name: {
            str(k): subset_verdicts(reference, path["curves"], k)
            for k in range(2, len(reference) + 1)
        }
        for name, path in result["paths"].items()
        if name != "reference"
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checks", nargs="+", type=Path, help="learning_check*.json files")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result: dict = {"bench": "learning_check_seeds", "checks": {}}
    for path in args.checks:
        try:
            check = json.loads(path.read_text(encoding="utf-8"))
            result["checks"][path.name] = {"seeds": check["seeds"], **seed_counts(check)}
        except (OSError, ValueError, KeyError) as error:
            parser.error(f"{path}: not a finished learning check ({error!r})")
    write_result(args.out or args.checks[0].with_name("learning_check_seeds.json"), result)
    for name, paths in result["checks"].items():
        for path, sizes in paths.items():
            if path != "seeds":
                print(name, path, {k: f"{v['pass']}/{v['subsets']}" for k, v in sizes.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
