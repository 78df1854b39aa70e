"""A training process killed with SIGKILL and resumed ends bit-identical to one that never stopped."""

import json
import signal
import subprocess
import sys
import time

import torch
from corpora import TINY, write_corpus

from transformer_core.cli import main
from transformer_core.model.checkpoint import list_checkpoints, load_checkpoint

# Dropout and label smoothing on, 2 micro-batches per step, epochs of ~12 steps: every piece of
# state (RNG, optimizer, schedule, data position mid-epoch) has to survive the restart.
RUN = [
    *TINY,
    "--steps",
    "120",
    "--max-tokens",
    "64",
    "--tokens-per-step",
    "128",
    "--warmup",
    "20",
    "--checkpoint-interval",
    "10",
    "--keep-last",
    "3",
    "--log-interval",
    "5",
    "--num-threads",
    "1",
]


def run_here(*args):
    threads = torch.get_num_threads()
    try:
        return main([str(a) for a in args])
    finally:
        torch.set_num_threads(threads)


def train_losses(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [
        (r["step"], r["loss"], r["lr"]) for r in map(json.loads, lines) if r["event"] == "train"
    ]


def kill_and_resume(tmp_path, *options):
    """Train RUN straight, and again killed with SIGKILL after its first checkpoint and resumed;
    both final checkpoints, with the two run folders."""
    corpus = write_corpus(tmp_path / "train", n=200)
    train = ["train", "--train", corpus, *RUN, *options]
    assert run_here(*train, "--out-dir", tmp_path / "straight") == 0

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "transformer_core", *map(str, train), "--out-dir", str(killed)],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while (
        not list_checkpoints(killed / "checkpoints")
        and proc.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    steps = [s for s, _ in list_checkpoints(killed / "checkpoints")]
    assert steps and steps[-1] < 120 and not (killed / "summary.json").exists()

    assert run_here(*train, "--out-dir", killed, "--resume") == 0
    a = load_checkpoint(tmp_path / "straight" / "last.pt")
    b = load_checkpoint(killed / "last.pt")
    assert a["step"] == b["step"] == 120 and a["data"] == b["data"]
    for key, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][key]), key
    return a, b, tmp_path / "straight", killed


def test_killed_and_resumed_run_equals_uninterrupted_run(tmp_path):
    a, b, straight, killed = kill_and_resume(tmp_path)
    for pid, state in a["optimizer"]["state"].items():
        assert torch.equal(state["exp_avg_sq"], b["optimizer"]["state"][pid]["exp_avg_sq"])
    # The metrics of the killed session after its last checkpoint were replaced, not duplicated.
    assert train_losses(killed) == train_losses(straight)
    assert (
        json.loads((killed / "summary.json").read_text())["tokens_tgt"]
        == a["token_counts"]["tgt_tokens"]
    )


def test_rerun_of_a_run_whose_outputs_were_deleted_writes_them_all_again(tmp_path):
    """Snakemake deletes a job's outputs (summary.json, last.pt, metrics.jsonl) before it reruns
    it, e.g. after its inputs were rebuilt with identical content, or with --rerun-incomplete.
    The checkpoints alone give them back: the finished run is not retrained, and a resumed run's
    metrics.jsonl starts at step 1, not at the checkpoint it resumed from."""
    corpus = write_corpus(tmp_path / "train", n=200)
    # What the workflow's train rule runs, cut to 20 steps with a checkpoint every 10.
    train = ["train", "--train", corpus, "--dev", corpus, *RUN, "--steps", "20"]
    train += ["--resume", "--restart-if-changed"]
    outputs = ("summary.json", "last.pt", "metrics.jsonl")

    run = tmp_path / "run"
    assert run_here(*train, "--out-dir", run) == 0
    metrics = (run / "metrics.jsonl").read_text()
    summary = json.loads((run / "summary.json").read_text())
    weights = load_checkpoint(run / "last.pt")["model"]
    assert {json.loads(line)["event"] for line in metrics.splitlines()} == {"train", "dev"}
    for deleted in (outputs, ("metrics.jsonl",), ("last.pt",)):
        for name in deleted:
            (run / name).unlink()
        assert run_here(*train, "--out-dir", run) == 0
        assert all((run / name).exists() for name in outputs), deleted
        assert (run / "metrics.jsonl").read_text() == metrics
        again = json.loads((run / "summary.json").read_text())
        assert {**again, "wall_seconds": 0} == {**summary, "wall_seconds": 0}
        last = load_checkpoint(run / "last.pt")
        assert last["step"] == 20 and all(
            torch.equal(weights[k], last["model"][k]) for k in weights
        )
        assert [s for s, _ in list_checkpoints(run / "checkpoints")] == [10, 20]
        assert not (run / "superseded").exists()

    # A run stopped at step 10 whose outputs were deleted, then resumed to step 20: the
    # metrics of steps 1-10 come back from the checkpoint, the same as the straight run's.
    resumed = tmp_path / "resumed"
    assert run_here(*train, "--steps", "10", "--out-dir", resumed) == 0
    for name in outputs:
        (resumed / name).unlink()
    assert run_here(*train, "--out-dir", resumed) == 0
    assert train_losses(resumed) == train_losses(run)
    steps = [
        json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [json.loads(line)["step"] for line in metrics.splitlines()]
