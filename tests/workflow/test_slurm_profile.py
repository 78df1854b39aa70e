"""Cluster submission through workflow/profiles/slurm, checked on a real SLURM.

tests/slurm/local_slurm.sh starts a single-node cluster on this machine (installing
SLURM from Debian packages when absent); the profile then drives a workflow through
sbatch, and the cluster's jobcomp record of every finished job shows what each sbatch
call asked for. The tests skip, with the script's reason, only where SLURM cannot be
installed or started, or where a SLURM set up by someone else is present.

`run_on_local_slurm` and `slurm_jobs` take the workflow (Snakefile, config file,
targets, working directory) as arguments: the stand-in under tests/slurm/workflow
today, the real pipeline with config/smoke.yaml as soon as it exists. The profile
renders rule resources from the rule's name, so any workflow whose rules carry the
pipeline's names is checked against the same table.
"""

import ast
import importlib.util
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from conftest import ROOT
from snakemake.profiles import ProfileConfigFileParser

REPO = ROOT
LOCAL_SLURM = REPO / "tests" / "slurm" / "local_slurm.sh"
STAND_IN = REPO / "tests" / "slurm" / "workflow" / "Snakefile"
PIPELINE = REPO / "Snakefile"
SMOKE_CONFIG = REPO / "config" / "smoke.yaml"
SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"
DEFAULT_PROFILE = REPO / "workflow" / "profiles" / "default"

PIPELINE_RULES = (
    "download", "prepare", "shard_index", "prepare_shard", "prepare_report",
    "spm_train", "binarize", "binarize_shard", "merge_shards", "train", "average",
    "translate", "score", "table3_row", "table2", "table3", "report",
)  # fmt: skip
GPU_RULES = ("train", "translate")
# local_slurm.sh exit codes meaning "no cluster here": cannot install SLURM, cannot
# start it, or a SLURM configured by someone else is present.
NO_CLUSTER_CODES = (3, 4, 5)
# What the local cluster needs on top of the profile: it has no slurmdbd, so job states
# come from squeue (slurm.conf keeps finished jobs there for MinJobAge=600 s); the first
# status check comes after 1 s instead of 40 s; and successful jobs keep their logs,
# whose paths (logs/slurm/rule_<rule>/<wildcards>/<jobid>.log) name each job's rule.
LOCAL_CLUSTER_ARGS = (
    "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "1",
    "--slurm-keep-successful-logs",
)  # fmt: skip
PROFILE_ENV_PREFIXES = ("TRANSFORMER_SLURM_", "TRANSFORMER_LOCAL_")


# --- profiles, rendered the way `snakemake --profile` renders them ---------------------


@contextmanager
def profile_environment(env):
    """os.environ with only `env` among the profiles' own variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PROFILE_ENV_PREFIXES)}
    with mock.patch.dict(os.environ, {**clean, **env}, clear=True):
        yield


def render_profile(profile_dir, env=None):
    """The profile's options as Snakemake reads them (YTE-rendered) under `env`."""
    with profile_environment(env or {}), open(profile_dir / "config.yaml") as stream:
        return dict(ProfileConfigFileParser().parse(stream))


def _value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def resource_table(profile):
    """{rule: {resource: value}} from set-resources, plus "*" for default-resources."""
    table = {"*": dict(_split_assignment(a) for a in profile.get("default-resources", []))}
    for entry in profile.get("set-resources", []):
        rule, assignment = entry.split(":", 1)
        name, value = _split_assignment(assignment)
        table.setdefault(rule, {})[name] = value
    return table


def _split_assignment(assignment):
    name, value = assignment.split("=", 1)
    return name, _value(value)


def rule_resources(table, rule):
    return {**table["*"], **table.get(rule, {})}


@pytest.mark.parametrize("size", ["paper", "smoke"])
def test_slurm_profile_sizes_every_pipeline_rule(size):
    table = resource_table(render_profile(SLURM_PROFILE, {"TRANSFORMER_SLURM_SIZE": size}))
    assert set(table) - {"*"} == set(PIPELINE_RULES)
    for rule in PIPELINE_RULES:
        for name in ("runtime", "mem_mb", "cpus_per_task"):
            assert isinstance(table[rule][name], int) and table[rule][name] > 0, (rule, name)
    if size == "smoke":  # the whole DAG fits a 2-CPU, 4 GB machine such as the test cluster
        assert max(table[r]["cpus_per_task"] for r in PIPELINE_RULES) <= 2
        assert max(table[r]["mem_mb"] for r in PIPELINE_RULES) <= 4000


