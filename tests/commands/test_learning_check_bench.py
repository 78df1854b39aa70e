"""bench.bench_learning_check end to end on the CPU: a short run writes a check for every
candidate, and the learning rate doubled fails it."""

import json
import subprocess
import sys

from conftest import ROOT


def test_the_bench_runs_and_the_doubled_learning_rate_fails(tmp_path):
    """A short run on the CPU (2 seeds, 160 steps of the tiny shape): the check is written, with
    every seed's curve and times; doubling the learning rate is caught by rule 1 and rule 2'
    (label smoothing off, a change within the seeds' noise here, passes: docs/gpu.md; the
    full-length result of every path is in bench/results/)."""
    out = tmp_path / "check.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_learning_check", "--steps", "160", "--interval",
         "20", "--seeds", "1", "2", "--dropout", "0.1", "--broken", "lr_doubled",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert len(result["paths"]["reference"]["curves"]) == 2
    assert [t["seed"] for t in result["paths"]["reference"]["seed_times"]] == [1, 2]
    doubled = result["checks"]["broken_lr_doubled"]
    assert doubled["valid"] and doubled["passes"] is False
    assert not doubled["curve_within_noise"] and not doubled["last_quarter_within"]
