"""The paired benchmark (``bench/bench_paired.py``): an old revision's package imported under
another name decodes beside the working tree's, the same weights and batches."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a clone"
)


def test_a_version_against_itself_gives_the_same_outputs(tmp_path):
    out = tmp_path / "paired.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_paired", "--old", "HEAD", "--shape", "tiny"]
        + ["--rounds", "1", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert result["old"] == "HEAD" and result["old_commit"] == head
    assert result["sentences"] == 200
    assert result["identical_outputs"] == 200  # same weights, same search (HEAD of this clone)
    assert len(result["ratios_new_over_old"]) == 1 and result["median_ratio"] > 0


def test_an_unknown_revision_is_one_clear_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_paired", "--old", "no-such-revision"]
        + ["--shape", "tiny", "--out", str(tmp_path / "p.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "--old no-such-revision: git archive failed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "p.json").exists()


def test_a_missing_source_is_one_clear_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_paired", "--old", "HEAD", "--checkpoint"]
        + [str(tmp_path / "no.pt"), "--spm", str(tmp_path / "no.model"), "--source", "x"]
        + ["--out", str(tmp_path / "p.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert f"--checkpoint {tmp_path / 'no.pt'}: no such file" in proc.stderr
    assert "Traceback" not in proc.stderr
