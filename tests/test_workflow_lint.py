"""The workflow passes `snakemake --lint` and `snakefmt --check`."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tool(name):
    return shutil.which(name) or str(Path(sys.executable).parent / name)


def test_snakemake_lint_is_clean():
    for config in (
        "config/config.yaml",
        "config/smoke.yaml",
        "config/multi30k.yaml",
        "config/nltk_parsing.yaml",
    ):
        proc = subprocess.run(
            [tool("snakemake"), "--lint", "--configfile", config],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, config + "\n" + proc.stdout + proc.stderr


def test_snakefmt_check_is_clean():
    proc = subprocess.run(
        [tool("snakefmt"), "--check", "Snakefile", "workflow/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
