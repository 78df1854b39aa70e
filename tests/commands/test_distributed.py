"""Data parallel training: 2 gloo processes under torchrun equal 1 process accumulating 2
micro-batches; 2 "nodes" (torchrun agents at a c10d rendezvous) equal 1 node of 2 processes; a
run resumes on another number of ranks with the same trajectory."""

import json
import shutil
import socket
import subprocess
import sys

import pytest
import torch
from corpora import write_corpus

from transformer_core.cli import main
from transformer_core.data.batching import TokenBucketSampler
from transformer_core.data.dataset import ParallelDataset
from transformer_core.device import cpu_has_native_bf16
from transformer_core.model.checkpoint import load_checkpoint, save_checkpoint
from transformer_core.model.config import ModelConfig
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


BF16_WEIGHTS = ["--precision", "bf16", "--compute-weights", "bf16"]


@pytest.mark.parametrize(
    "extra",
    [
        [],
        pytest.param(
            BF16_WEIGHTS,
            marks=pytest.mark.skipif(not cpu_has_native_bf16(), reason="needs native bf16"),
        ),
    ],
    ids=["fp32", "bf16-weights"],
)
def test_two_gloo_ranks_equal_one_process_with_accumulation(tmp_path, capsys, extra):
    """fp32: to fp32 rounding. With bf16 compute weights the ranks all-reduce bf16 gradients
    where one process adds them in fp32: each weight tensor within 3% after 6 steps (of a
    learning rate that peaks at 0.088 here)."""
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
            *extra,
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
                *extra,
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
        assert tensor.dtype == torch.float32
        if not extra:
            torch.testing.assert_close(a["model"][key], tensor, rtol=0, atol=1e-6)
        elif not key.endswith("w_k.bias"):  # a shift of every key's score: no gradient but noise
            assert (a["model"][key] - tensor).norm() <= 0.03 * tensor.norm(), key
    # Only rank 0 wrote: one summary, one metrics line per step.
    # Dev perplexity: each rank scores its share, the sums are all-reduced.
    dev_ddp, dev_single = (
        json.loads((tmp_path / r / "summary.json").read_text()) for r in ("ddp", "single")
    )
    assert dev_ddp["dev_ppl"] == pytest.approx(dev_single["dev_ppl"], rel=1e-2 if extra else 1e-5)
    metrics = (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()
    assert len([m for m in metrics if '"train"' in m]) == 6


# -- several nodes: torchrun agents meeting at a c10d rendezvous ----------------------------------


# Log every 2 steps: the step-3 checkpoint cuts the interval of steps 3 and 4.
CUT_INTERVAL = ("--log-interval", "2")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(corpus, dev, out, *launch):
    """``torchrun LAUNCH -m transformer_core train`` on the tiny corpus, started (a Popen)."""
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *launch, "-m", "transformer_core",
         "train", "--train", str(corpus), "--dev", str(dev), *COMMON, *CUT_INTERVAL,
         "--out-dir", str(out)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """The tiny run on two "nodes" (two torchrun agents of one process each, meeting at a c10d
    rendezvous on 127.0.0.1, as `srun` starts one agent per node) and on one node (one agent of
    two processes), side by side."""
    root = tmp_path_factory.mktemp("nodes")
    corpus = write_corpus(root / "train", n=40)
    dev = write_corpus(root / "dev", n=9, seed=1)
    rendezvous = ("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                  "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "rehearsal")  # fmt: skip
    agents = [torchrun(corpus, dev, root / "two_nodes", *rendezvous) for _ in range(2)]
    one_node = torchrun(corpus, dev, root / "one_node", "--standalone", "--nproc_per_node", "2")
    for proc in [*agents, one_node]:
        _, log = proc.communicate(timeout=300)
        assert proc.returncode == 0, log[-3000:]
    return {"root": root, "corpus": corpus, "dev": dev}


def test_two_nodes_equal_one_node_bit_for_bit(two_nodes):
    a = load_checkpoint(two_nodes["root"] / "two_nodes" / "last.pt")
    b = load_checkpoint(two_nodes["root"] / "one_node" / "last.pt")
    assert a["step"] == b["step"] == 6 and a["token_counts"] == b["token_counts"]
    assert all(torch.equal(a["model"][key], tensor) for key, tensor in b["model"].items())
    assert (two_nodes["root"] / "two_nodes" / "metrics.jsonl").is_file()  # rank 0 wrote


def preempted(two_nodes, tmp_path):
    """A copy of the two-node run as a preemption after its step-3 checkpoint leaves it."""
    run = tmp_path / "run"
    shutil.copytree(two_nodes["root"] / "two_nodes", run)
    for later in ("checkpoints/step_0000006.pt", "summary.json", "last.pt"):
        (run / later).unlink()
    (run / "train.lock").unlink(missing_ok=True)
    return run


def test_a_run_of_two_nodes_resumes_on_one_with_the_same_trajectory(two_nodes, tmp_path, capsys):
    """Preempted on 2 nodes after its step-3 checkpoint, requeued on 1 process: accumulation
    takes the 2 micro-batches a step the 2 ranks took, in the same order."""
    run = preempted(two_nodes, tmp_path)
    args = ["train", "--train", two_nodes["corpus"], "--dev", two_nodes["dev"], *COMMON]
    assert main([*map(str, args), *CUT_INTERVAL, "--out-dir", str(run), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "written by 2 rank(s), this run has 1: the same micro-batches in the same order" in err
    resumed = load_checkpoint(run / "last.pt")
    whole = load_checkpoint(two_nodes["root"] / "two_nodes" / "last.pt")
    assert resumed["token_counts"] == whole["token_counts"]
    for key, tensor in whole["model"].items():
        torch.testing.assert_close(resumed["model"][key], tensor, rtol=0, atol=1e-6)

    def losses(folder):
        lines = (folder / "metrics.jsonl").read_text().splitlines()
        return [(r["step"], r["loss"]) for r in map(json.loads, lines) if r["event"] == "train"]

    # The record of steps 3 and 4 adds the 2 ranks' step-3 sums, kept in the checkpoint.
    assert [step for step, _ in losses(run)] == [2, 4, 6]
    for (step, loss), (same, expected) in zip(
        losses(run), losses(two_nodes["root"] / "two_nodes"), strict=True
    ):
        assert step == same and loss == pytest.approx(expected, rel=1e-6)


def test_a_requeue_under_max_tokens_auto_keeps_the_recorded_micro_batch(
    two_nodes, tmp_path, capsys
):
    """A cluster requeues a run of 2 ranks (40 tokens a micro-batch: what auto takes there)
    onto 1 with the same `--max-tokens auto`, which would take 80 there: it was refused ("pass
    the same settings") and the workflow retrained from step 0; it continues the trajectory."""
    run = preempted(two_nodes, tmp_path)
    args = ["train", "--train", two_nodes["corpus"], "--dev", two_nodes["dev"], *COMMON]
    auto = [*CUT_INTERVAL, "--max-tokens", "auto", "--out-dir", str(run), "--resume"]
    assert main([*map(str, args), *auto, "--restart-if-changed"]) == 0
    err = capsys.readouterr().err
    assert "keeping the run's micro-batch of 40 tokens (auto would take 80 on 1 device(s))" in err
    assert not (run / "superseded").exists()
    resumed = load_checkpoint(run / "last.pt")
    whole = load_checkpoint(two_nodes["root"] / "two_nodes" / "last.pt")
    assert resumed["token_counts"] == whole["token_counts"]
    for key, tensor in whole["model"].items():
        torch.testing.assert_close(resumed["model"][key], tensor, rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def one_rank_auto(tmp_path_factory):
    """A run of 1 rank under `--max-tokens auto` (all 80 tokens of a step in one micro-batch)
    preempted after its step-3 checkpoint."""
    root = tmp_path_factory.mktemp("one_rank_auto")
    corpus = write_corpus(root / "train", n=40)
    dev = write_corpus(root / "dev", n=9, seed=1)
    common = [*COMMON]
    common[common.index("--max-tokens") + 1] = "auto"
    args = ["train", "--train", str(corpus), "--dev", str(dev), *common]
    assert main([*args, "--out-dir", str(root / "run")]) == 0
    for later in ("checkpoints/step_0000006.pt", "summary.json", "last.pt"):
        (root / "run" / later).unlink()
    return {"root": root, "args": args}


@pytest.mark.parametrize("flags", [[], ["--restart-if-changed"]], ids=["refused", "restarted"])
def test_a_requeue_onto_ranks_that_cannot_hold_the_micro_batch(one_rank_auto, tmp_path, flags):
    """The 1-rank run's micro-batch of 80 tokens cannot be cut by 2 ranks (40 each): it said
    "keeping the run's micro-batch of 80 tokens", then refused with "80 against 40", even
    with --restart-if-changed. Now one line that says what to do, or, as the flag says, the
    run moved aside and a new one of auto's 40 tokens a rank."""
    run = tmp_path / "run"
    shutil.copytree(one_rank_auto["root"] / "run", run)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "transformer_core", *one_rank_auto["args"], "--out-dir", str(run), "--resume",
         *flags],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "keeping the run's micro-batch" not in proc.stderr
    why = "written by 1 rank(s), this run has 2, and they cut other micro-batches"
    if not flags:
        assert proc.returncode != 0 and not (run / "superseded").exists()
        [line] = [x for x in proc.stderr.splitlines() if "transformer-core train: error:" in x]
        assert why in line and "resume it on 1 rank(s)" in line
        assert "micro batch tokens 80 against 40" in line
        return
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert why in proc.stderr and (run / "superseded" / "1" / "checkpoints").is_dir()
    assert load_checkpoint(run / "last.pt")["train_config"]["max_tokens"] == 40


def test_a_refusal_under_torchrun_is_said_once(two_nodes, tmp_path):
    """Every rank meets the same mistake (here the run's 2 ranks resumed on 3, whose epoch
    cuts other micro-batches); the refusal was printed once per rank."""
    run = preempted(two_nodes, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "3",
         "-m", "transformer_core", "train", "--train", str(two_nodes["corpus"]), "--dev",
         str(two_nodes["dev"]), *COMMON, *CUT_INTERVAL, "--out-dir", str(run), "--resume"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    refusals = [
        line for line in proc.stderr.splitlines() if "transformer-core train: error:" in line
    ]
    assert len(refusals) == 1 and "written by 2 rank(s), this run has 3" in refusals[0]


def test_a_resume_on_ranks_that_cut_other_micro_batches_is_refused(two_nodes, tmp_path, capsys):
    run = preempted(two_nodes, tmp_path)
    step3 = run / "checkpoints" / "step_0000003.pt"
    payload = load_checkpoint(step3)
    payload["data"]["epoch_batches"] += 1  # as if the 2 ranks had split one batch more
    extra = {k: v for k, v in payload.items() if k not in ("format", "model_config", "model")}
    extra.pop("checksum")
    save_checkpoint(
        step3, ModelConfig.from_dict(payload["model_config"]), payload["model"], **extra
    )
    args = ["train", "--train", two_nodes["corpus"], "--dev", two_nodes["dev"], *COMMON]
    assert main([*map(str, args), *CUT_INTERVAL, "--out-dir", str(run), "--resume"]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert "written by 2 rank(s), this run has 1, and they cut other micro-batches" in line
    assert "epoch batches" in line and "resume it on 2 rank(s)" in line
