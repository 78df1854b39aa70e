"""A training process killed with SIGKILL and resumed ends bit-identical to one that never stopped."""

import json
import signal
import subprocess
import sys
import time

import torch
from test_train import TINY, write_corpus

from transformer_core.checkpoint import list_checkpoints, load_checkpoint
from transformer_core.cli import main

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


def test_killed_and_resumed_run_equals_uninterrupted_run(tmp_path):
    corpus = write_corpus(tmp_path / "train", n=200)
    train = ["train", "--train", corpus, *RUN]
    assert run_here(*train, "--out-dir", tmp_path / "straight") == 0

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "transformer_core", *map(str, train), "--out-dir", str(killed)],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
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
    for pid, state in a["optimizer"]["state"].items():
        assert torch.equal(state["exp_avg_sq"], b["optimizer"]["state"][pid]["exp_avg_sq"])
    # The metrics of the killed session after its last checkpoint were replaced, not duplicated.
    assert train_losses(killed) == train_losses(tmp_path / "straight")
    assert (
        json.loads((killed / "summary.json").read_text())["tokens_tgt"]
        == a["token_counts"]["tgt_tokens"]
    )
