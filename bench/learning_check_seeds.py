"""How many seeds the learning check needs: its criterion re-applied to every subset of k seeds
of a finished check's runs.

The check (``bench.bench_learning_check``) judges a candidate against the band of the
reference's seeds. With few seeds that band is narrow where the seeds happen to agree, so a
candidate that differs only by its dropout masks may leave it; with more it widens to the
reference's real spread. Re-judging each candidate on every k-seed subset of the same runs
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

from bench.bench_learning_check import seed_band_check
from bench.hardware import write_result


def subset_verdicts(reference: list[list[float]], candidate: list[list[float]], k: int) -> dict:
    """The criterion on each subset of ``k`` seeds (the same seeds of both): how many subsets
    there are, how many pass, meet rule 1 and rule 2, and the largest excursion among them."""
    if len(candidate) != len(reference):
        raise ValueError("the candidate and the reference must have run the same seeds")
    checks = [
        seed_band_check([reference[i] for i in seeds], [candidate[i] for i in seeds])
        for seeds in itertools.combinations(range(len(reference)), k)
    ]
    return {
        "subsets": len(checks),
        "pass": sum(check["passes"] for check in checks),
        "rule_1": sum(check["last_quarter_within"] for check in checks),
        "rule_2": sum(check["curve_within_band"] for check in checks),
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
