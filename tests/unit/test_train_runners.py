"""bench.lib.train_runners: the peer trains on the batches our Trainer cuts, a step of several
micro-batches adding their gradients as ours does."""

import pytest
import torch

pytest.importorskip("transformers")

from bench.lib.shapes import SHAPES  # noqa: E402
from bench.lib.train_runners import (  # noqa: E402
    Peer,
    Steps,
    peer_steps,
    peer_throughput,
    synthetic_corpus,
)
from transformer_core.data.batching import TokenBucketSampler  # noqa: E402
from transformer_core.model.config import model_config  # noqa: E402


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    cfg = model_config("base", **SHAPES["tiny"])
    return cfg, synthetic_corpus(tmp_path_factory.mktemp("corpus") / "c", cfg.vocab_size, 400)


def test_peer_steps_are_the_samplers_batches_in_order(task):
    cfg, dataset = task
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, 500, seed=1)
    steps = peer_steps(sampler, dataset, accumulation=2, count=3)
    batches = sampler.batches(0)[:6]
    assert [len(step) for step in steps] == [2, 2, 2]
    for got, want in zip([b for step in steps for b in step], batches, strict=True):
        assert got.src.size(0) == len(want) and got.src.size(1) % 8 == 0
    with pytest.raises(ValueError, match="batches, not"):
        peer_steps(sampler, dataset, accumulation=2, count=10_000)


@pytest.mark.kernels  # numbers of torch's kernels (docs/tests.md)
def test_a_step_adds_its_micro_batches_gradients_over_the_steps_tokens(task):
    cfg, dataset = task
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, 500, seed=1)
    (first, second), = peer_steps(sampler, dataset, accumulation=2, count=1)  # fmt: skip
    cfg = model_config("base", **{**SHAPES["tiny"], "dropout": 0.0})
    split = Peer(cfg, [[first, second]], torch.device("cpu"), autocast=False)
    by_hand = Peer(cfg, [], torch.device("cpu"), autocast=False)  # stepped by hand below
    tokens = first.tgt_tokens + second.tgt_tokens
    assert split.step() == tokens
    # The same gradient by hand: the two micro-batches' summed losses over the step's tokens.
    for batch in (first, second):
        (by_hand.loss(batch.src, batch.tgt_in, batch.tgt_out) / tokens).backward()
    by_hand.optimizer.step()
    for a, b in zip(split.model.parameters(), by_hand.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_peer_throughput_reports_the_steps_it_timed(task):
    cfg, dataset = task
    steps = Steps(max_tokens=500, tokens_per_step=1000, timed=2, warmup=1)
    row = peer_throughput(cfg, dataset, torch.device("cpu"), steps, compile=False)
    assert row["peer"] == "MarianMTModel, eager" and row["accumulation"] == 2
    assert row["steps"] == 2 and row["tgt_tokens_per_s"] > 0
    assert 500 < row["tgt_tokens_per_step"] <= 1000
