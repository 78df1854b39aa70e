"""Running the workflow from the tests: ``snakemake`` in a working directory of its own, and the
README quickstart on the smoke configuration, run once per test session.

The quickstart (Tables 2 and 3 of ``config/smoke.yaml``) trains 22 models, most of the suite's
time; ``tests/conftest.py`` makes it the session fixture ``smoke_quickstart`` that the report
test reads as is and the end-to-end test copies and carries on from.
"""

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "config" / "smoke.yaml"
QUICKSTART = ("results/table2.csv", "results/table3.csv")


def snakemake(workdir, *args, configfiles=(SMOKE,), timeout=900):
    """``snakemake -s Snakefile -d workdir --configfile ... args``; the completed process."""
    exe = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
    return subprocess.run(
        [
            exe,
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(workdir),
            "--configfile",
            *map(str, configfiles),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass(frozen=True)
class QuickstartRun:
    workdir: Path
    wall_seconds: float
    proc: subprocess.CompletedProcess


def run_quickstart(workdir: Path) -> QuickstartRun:
    """The README quickstart, ``snakemake --cores 2 --scheduler greedy results/table2.csv ...``.

    Its time limit only catches a hang: the quickstart took 4 min 14 s on 2 AVX-512 EPYC cores
    and 11 min 6 s on 2 AVX2-only ones (README, "Tests").
    """
    start = time.monotonic()
    proc = snakemake(
        workdir, "--cores", "2", "--scheduler", "greedy", *QUICKSTART, timeout=1800
    )  # see README
    return QuickstartRun(workdir, time.monotonic() - start, proc)
