"""bench/gpu/gpu_run.sh rehearsed on the CPU (GPU_RUN_DEVICE=cpu: the same script, commands and
files at tiny sizes): the one call that decides the GPU default, `learning_check tests`, runs
end to end and brings back what the GPU run would, so that a lent GPU's minutes are never lost
to an import, a path or an argument."""

import json
import os
import subprocess
import tarfile

from conftest import ROOT


def test_the_one_gpu_call_rehearsed_on_the_cpu(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "GPU_RUN_DEVICE": "cpu", "OUT": str(out), "GPU_DEADLINE": "400",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    proc = subprocess.run(
        ["bash", "bench/gpu/gpu_run.sh", "learning_check", "tests"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "skipped (deadline)" not in proc.stdout, proc.stdout[-3000:]
    with tarfile.open(out / "gpu_results.tgz") as packed:
        packed.extractall(tmp_path / "results", filter="data")
    results = tmp_path / "results"
    check = json.loads((results / "learning_check_base.json").read_text())
    assert check["seeds"] == [1, 2, 3, 4, 5] and check["device"] == "cpu"
    for path in ("reference", "fixed"):
        assert len(check["paths"][path]["curves"]) == 5
        assert [t["seed"] for t in check["paths"][path]["seed_times"]] == [1, 2, 3, 4, 5]
    assert set(check["checks"]) == {"fixed"}  # no broken candidate unless asked
    assert (
        "passed" in (results / "tests.log").read_text()
        or "skipped" in (results / "tests.log").read_text()
    )
    times = (results / "times.txt").read_text()
    assert "== learning_check:" in times and "== tests:" in times