@pytest.mark.parametrize(
    ("env", "train", "translate"),
    [
        ({}, {"gpu": 1}, {"gpu": 1}),
        ({"TRANSFORMER_SLURM_GPUS": "0"}, {}, {}),
        ({"TRANSFORMER_SLURM_SIZE": "smoke"}, {}, {}),
        (
            {"TRANSFORMER_SLURM_SIZE": "smoke", "TRANSFORMER_SLURM_GPUS": "1"},
            {"gpu": 1},
            {"gpu": 1},
        ),
        (
            {"TRANSFORMER_SLURM_GPUS": "8", "TRANSFORMER_SLURM_GPU_MODEL": "a100"},
            {"gpu": 8, "gpu_model": "a100"},
            {"gpu": 1, "gpu_model": "a100"},
        ),
    ],
)
def test_slurm_profile_gpu_requests(env, train, translate):
    table = resource_table(render_profile(SLURM_PROFILE, env))

    def gpu_part(rule):
        return {k: v for k, v in table[rule].items() if k.startswith("gpu")}

    assert gpu_part("train") == train
    assert gpu_part("translate") == translate
    assert not any(gpu_part(rule) for rule in PIPELINE_RULES if rule not in GPU_RULES)


def test_slurm_profile_account_and_partition_only_when_given():
    unset = resource_table(render_profile(SLURM_PROFILE))["*"]
    assert "slurm_account" not in unset and "slurm_partition" not in unset
    given = resource_table(
        render_profile(
            SLURM_PROFILE,
            {"TRANSFORMER_SLURM_ACCOUNT": "list", "TRANSFORMER_SLURM_PARTITION": "gpu-a100"},
        )
    )["*"]
    # quoted, so that an account named like a Python builtin stays a string
    assert given["slurm_account"] == "list" and given["slurm_partition"] == "gpu-a100"


@pytest.mark.parametrize(("gpus", "claims"), [("0", {}), ("2", {"train": 2, "translate": 2})])
def test_default_profile_gpus(gpus, claims):
    profile = render_profile(DEFAULT_PROFILE, {"TRANSFORMER_LOCAL_GPUS": gpus})
    assert profile["resources"] == [f"gpu={gpus}"]
    table = resource_table(profile)
    assert {rule: res["gpu"] for rule, res in table.items() if rule != "*"} == claims
    assert profile["keep-going"] == "False" and profile["rerun-incomplete"] == "True"


# --- the local cluster ---------------------------------------------------------------


