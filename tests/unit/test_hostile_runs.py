"""No silent wrong model (issue 29): one writer per run folder, divergence stops a run,
damaged or non-finite checkpoints and data are refused with one line, and outputs are
checked before the work. The cases are numbered as in docs/failures.md, "What happens when
things go wrong"."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import test_hostile_inputs
import torch
from test_hostile_inputs import TRAIN, cli, one_line_error

from transformer_core.data.binarized import split_files
from transformer_core.model.checkpoint import (
    CorruptCheckpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    tensor_checksums,
)
from transformer_core.model.config import ModelConfig
from transformer_core.training.divergence import DivergenceWatch
from transformer_core.training.run_lock import LOCK_NAME, run_lock

world = test_hostile_inputs.world  # the fixture: two tiny pairs, their data and 4-step runs


def copy_run(world, tmp_path, name="run"):
    run = tmp_path / name
    shutil.copytree(world["run_a"], run)
    (run / LOCK_NAME).unlink(missing_ok=True)
    return run


def train_args(world, run, *extra):
    return ["train", "--train", world["root"] / "bin_a", "--out-dir", run, *TRAIN, *extra]


def translate_args(world, checkpoint, out):
    return [
        "translate", "--checkpoint", checkpoint, "--spm", world["spm_a"],
        "--input", world["root"] / "input.txt", "--output", out, "--beam", "1", "--device", "cpu",
    ]  # fmt: skip


def rewrite(path, edit):
    """Load a checkpoint, change it with ``edit(payload)``, save it again (a new checksum)."""
    payload = load_checkpoint(path)
    edit(payload)
    extra = {k: v for k, v in payload.items() if k not in ("format", "model_config", "model")}
    extra.pop("checksum")
    save_checkpoint(path, ModelConfig.from_dict(payload["model_config"]), payload["model"], **extra)


# -- 1. two trainings on one run folder ----------------------------------------------------------


def test_a_second_training_on_a_held_run_folder_exits_at_once(world, tmp_path, capsys):
    run = copy_run(world, tmp_path)
    before = (run / "metrics.jsonl").read_text()
    with run_lock(run):  # the holder: this process, through its own open file
        status, err = cli(capsys, *train_args(world, run, "--resume", "--steps", "6"))
    assert status == 2
    line = one_line_error(err, run, f"PID {os.getpid()}")
    assert "in use by another training session" in line
    assert (run / "metrics.jsonl").read_text() == before
    assert [s for s, _ in list_checkpoints(run / "checkpoints")] == [2, 4]


def test_a_lock_left_by_a_killed_holder_does_not_block(world, tmp_path, capsys):
    """SLURM requeue: the old job was killed (-9) while holding the lock; the OS released it."""
    run = copy_run(world, tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from transformer_core.training.run_lock import run_lock\n"
         "with run_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(600)", str(run)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        status, err = cli(capsys, *train_args(world, run, "--resume", "--steps", "6"))
        assert status == 2 and f"PID {holder.pid}" in err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    status, err = cli(capsys, *train_args(world, run, "--resume", "--steps", "6"))
    assert status == 0, err
    assert load_checkpoint(run / "last.pt")["step"] == 6


def test_two_concurrent_trainings_one_wins_and_the_folder_holds_its_model(world, tmp_path):
    """The issue's reproduction: run A, then, while A trains, run B with other settings and
    --restart-if-changed on the same folder. B exits 2 at once; A's model stays. A is paused
    (SIGSTOP) while B runs, so that A cannot finish first however slow B's start is."""
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = [str(a) for a in train_args(world, run)]
    steps = ["--steps", "100", "--checkpoint-interval", "100", "--log-interval", "20"]
    a = subprocess.Popen(
        [sys.executable, "-m", "transformer_core", *args, *steps],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (run / LOCK_NAME).exists() or not (run / LOCK_NAME).read_text().strip():
            assert a.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        a.send_signal(signal.SIGSTOP)  # A holds the lock
        b = subprocess.run(
            [sys.executable, "-m", "transformer_core", *args, *steps, "--lr-scale", "2",
             "--resume", "--restart-if-changed"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert b.returncode == 2, b.stderr
        assert f"PID {a.pid}" in b.stderr and "Traceback" not in b.stderr
    finally:
        a.send_signal(signal.SIGCONT)
        _, a_err = a.communicate(timeout=600)
    assert a.returncode == 0, a_err
    assert load_checkpoint(run / "last.pt")["train_config"]["lr_scale"] == 1.0
    assert not (run / "superseded").exists()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(set(lines)) == 100 // 20


def test_a_run_folder_removed_while_it_trains_stops_with_one_line(world, tmp_path):
    """The folder removed (paused, so the removal lands mid-run): TensorBoard's writer thread
    and the session's end were tracebacks. Now one line naming the folder and the step, and
    nothing made anew where the folder was."""
    run = tmp_path / "run"
    args = [str(a) for a in train_args(world, run)]
    steps = ["--steps", "400", "--checkpoint-interval", "20", "--log-interval", "5"]
    a = subprocess.Popen(
        [sys.executable, "-m", "transformer_core", *args, *steps],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not list_checkpoints(run / "checkpoints"):
            assert a.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        a.send_signal(signal.SIGSTOP)
        assert (run / "tensorboard").is_dir()  # its writer thread holds a file there
        shutil.rmtree(run)
    finally:
        a.send_signal(signal.SIGCONT)
        _, err = a.communicate(timeout=600)
    assert a.returncode == 2, err
    line = one_line_error(err, run, "was removed or replaced while the run trained (at step")
    assert "Exception" not in err and not run.exists(), line


# -- 2. divergence -----------------------------------------------------------------------------


def test_divergence_watch_needs_a_sustained_rise():
    watch = DivergenceWatch(vocab_size=8000)  # the minimum starts at ln 8000 = 8.99
    for step, loss in enumerate([9.0, 5.0, 3.0, 2.0, 6.5, 3.0, 6.5, 6.5], start=1):
        assert watch.observe(step, loss) is None  # a spike, then two: not three in a row
    assert watch.observe(9, 6.5) is not None
    tiny = DivergenceWatch(24)  # a nearly memorised task: 2x of 0.05 is noise, the margin holds
    assert all(tiny.observe(s, x) is None for s, x in enumerate([3.0, 0.05, 0.2, 0.9, 0.5]))
    assert "nan" in DivergenceWatch(24).observe(1, math.nan)
    above = DivergenceWatch(
        60
    )  # 8.5 > 2 ln 60 = 8.19: rising (checkpoints unpruned), not yet diverged
    assert above.observe(1, 8.5) is None and above.rising
    first = DivergenceWatch(60)  # blown up from the first interval: above 2 ln 60
    assert [first.observe(s, x) is None for s, x in enumerate([9.0, 20.0, 80.0])] == [1, 1, 0]
    replayed = DivergenceWatch(24)
    replayed.replay([{"event": "train", "step": 1, "loss": 2.0}, {"event": "dev", "step": 1}])
    assert replayed.minimum == 2.0


def strict_json(line):
    """json.loads that refuses NaN and Infinity (not JSON, though Python writes them)."""
    return json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}"))


@pytest.mark.parametrize(
    "lr_scale, warmup, why, kept",
    [
        ("30", "16", "above 2 x its minimum", True),  # spared: written before and during the rise
        ("3000", "2", "the dev perplexity is inf", False),
    ],
)
def test_a_diverging_run_stops_with_one_line_and_keeps_its_good_checkpoints(
    world, tmp_path, capsys, lr_scale, warmup, why, kept
):
    run = tmp_path / "run"
    args = train_args(world, run, "--dev", world["root"] / "bin_a", "--lr-scale", lr_scale)
    status, err = cli(
        capsys, *args, "--steps", "80", "--warmup", warmup, "--checkpoint-interval", "4",
        "--keep-last", "1",
    )  # fmt: skip
    assert status == 2
    line = one_line_error(err, "the run diverged", why, "Lower --lr-scale")
    assert not (run / "summary.json").exists() and not (run / "last.pt").exists()
    records = [strict_json(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["event"] == "diverged"
    steps = [step for step, _ in list_checkpoints(run / "checkpoints")]
    if kept:  # the line names the last checkpoint before the rise: the oldest one kept
        named = re.search(r"before the loss rose is \S*step_(\d+)\.pt", line)
        assert named and steps and steps[0] == int(named.group(1))
    else:
        assert steps == []
    for _, path in list_checkpoints(run / "checkpoints"):  # every one kept loads, finite
        assert math.isfinite(load_checkpoint(path)["metrics"]["dev_ppl"])


# -- 3. non-finite weights ---------------------------------------------------------------------


@pytest.fixture
def nan_checkpoint(world, tmp_path):
    path = tmp_path / "nan.pt"
    shutil.copyfile(world["run_a"] / "last.pt", path)
    rewrite(path, lambda p: p["model"]["embedding.weight"].__setitem__((5, 3), math.nan))
    return path


def test_translate_ppl_and_average_refuse_non_finite_weights(
    world, nan_checkpoint, tmp_path, capsys
):
    out = tmp_path / "out.txt"
    status, err = cli(capsys, *translate_args(world, nan_checkpoint, out))
    assert status == 2 and "embedding.weight" in one_line_error(err, nan_checkpoint, "NaN")
    status, err = cli(capsys, "ppl", "--checkpoint", nan_checkpoint, "--data",
                      world["root"] / "bin_a", "--out", tmp_path / "ppl.json", "--device", "cpu")  # fmt: skip
    assert status == 2 and one_line_error(err, nan_checkpoint)
    status, err = cli(capsys, "average", "--checkpoints", world["run_a"] / "last.pt",
                      nan_checkpoint, "--out", tmp_path / "avg.pt")  # fmt: skip
    assert status == 2 and one_line_error(err, nan_checkpoint)
    assert not any((tmp_path / n).exists() for n in ("out.txt", "ppl.json", "avg.pt"))


def test_resume_refuses_non_finite_weights(world, tmp_path, capsys):
    run = copy_run(world, tmp_path)
    newest = list_checkpoints(run / "checkpoints")[-1][1]
    rewrite(newest, lambda p: p["model"]["embedding.weight"].__setitem__((1, 1), math.inf))
    status, err = cli(capsys, *train_args(world, run, "--resume", "--steps", "6"))
    assert status == 2 and one_line_error(err, newest)
    assert newest.exists()


# -- 4. checkpoint integrity ------------------------------------------------------------------


def flip_a_byte_of(path, tensor):
    """Flip one byte inside ``tensor``'s data in the checkpoint file (found by its bytes)."""
    data = bytearray(path.read_bytes())
    needle = tensor.contiguous().view(torch.uint8).numpy().tobytes()[:64]
    where = data.find(needle)
    assert where > 0 and data.find(needle, where + 1) < 0
    data[where + 17] ^= 0x40
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_tensor_data_is_found(world, tmp_path, capsys):
    path = tmp_path / "damaged.pt"
    shutil.copyfile(world["run_a"] / "last.pt", path)
    payload = load_checkpoint(path)
    assert payload["checksum"]["tensors"] == tensor_checksums(payload)
    flip_a_byte_of(path, payload["model"]["embedding.weight"])
    with pytest.raises(CorruptCheckpoint, match="tensor /model/embedding.weight does not match"):
        load_checkpoint(path)
    status, err = cli(capsys, *translate_args(world, path, tmp_path / "out.txt"))
    assert status == 2 and "checksum" in one_line_error(err, path)


def test_resume_sets_a_damaged_newest_checkpoint_aside(world, tmp_path, capsys):
    run = copy_run(world, tmp_path)
    newest = list_checkpoints(run / "checkpoints")[-1][1]
    flip_a_byte_of(newest, load_checkpoint(newest)["optimizer"]["state"][0]["exp_avg_sq"])
    status, err = cli(capsys, *train_args(world, run, "--resume", "--steps", "6"))
    assert status == 0, err
    assert "checksum" in err and newest.with_name(newest.name + ".corrupt").exists()
    assert "resuming from" in err and "step_0000002.pt" in err


# -- 5. binarized data ---------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["ids", "offset", "length"])
def test_damaged_binarized_data_is_refused_at_load(world, tmp_path, capsys, damage):
    prefix = tmp_path / "bin"
    for path in split_files(world["root"] / "bin_a").values():
        shutil.copyfile(path, Path(str(prefix) + path.name[len("bin_a") :]))
    files = split_files(prefix)
    if damage == "ids":
        damaged = files["src.bin"]
        damaged.write_bytes(b"\xff" * damaged.stat().st_size)
    elif damage == "offset":
        damaged = files["src.idx"]
        offsets = np.fromfile(damaged, dtype="<i8")
        offsets[3] += 1_000_000
        offsets.tofile(damaged)
    else:
        damaged = files["tgt.len"]
        lengths = np.fromfile(damaged, dtype="<i4")
        lengths[0] += 1
        lengths.tofile(damaged)
    status, err = cli(capsys, "train", "--train", prefix, "--out-dir", tmp_path / "run", *TRAIN)
    assert status == 2
    one_line_error(err, damaged)
    assert not (tmp_path / "run").exists()


# -- 6. outputs checked before the work ----------------------------------------------------------


def mount_tmpfs(folder, options):
    """Mount a tmpfs with ``options`` on ``folder``; False where this machine does not allow it."""
    folder.mkdir(exist_ok=True)
    command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)]
    return subprocess.run(command, capture_output=True).returncode == 0


@pytest.fixture
def read_only_folder(tmp_path):
    """A read-only file system (tmpfs mounted ro): permissions alone do not stop root."""
    folder = tmp_path / "ro"
    if not mount_tmpfs(folder, "ro,size=1m"):
        if os.geteuid() == 0:
            pytest.skip("cannot mount a read-only tmpfs here")
        folder.chmod(0o555)
    yield folder
    subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(kib)``: a folder on a tmpfs of that size (skips where mounting is refused)."""
    mounted = []

    def make(kib):
        folder = tmp_path / f"disk{len(mounted)}"
        if not mount_tmpfs(folder, f"size={kib}k"):
            pytest.skip("cannot mount a small tmpfs here (needs root)")
        mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_outputs_in_a_read_only_folder_fail_before_the_work(world, read_only_folder, capsys):
    out = read_only_folder / "out.txt"
    status, err = cli(capsys, *translate_args(world, world["run_a"] / "last.pt", out))
    assert status == 2 and "cannot write" in one_line_error(err, read_only_folder)
    status, err = cli(capsys, *train_args(world, read_only_folder / "run"))
    assert status == 2 and one_line_error(err, "--out-dir", read_only_folder)


def test_a_parent_that_is_a_file(world, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    status, err = cli(capsys, *train_args(world, blocker / "run"))
    assert status == 2 and one_line_error(err, blocker)


# -- 9. a kill between prepare's two renames ----------------------------------------------------


def test_a_kill_between_the_renames_of_a_pair_never_leaves_an_old_half(tmp_path, monkeypatch):
    from transformer_core.data.prepare import prepare_corpus
    from transformer_core.settings import PrepareSettings

    for side, text in (("src", "a b\nc d\n"), ("tgt", "x y\nz w\n")):
        (tmp_path / f"in.{side}").write_text(text)
        (tmp_path / f"out.{side}").write_text("old\nold\n")
    renames = []

    def killed_after_one(source, target):
        if renames:
            raise KeyboardInterrupt  # the kill, between the two renames
        renames.append(target)
        os.rename(source, target)

    monkeypatch.setattr(os, "replace", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(
            *(tmp_path / f"in.{s}" for s in ("src", "tgt")),
            *(tmp_path / f"out.{s}" for s in ("src", "tgt")),
            PrepareSettings("en", "de", filter=False),
        )
    left = {p.name: p.read_text() for p in tmp_path.glob("out.*")}
    assert len(left) == 1 and "old\n" not in left.values()  # one new half, no old one
    assert not list(tmp_path.glob(".*tmp"))


# -- 10. a full disk -------------------------------------------------------------------------


def test_a_short_disk_frees_superseded_checkpoints_before_the_write(world, small_disk, capsys):
    run = small_disk(1900) / "run"
    args = train_args(world, run, "--steps", "8", "--keep-last", "2")
    status, err = cli(capsys, *args)
    assert status == 0, err
    assert "low on disk space: removed" in err
    assert [s for s, _ in list_checkpoints(run / "checkpoints")] == [6, 8]


def test_a_full_disk_is_one_line_and_the_run_resumes(world, small_disk, capsys):
    run = small_disk(800) / "run"
    status, err = cli(capsys, *train_args(world, run, "--steps", "8", "--keep-last", "3"))
    assert status == 2
    assert "the disk is full" in one_line_error(err, run / "checkpoints", "MB free")
    assert [s for s, _ in list_checkpoints(run / "checkpoints")] == [2, 4]
    assert not list((run / "checkpoints").glob(".*tmp"))
    args = train_args(world, run, "--steps", "8", "--keep-last", "1", "--resume")
    status, err = cli(capsys, *args)
    assert status == 0, err
    assert load_checkpoint(run / "last.pt")["step"] == 8


# -- 11. a crafted model config ----------------------------------------------------------------


def test_a_config_edited_to_ask_for_terabytes_is_refused_before_allocating(world, tmp_path, capsys):
    path = tmp_path / "huge.pt"
    shutil.copyfile(world["run_a"] / "last.pt", path)
    rewrite(path, lambda p: p["model_config"].update(d_model=2**20, d_ff=2**22))
    status, err = cli(capsys, *translate_args(world, path, tmp_path / "out.txt"))
    assert status == 2 and "do not match its stored model_config" in one_line_error(err, path)


# -- 11. one line, exit 2, where tracebacks were -------------------------------------------------


def test_a_damaged_sentencepiece_model_is_one_line(world, tmp_path, capsys):
    bad = tmp_path / "bad.model"
    bad.write_bytes(world["spm_a"].read_bytes()[:200])
    text = world["root"] / "input.txt"
    status, err = cli(capsys, "binarize", "--spm", bad, "--src", text, "--tgt", text,
                      "--out-prefix", tmp_path / "bin")  # fmt: skip
    assert status == 2 and "not a readable sentencepiece model" in one_line_error(err, bad)
    status, err = cli(capsys, "spm", "encode", "--model", bad, "--input", text,
                      "--output", tmp_path / "out.txt")  # fmt: skip
    assert status == 2 and one_line_error(err, bad)
    assert not list(tmp_path.glob("bin*")) and not (tmp_path / "out.txt").exists()


def test_outputs_under_a_file_are_one_line_before_the_work(world, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    text = world["root"] / "input.txt"
    for args in (
        ["spm", "train", "--input", text, "--vocab-size", "40", "--model-prefix", blocker / "spm"],
        ["download", "--dataset", "smoke_en_de", "--out", blocker / "data"],
        ["binarize", "--spm", world["spm_a"], "--src", text, "--tgt", text,
         "--out-prefix", blocker / "bin"],
        ["prepare", "--src-in", text, "--tgt-in", text, "--src-out", blocker / "a",
         "--tgt-out", blocker / "b", "--report", blocker / "r.json"],
    ):  # fmt: skip
        status, err = cli(capsys, *args)
        assert status == 2, (args, err)
        one_line_error(err, blocker)
    assert blocker.read_text() == "x"


# -- 12. smaller cases ------------------------------------------------------------------------


def test_prepare_counts_and_reports_bytes_that_are_not_utf8(tmp_path, capsys):
    (tmp_path / "in.src").write_bytes(b"ein Haus\nkaputt \xff\xfe hier\n")
    (tmp_path / "in.tgt").write_bytes(b"a house\nbroken here\n")
    report = tmp_path / "report.json"
    status, err = cli(capsys, "prepare", "--src-in", tmp_path / "in.src", "--tgt-in",
                      tmp_path / "in.tgt", "--src-out", tmp_path / "out.src", "--tgt-out",
                      tmp_path / "out.tgt", "--report", report, "--no-filter")  # fmt: skip
    assert status == 0, err
    assert json.loads(report.read_text())["lines_with_invalid_utf8"] == {"src": 1, "tgt": 0}
    assert "WARNING: 1 source and 0 target lines held bytes that are not UTF-8" in err


def test_temporaries_of_killed_writers_are_cleaned_by_the_next_write(tmp_path):
    from transformer_core.files import atomic_write_text, temporary_prefix

    target = tmp_path / "out.txt"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    mine = temporary_prefix(target)
    orphan = tmp_path / f"{mine.rsplit('-', 1)[0]}-{dead}.abc.tmp"
    orphan.write_text("half")
    live = tmp_path / f"{mine}live.tmp"  # this process's: a writer still at work
    live.write_text("busy")
    other = tmp_path / ".out.txt.otherhost-1.abc.tmp"  # another host's: never judged here
    other.write_text("theirs")
    atomic_write_text(target, "whole\n")
    assert target.read_text() == "whole\n"
    assert not orphan.exists() and live.exists() and other.exists()


def test_a_run_resumed_in_another_precision_records_both():
    from transformer_core.training.session import run_precision

    assert run_precision(None, "bf16") == "bf16"
    assert run_precision({"precision": "bf16"}, "bf16") == "bf16"
    assert run_precision({"precision": "bf16"}, "fp32") == "bf16+fp32"
    assert run_precision({"precision": "bf16+fp32"}, "fp32") == "bf16+fp32"
    assert run_precision({"precision": "bf16+fp32"}, "bf16") == "bf16+fp32+bf16"


def test_resuming_a_bf16_run_in_fp32_records_both(world, tmp_path, capsys):
    from transformer_core.device import cpu_has_native_bf16

    if not cpu_has_native_bf16():
        pytest.skip("the fixture's runs are fp32 on a CPU without native bf16")
    run = copy_run(world, tmp_path)
    assert load_checkpoint(run / "last.pt")["precision"] == "bf16"
    args = train_args(world, run, "--resume", "--steps", "6", "--precision", "fp32")
    status, err = cli(capsys, *args)
    assert status == 0, err
    assert json.loads((run / "summary.json").read_text())["precision"] == "bf16+fp32"
    assert load_checkpoint(run / "last.pt")["precision"] == "bf16+fp32"
