"""Two workflows on one training run: a second ``snakemake --nolock --rerun-incomplete`` started
while the first trains takes the run for incomplete, deletes its outputs and starts the job, which
fails on the run lock (and Snakemake deletes the outputs again). The first run must end whole: its
``metrics.jsonl`` holding every line its checkpoints recorded, its log lines in ``train.log``."""

import json
import subprocess
import time

import torch
import yaml
from conftest import ROOT, SMOKE, SNAKEMAKE, snakemake_on

TARGET = "runs/en_de/base/summary.json"


def command(tmp_path, *args):
    return [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path / "work"), "--cores",
            "1", *args, TARGET, "--configfile", str(tmp_path / "config.yaml")]  # fmt: skip


def test_a_second_workflow_started_mid_run_loses_nothing_of_the_first(tmp_path):
    config = yaml.safe_load(SMOKE.read_text())
    config["scale_rule"]["step_divisor"] = 250  # 400 steps: time for the second to start
    config["models"]["base"]["checkpoint_interval"] = 100
    data = snakemake_on(tmp_path, config, "data/en_de/bin/train.json", "data/en_de/bin/dev.json")
    assert data.returncode == 0, data.stdout + data.stderr
    run = tmp_path / "work" / "runs" / "en_de" / "base"

    first = subprocess.Popen(
        command(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path
    )
    deadline = time.monotonic() + 300
    while not (run / "checkpoints").is_dir() or not list((run / "checkpoints").glob("*.pt")):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.5)
    second = subprocess.run(
        command(tmp_path, "--nolock", "--rerun-incomplete"),
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert first.poll() is None, "the first run ended before the second started: no test"
    assert second.returncode != 0, second.stdout + second.stderr
    refused = (tmp_path / "work" / "logs" / "train" / "en_de.base.log").read_text()
    assert "is in use by another training session" in refused  # the first's log, replaced
    output = first.communicate(timeout=600)[0]
    assert first.returncode == 0, output

    last = torch.load(run / "last.pt", weights_only=True)
    recorded = "".join(json.dumps(r) + "\n" for r in last["metrics_log"])
    assert (run / "metrics.jsonl").read_text() == recorded
    assert [json.loads(line)["step"] for line in recorded.splitlines()][-1] == 400
    log = (run / "train.log").read_text()
    assert "training base" in log and "done: 400 steps" in log
