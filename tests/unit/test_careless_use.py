"""The commands used as a careless or hostile user would: an output that names an input, search
settings that are not numbers, damaged files where a checkpoint or text is expected, a run's
metrics cut while it trains, and configurations whose mistakes would show only after training.
Each ends in one line naming the file, flag or key (exit 2) with nothing destroyed, or in a
defined result (docs/failures.md, "The cases, and what happens")."""

import gzip
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest
import test_hostile_inputs
import yaml
from conftest import ROOT, SMOKE
from snakemake.utils import validate
from test_hostile_inputs import cli, one_line_error
from test_hostile_runs import copy_run, train_args, translate_args

from transformer_core.errors import ConfigError
from transformer_core.training.metrics_log import MetricsLog
from transformer_core.workflow_plan.config_checks import check_cores, check_table4
from transformer_core.workflow_plan.config_yaml import check_values
from transformer_core.workflow_plan.runs import RunPlan

world = test_hostile_inputs.world  # the fixture: two tiny pairs, their data and 4-step runs


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- an output that is one of the command's inputs -----------------------------------------------


@pytest.mark.parametrize("which", ["checkpoint", "spm", "input", "hard link to the checkpoint"])
def test_translate_refuses_an_output_that_is_an_input(world, tmp_path, capsys, which):
    ckpt = tmp_path / "last.pt"
    shutil.copy(world["run_a"] / "last.pt", ckpt)
    spm = tmp_path / "spm.model"
    shutil.copy(world["spm_a"], spm)
    source = tmp_path / "input.txt"
    shutil.copy(world["root"] / "input.txt", source)
    output = {"checkpoint": ckpt, "spm": spm, "input": source}.get(which)
    if output is None:
        output = tmp_path / "link.pt"
        os.link(ckpt, output)
    before = {p: digest(p) for p in (ckpt, spm, source)}
    args = translate_args(world, ckpt, output)
    args[args.index("--spm") + 1], args[args.index("--input") + 1] = spm, source
    status, err = cli(capsys, *args)
    assert status == 2
    one_line_error(err, f"--output {output}", "would destroy the input")
    assert {p: digest(p) for p in before} == before


def test_average_refuses_to_write_over_a_checkpoint_it_averages(world, tmp_path, capsys):
    run = copy_run(world, tmp_path)
    newest = sorted((run / "checkpoints").glob("step_*.pt"))[-1]
    before = digest(newest)
    status, err = cli(capsys, "average", "--run-dir", run, "--last", "2", "--out", newest)
    assert status == 2
    one_line_error(err, f"--out {newest}", "would destroy the input")
    assert digest(newest) == before


def test_score_refuses_to_write_over_its_hypotheses(tmp_path, capsys):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a small cat\n")
    ref.write_text("a small cat\n")
    status, err = cli(capsys, "score", "--hyp", hyp, "--ref", ref, "--out", hyp)
    assert status == 2
    one_line_error(err, f"--out {hyp} is --hyp {hyp}")
    assert hyp.read_text() == "a small cat\n"


def test_score_reads_files_through_pipes_once(tmp_path):
    """`--hyp <(cat a) --ref <(cat b)`: a pipe can be read once; each was read two or three
    times (the empty check, the score, the interval), leaving 0 lines or some of them."""
    text = "".join(f"sentence {i} of the test set .\n" for i in range(5000))
    (tmp_path / "a.txt").write_text(text)
    command = (
        f"{shlex.quote(sys.executable)} -m transformer_core score --hyp <(cat a.txt) "
        "--ref <(cat a.txt) --bootstrap-resamples 40 --out s.json"
    )
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    score = json.loads((tmp_path / "s.json").read_text())
    assert score["n_lines"] == 5000 and score["sacrebleu"] == pytest.approx(100.0)
    assert score["sacrebleu_ci"]["resamples"] == 40


def test_a_step_larger_than_the_corpus_is_refused_before_training(world, tmp_path, capsys):
    """--tokens-per-step 10^12 meant 10^9 micro-batches of accumulation, memory growing."""
    run = tmp_path / "run"
    status, err = cli(capsys, *train_args(world, run), "--tokens-per-step", "1000000000000")
    assert status == 2 and not (run / "checkpoints").exists()
    one_line_error(err, "--tokens-per-step 1,000,000,000,000 is more than the training set's")


# -- search settings that are not numbers ----------------------------------------------------------


@pytest.mark.parametrize(
    "flags, named",
    [
        (("--alpha", "nan"), "--alpha"),
        (("--alpha", "inf"), "--alpha"),
        (("--max-len-a", "inf"), "--max-len-a"),
        (("--max-len-a", "nan"), "--max-len-a"),
        (("--max-len-b", "-100"), "--max-len-b -100"),
    ],
)
def test_search_settings_that_would_empty_every_output_are_refused(
    world, tmp_path, capsys, flags, named
):
    out = tmp_path / "out.txt"
    status, err = cli(capsys, *translate_args(world, world["run_a"] / "last.pt", out), *flags)
    assert status == 2
    one_line_error(err, named)
    assert not out.exists()


# -- damaged files where a checkpoint or a text is expected ----------------------------------------


@pytest.mark.parametrize("content", [b"", b"hello, I am a text file\n", b"\x00" * 4096 + b"bin"])
def test_a_file_that_is_no_checkpoint_is_one_short_line(world, tmp_path, capsys, content):
    fake = tmp_path / "model.bin"
    fake.write_bytes(content)
    status, err = cli(capsys, *translate_args(world, fake, tmp_path / "out.txt"))
    assert status == 2
    line = one_line_error(err, f"{fake} is not a checkpoint")
    assert "weights_only" not in err and len(line) < 200