@dataclass(frozen=True)
class LocalSlurm:
    scratch: Path

    @property
    def jobcomp(self):
        return self.scratch / "jobcomp.log"

    def log_tail(self, lines=15):
        tails = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.scratch / "log" / name
            if path.exists():
                tails.append(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-lines:]))
        return "\n".join(tails)


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory):
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')")
    scratch = tmp_path_factory.mktemp("local-slurm")
    try:
        # apt-get may have to install SLURM first: allow it minutes.
        started = subprocess.run(
            ["bash", str(LOCAL_SLURM), "start", str(scratch)],
            capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        if started.returncode in NO_CLUSTER_CODES:
            pytest.skip(
                f"no local SLURM (local_slurm.sh exit {started.returncode}): {started.stderr.strip()}"
            )
        assert started.returncode == 0, started.stderr
        yield LocalSlurm(scratch)
    finally:
        # Also after a failed start or test: cancels jobs, stops the daemons, deletes scratch.
        subprocess.run(
            ["bash", str(LOCAL_SLURM), "stop", str(scratch)], capture_output=True, timeout=120
        )


def run_on_local_slurm(workdir, snakefile, *, targets=(), configfiles=(), env=None, timeout=600):
    """`snakemake --profile workflow/profiles/slurm` on the local cluster, at smoke size."""
    command = [
        sys.executable, "-m", "snakemake",
        "--snakefile", str(snakefile),
        "--directory", str(workdir),
        "--profile", str(SLURM_PROFILE),
        *LOCAL_CLUSTER_ARGS,
    ]  # fmt: skip
    command += list(targets)  # before --configfile, whose nargs="+" would swallow them
    if configfiles:
        command += ["--configfile", *map(str, configfiles)]
    with profile_environment({"TRANSFORMER_SLURM_SIZE": "smoke", **(env or {})}):
        run_env = dict(os.environ)
    return subprocess.run(
        command, cwd=workdir, env=run_env, capture_output=True, text=True, timeout=timeout
    )


@dataclass(frozen=True)
class SlurmJob:
    """One finished sbatch job: its rule (from its log's path) and its jobcomp record."""

    rule: str
    wildcards: str  # the log path's part between rule_<rule>/ and <jobid>.log
    job_id: str
    record: dict

    @property
    def time_limit_min(self):
        return _minutes(self.record["TimeLimit"])

    @property
    def tres(self):
        return dict(item.split("=", 1) for item in self.record["Tres"].split(","))

    @property
    def mem_mb(self):
        mem = self.tres["mem"]
        return int(float(mem[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[mem[-1]])


def _minutes(time_limit):
    """jobcomp's TimeLimit (minutes, or [D-]HH:MM:SS) in minutes."""
    if time_limit.isdigit():
        return int(time_limit)
    days, _, clock = time_limit.rpartition("-")
    hours, minutes, seconds = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + hours * 60 + minutes + (seconds > 0)


def parse_jobcomp(path):
    """{job id: {field: value}} from jobcomp/filetxt lines ("JobId=3 ... Tres=cpu=2,...")."""
    records = {}
    for line in path.read_text().splitlines():
        record = dict(re.findall(r"(\w+)=(.*?)(?=\s\w+=|\s*$)", line))
        if "JobId" in record:
            records[record["JobId"]] = record
    return records


def slurm_jobs(cluster, workdir):
    """The jobs one run submitted, named by the logs it kept under workdir/logs/slurm."""
    records = parse_jobcomp(cluster.jobcomp)
    jobs = []
    for log in sorted((workdir / "logs" / "slurm").glob("rule_*/**/*.log")):
        parts = log.relative_to(workdir / "logs" / "slurm").parts
        job_id = log.stem
        assert job_id in records, f"job {job_id} ({log}) is missing from {cluster.jobcomp}"
        jobs.append(
            SlurmJob(parts[0].removeprefix("rule_"), "/".join(parts[1:-1]), job_id, records[job_id])
        )
    return jobs


def assert_jobs_got_profile_resources(jobs, profile_env):
    """Each job completed with the runtime, memory and CPUs the profile gives its rule."""
    table = resource_table(render_profile(SLURM_PROFILE, profile_env))
    for job in jobs:
        expected = rule_resources(table, job.rule)
        where = f"{job.rule} {job.wildcards} (job {job.job_id}): {job.record}"
        assert job.record["JobState"] == "COMPLETED" and job.record["ExitCode"] == "0:0", where
        assert job.time_limit_min == expected["runtime"], where
        assert job.mem_mb == expected["mem_mb"], where
        assert int(job.tres["cpu"]) == expected["cpus_per_task"], where
        assert not any(key.startswith("gres/gpu") for key in job.tres), where


def test_smoke_pipeline_runs_through_slurm(local_slurm, tmp_path):
    """Table 2 of the smoke configuration for one pair, every job an sbatch job on the local
    cluster.

    The smoke models train 40 steps here, not 200, and decode at the paper's alpha rather than
    one chosen on dev, for EN-DE only (every rule of Table 2 runs, once or twice): this checks
    the cluster's plumbing, and the smoke workflow test checks that they learn, that the choice
    is made, and both pairs.
    """
    short = tmp_path / "short.yaml"
    short.write_text(  # 2 checkpoints
        "models:\n  base: {steps: 40}\n  big: {steps: 40}\ndecode: {alpha: 0.6}\n"
        "table2: {models: [base, big], pairs: [en_de]}\n"
    )
    run = run_on_local_slurm(
        tmp_path,
        PIPELINE,
        configfiles=(SMOKE_CONFIG, short),
        targets=["results/table2.csv"],
        timeout=1200,
    )
    assert run.returncode == 0, (
        f"{run.stdout[-4000:]}\n{run.stderr[-4000:]}\n{local_slurm.log_tail()}"
    )

    jobs = slurm_jobs(local_slurm, tmp_path)
    for job in jobs:  # shown with `pytest -s`: what SLURM recorded for each job
        record = job.record
        print(
            f"JobId={job.job_id} rule={job.rule} {job.wildcards} JobState={record['JobState']} "
            f"TimeLimit={record['TimeLimit']} Tres={record['Tres']} ExitCode={record['ExitCode']}"
        )
    counts = {}
    for job in jobs:
        counts[job.rule] = counts.get(job.rule, 0) + 1
    # One pair of 2 shards; prepare takes dev and test, binarize dev only; base and big.
    assert counts == {
        "download": 1,
        "prepare": 2,
        "shard_index": 1,
        "prepare_shard": 2,
        "prepare_report": 1,
        "spm_train": 1,
        "binarize": 1,
        "binarize_shard": 2,
        "merge_shards": 1,
        "train": 2,
        "average": 2,
        "translate": 2,
        "score": 2,
        "table2": 1,
    }, counts
    assert len({j.record["Name"] for j in jobs}) == 1  # one run: the plugin names jobs by its id
    assert_jobs_got_profile_resources(jobs, {"TRANSFORMER_SLURM_SIZE": "smoke"})

    # The same table as a local run: our two rows and the paper's literature rows.
    table = (tmp_path / "results" / "table2.csv").read_text().splitlines()
    assert table[0].startswith("source,model,pair,bleu_paper_style,sacrebleu,sacrebleu_signature")
    assert sum(line.startswith("ours,") for line in table) == 2
    assert sum(line.startswith("paper,") for line in table) == 13


def test_gpu_request_reaches_sbatch(local_slurm, tmp_path):
    """With GPUs on (as on a real cluster), `train` asks sbatch for them: --gpus=1.

    The local node has none, so sbatch refuses the job at once and Snakemake reports
    the refused call; nothing runs."""
    (tmp_path / "results").mkdir()
    for lang in ("en", "de"):
        (tmp_path / "results" / f"prepared.{lang}.txt").write_text(lang)
    run = run_on_local_slurm(
        tmp_path, STAND_IN, targets=["results/model.txt"], env={"TRANSFORMER_SLURM_GPUS": "1"}
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0, output[-4000:]
    assert "sbatch failed" in output and "--gpus=1" in output, output[-4000:]
    assert not (tmp_path / "results" / "model.txt").exists()


def test_a_train_job_over_two_nodes_dry_run(tmp_path):
    """What the profile submits for TRANSFORMER_SLURM_NODES=2, TRANSFORMER_SLURM_GPUS=8: the
    sbatch line (built by the plugin's own code from the rendered resources) asks for 2 nodes,
    one task and 8 GPUs on each; the job's command starts one torchrun agent per node with srun.
    (The local cluster is one node: the lines are checked, not run across nodes.)"""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    env = {"TRANSFORMER_SLURM_NODES": "2", "TRANSFORMER_SLURM_GPUS": "8"}
    train = rule_resources(resource_table(render_profile(SLURM_PROFILE, env)), "train")

    class Resources(dict):
        __getattr__ = dict.__getitem__

    job = SimpleNamespace(resources=Resources(train), threads=train["cpus_per_task"])
    params = {"run_uuid": "RUN", "slurm_logfile": "train.log", "comment_str": "rule_train",
              "account": "", "partition": "", "workdir": str(tmp_path)}  # fmt: skip
    sbatch = get_submit_command(job, params) + set_gres_string(job)
    for flag in ("--nodes=2", "--ntasks=2", "--cpus-per-task=8", "--gres=gpu:8"):
        assert f" {flag}" in sbatch, sbatch
    assert "--gpus=" not in sbatch and "--ntasks-per-gpu" not in sbatch

    with profile_environment(env):
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "-s", str(PIPELINE), "-d", str(tmp_path),
             "--profile", str(SLURM_PROFILE), "-n", "-p", "runs/en_de/base/summary.json",
             "--configfile", str(REPO / "config" / "config.yaml")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [command] = [line for line in proc.stdout.splitlines() if " train --train " in line]
    assert 'PET_RDZV_ENDPOINT="$(hostname):' in command and 'PET_RDZV_ID="${SLURM_JOB_ID' in command
    assert (
        "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=8 --gpus-per-node=8 "
        "--kill-on-bad-exit=1 torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d "
        "-m transformer_core train" in command
    )
    assert "--num-threads 1 " in command  # 8 CPUs a node over its 8 ranks
