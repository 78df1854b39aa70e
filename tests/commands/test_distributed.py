"""Data parallel training: 2 gloo processes under torchrun equal 1 process accumulating 2 micro-batches."""

import json
import subprocess
import sys

import pytest
import torch
from corpora import write_corpus

from transformer_core.cli import main
from transformer_core.data.batching import TokenBucketSampler
from transformer_core.data.dataset import ParallelDataset
from transformer_core.model.checkpoint import load_checkpoint
from transformer_core.training import distributed

COMMON = [
    "--experiment",
    "base",
    "--set",
    "encoder_layers=1",
    "--set",
    "decoder_layers=1",
    "--set",
    "d_model=32",
    "--set",
    "d_ff=64",
    "--set",
    "h=2",
    "--set",
    "d_k=16",
    "--set",
    "d_v=16",
    "--set",
    "dropout=0",
    "--steps",
    "6",
    "--max-tokens",
    "40",
    "--tokens-per-step",
    "80",
    "--warmup",
    "4",
    "--checkpoint-interval",
    "3",
    "--log-interval",
    "1",
    "--num-threads",
    "1",
]


def test_single_process_context(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    ctx = distributed.setup("cpu")
    assert (ctx.rank, ctx.world_size, ctx.is_main, ctx.distributed) == (0, 1, True, False)
    assert distributed.all_reduce_sum([1.5, 2], ctx) == [1.5, 2]
    assert distributed.gather_objects("x", ctx) == ["x"]
    distributed.teardown(ctx)
    distributed.teardown(ctx)  # idempotent


def test_two_gloo_ranks_equal_one_process_with_accumulation(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "train", n=40)
    dev = write_corpus(tmp_path / "dev", n=9, seed=1)
    ds = ParallelDataset(corpus)
    # 1 rank x 2 micro-batches and 2 ranks x 1 see the same batches only if the epoch splits evenly.
    assert len(TokenBucketSampler(ds.src_lens, ds.tgt_lens, 40).batches(0)) % 2 == 0
    ddp = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "transformer_core",
            "train",
            "--train",
            str(corpus),
            "--dev",
            str(dev),
            *COMMON,
            "--out-dir",
            str(tmp_path / "ddp"),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    # Meanwhile, the same run as one process in this one (saves a torch start-up).
    threads = torch.get_num_threads()
    try:
        code = main(
            [
                "train",
                "--train",
                str(corpus),
                "--dev",
                str(dev),
                *COMMON,
                "--out-dir",
                str(tmp_path / "single"),
            ]
        )
    finally:
        torch.set_num_threads(threads)
    _, ddp_log = ddp.communicate(timeout=300)
    assert ddp.returncode == 0, ddp_log[-3000:]
    assert "1 accumulation x 2 device(s)" in ddp_log
    assert code == 0 and "2 accumulation x 1 device(s)" in capsys.readouterr().err
    a = load_checkpoint(tmp_path / "ddp" / "last.pt")
    b = load_checkpoint(tmp_path / "single" / "last.pt")
    assert a["step"] == b["step"] == 6 and a["token_counts"] == b["token_counts"]
    assert len(a["rng"]) == 2  # one RNG state per rank
    for key, tensor in b["model"].items():
        torch.testing.assert_close(a["model"][key], tensor, rtol=0, atol=1e-6)
    # Only rank 0 wrote: one summary, one metrics line per step.
    # Dev perplexity: each rank scores its share, the sums are all-reduced.
    dev_ddp, dev_single = (
        json.loads((tmp_path / r / "summary.json").read_text()) for r in ("ddp", "single")
    )
    assert dev_ddp["dev_ppl"] == pytest.approx(dev_single["dev_ppl"], rel=1e-5)
    metrics = (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()
    assert len([m for m in metrics if '"train"' in m]) == 6