@pytest.mark.parametrize("damage", ["plain text", "cut off"])
def test_a_damaged_gz_input_is_one_line(world, tmp_path, capsys, damage):
    source = tmp_path / "input.txt.gz"
    if damage == "plain text":
        source.write_text("the cat\n")
    else:
        source.write_bytes(gzip.compress(b"the cat\nsmall dog\n" * 200)[:60])
    out = tmp_path / "out.txt"
    args = translate_args(world, world["run_a"] / "last.pt", out)
    args[args.index("--input") + 1] = source
    status, err = cli(capsys, *args)
    assert status == 2
    one_line_error(err, str(source), "gzip")
    assert not out.exists()
    status, err = cli(capsys, "score", "--hyp", source, "--ref", source, "--out", tmp_path / "s")
    assert status == 2
    one_line_error(err, str(source))


def test_dev_null_as_input_translates_to_an_empty_file(world, tmp_path, capsys):
    out = tmp_path / "out.txt"
    args = translate_args(world, world["run_a"] / "last.pt", out)
    args[args.index("--input") + 1] = "/dev/null"
    status, err = cli(capsys, *args)
    assert status == 0, err
    assert out.read_text() == ""


# -- a run's metrics cut while it trains -----------------------------------------------------------


def test_a_metrics_file_deleted_or_cut_mid_run_is_rewritten_whole(tmp_path, capsys):
    log = MetricsLog(tmp_path / "metrics.jsonl", enabled=True)
    log.restore(None)
    for step in (1, 2, 3):
        log.write({"event": "train", "step": step})
    log.path.unlink()  # by hand, or by a second Snakemake that took the job for incomplete
    log.write({"event": "train", "step": 4})
    steps = [json.loads(line)["step"] for line in log.path.read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    log.path.write_text(log.path.read_text()[:20])
    log.write({"event": "train", "step": 5})
    assert [json.loads(line)["step"] for line in log.path.read_text().splitlines()] == [
        1, 2, 3, 4, 5,
    ]  # fmt: skip
    assert "rewritten from the run's records" in capsys.readouterr().err


def test_a_finished_run_with_cut_metrics_is_made_whole_by_resume(world, tmp_path, capsys):
    run = copy_run(world, tmp_path)
    whole = (run / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text("".join(whole.splitlines(keepends=True)[:1]))
    before = digest(run / "last.pt")
    status, err = cli(capsys, *train_args(world, run), "--resume")
    assert status == 0, err
    assert (run / "metrics.jsonl").read_text() == whole
    assert digest(run / "last.pt") == before  # not one step more


def test_a_resumed_run_logs_the_intervals_of_an_uninterrupted_one(world, tmp_path, capsys):
    """A checkpoint (every 2 steps) inside a log interval (3 steps): the resumed session's
    first record averages the interval's steps before the checkpoint too."""
    cadence = ("--steps", "6", "--log-interval", "3", "--checkpoint-interval", "2")
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert cli(capsys, *train_args(world, whole), *cadence)[0] == 0
    assert cli(capsys, *train_args(world, cut), *cadence)[0] == 0
    for later in ("step_0000004.pt", "step_0000006.pt"):
        (cut / "checkpoints" / later).unlink()
    (cut / "summary.json").unlink()
    (cut / "last.pt").unlink()
    status, err = cli(capsys, *train_args(world, cut), *cadence, "--resume")
    assert status == 0, err

    def losses(run):
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [
            (r["step"], r["loss"], r["ppl"], r["tgt_tokens_per_step"])
            for r in records
            if r["event"] == "train"
        ]

    assert losses(cut) == losses(whole) and [s for s, *_ in losses(whole)] == [3, 6]
    assert "resuming from" in (cut / "train.log").read_text()  # every session's lines, kept


# -- configurations whose mistakes would show only after training ---------------------------------


@pytest.mark.parametrize("key", ["decode.alpha", "train.lr_scale", "decode.max_len_a"])
@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_a_number_that_is_not_finite_is_refused_naming_its_key(key, value):
    section, name = key.split(".")
    config = yaml.safe_load(f"{section}:\n  {name}: {value}\n")
    with pytest.raises(ConfigError, match=f"^{key}: .* is not a finite number"):
        check_values(config)


def smoke_config():
    """config/smoke.yaml as the workflow sees it: validated, the schema's defaults in."""
    config = yaml.safe_load(SMOKE.read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    return config


def test_averaging_more_checkpoints_than_a_run_writes_is_refused_before_training():
    config = smoke_config()
    models = config["models"]["base"]
    steps = RunPlan(config).steps(config["table2"]["pairs"][0], "base")
    models["checkpoint_interval"] = steps + 1  # one checkpoint, at the last step
    plan = RunPlan(config)  # a configuration may hold runs no target needs
    with pytest.raises(ConfigError, match="^models.base.average_last: .* writes 1 "):
        plan.train_args(config["table2"]["pairs"][0], "base")


def test_held_out_files_that_leave_no_training_file_are_refused(tmp_path):
    archive = tmp_path / "treebank.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(5):
            zf.writestr(f"treebank/combined/wsj_{i:04d}.mrg", "( (S (NN x)) )\n")
    config = {"pairs": {}, "table4": {"treebank": "nltk", "treebank_zip": str(archive)}}
    config["table4"]["held_out_files"] = 2
    check_table4(config)
    config["table4"]["held_out_files"] = 3
    with pytest.raises(ConfigError, match="^table4.held_out_files: .* 2N < 5 files"):
        check_table4(config)


@pytest.mark.parametrize("cores", [0, -1])
def test_cores_below_one_are_refused(cores):
    check_cores(None)  # --lint, --report: no core count
    check_cores(1)
    with pytest.raises(ConfigError, match=f"--cores {cores}: give at least 1 core"):
        check_cores(cores)
