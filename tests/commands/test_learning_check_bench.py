"""bench.bench_learning_check end to end on the CPU: a short run writes a check for every
candidate, and the broken ones (label smoothing off, the learning rate doubled) fail it."""

import json
import subprocess
import sys

from conftest import ROOT


def test_the_bench_runs_and_its_broken_candidates_fail(tmp_path):
    """A short run on the CPU (2 seeds, 160 steps of the tiny shape): the checks are written
    for every candidate; doubling the learning rate or leaving out label smoothing is caught
    (the full-length result of every path is in bench/results/)."""
    out = tmp_path / "check.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_learning_check", "--steps", "160", "--interval",
         "20", "--seeds", "1", "2", "--dropout", "0.1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert len(result["paths"]["reference"]["curves"]) == 2
    assert not result["checks"]["broken_no_label_smoothing"]["passes"]
    assert not result["checks"]["broken_lr_doubled"]["passes"]
