"""Token-bucket batching: the token budget, coverage, determinism, sharding, and collation."""

import gzip

import numpy as np
import pytest
import torch
from conftest import tiny_config, tiny_model
from shared_data import SHARED_DATA

from transformer_core.data import bpe
from transformer_core.data.batching import (
    BatchStream,
    Prefetcher,
    TokenBucketSampler,
    collate,
    padding_stats,
)
from transformer_core.data.binarized import BinarizedWriter, binarize
from transformer_core.data.dataset import ParallelDataset
from transformer_core.errors import UserError
from transformer_core.settings import TrainSettings
from transformer_core.training.loss import LossModel


@pytest.fixture(scope="module")
def multi30k_train_lengths(tmp_path_factory):
    """Token counts of Multi30k train (en, de), BPE 8000 trained here, through binarize."""
    folder = SHARED_DATA / "multi30k"
    if not (folder / "train.en.gz").exists():
        pytest.skip(f"Multi30k not found under {folder} (shared test data absent)")
    tmp = tmp_path_factory.mktemp("m30k")
    for lang in ("en", "de"):
        with gzip.open(folder / f"train.{lang}.gz", "rb") as packed:
            (tmp / f"train.{lang}").write_bytes(packed.read())
    bpe.train([tmp / "train.en", tmp / "train.de"], 8000, tmp / "bpe", threads=2)
    binarize(tmp / "bpe.model", tmp / "train.en", tmp / "train.de", tmp / "train")
    ds = ParallelDataset(tmp / "train")
    assert len(ds) == 29000
    return ds.src_lens, ds.tgt_lens


def lengths(n, seed=0, high=60):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, high, size=n)
    tgt = np.clip(src + rng.integers(-5, 6, size=n), 0, None)
    return src, tgt


def cost(batch, lens):
    return len(batch) * (max(int(lens[i]) for i in batch) + 1)


@pytest.mark.parametrize("max_tokens", [65, 200, 1000, 4000])
def test_no_batch_over_max_tokens_and_each_sentence_once(max_tokens):
    src, tgt = lengths(3000)
    sampler = TokenBucketSampler(src, tgt, max_tokens, seed=3)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        assert all(cost(b, src) <= max_tokens and cost(b, tgt) <= max_tokens for b in batches)
        flat = sorted(i for b in batches for i in b)
        assert flat == list(range(len(src)))


def test_batches_are_nearly_full():
    # Greedy packing of sorted lengths: a batch only closes when the next sentence does not fit.
    src, tgt = lengths(3000)
    batches = TokenBucketSampler(src, tgt, 1000).batches(0)
    fill = [max(cost(b, src), cost(b, tgt)) / 1000 for b in batches]
    assert np.median(fill) > 0.9


def test_deterministic_per_seed_and_epoch():
    src, tgt = lengths(2000)
    a = TokenBucketSampler(src, tgt, 500, seed=7)
    b = TokenBucketSampler(src, tgt, 500, seed=7)
    assert a.batches(0) == b.batches(0)
    assert a.batches(1) == b.batches(1)
    assert a.batches(0) != a.batches(1)  # reshuffled each epoch
    assert TokenBucketSampler(src, tgt, 500, seed=8).batches(0) != a.batches(0)


@pytest.mark.parametrize("world_size", [2, 3, 8])
def test_ranks_disjoint_complete_and_equal(world_size):
    src, tgt = lengths(1999, seed=1)
    for epoch in range(2):
        per_rank = [
            TokenBucketSampler(src, tgt, 700, seed=5, rank=r, world_size=world_size).batches(epoch)
            for r in range(world_size)
        ]
        assert len({len(b) for b in per_rank}) == 1  # same number of steps on every rank
        flat = [i for batches in per_rank for b in batches for i in b]
        assert sorted(flat) == list(range(len(src)))  # disjoint and complete
        for batches in per_rank:
            assert all(cost(b, src) <= 700 and cost(b, tgt) <= 700 for b in batches)


def test_fewer_sentences_than_batches_needed_is_an_error():
    with pytest.raises(UserError, match="ranks"):
        TokenBucketSampler([3, 3], [3, 3], 100, world_size=3)
    # five long pairs that fit only one per batch cannot be dealt evenly to 4 ranks
    with pytest.raises(UserError, match="evenly"):
        TokenBucketSampler([9] * 5, [9] * 5, 10, world_size=4).batches(0)


def test_batch_tokens_packs_smaller_and_a_longer_pair_goes_alone():
    """Steps smaller than max_tokens: batches of at most 300, except the pairs over 300 (up to
    max_tokens), each a batch of its own; each sentence once."""
    src, tgt = lengths(3000, high=60)
    src[:3], tgt[:3] = [400, 10, 700], [10, 500, 600]
    batches = TokenBucketSampler(src, tgt, 1000, seed=2, batch_tokens=300).batches(0)
    long = {0, 1, 2}
    for b in batches:
        if long & set(b):
            assert len(b) == 1
        else:
            assert cost(b, src) <= 300 and cost(b, tgt) <= 300
    assert sorted(i for b in batches for i in b) == list(range(3000))
    fill = [max(cost(b, src), cost(b, tgt)) / 300 for b in batches if not long & set(b)]
    assert np.median(fill) > 0.85
    with pytest.raises(ValueError, match="batch_tokens"):
        TokenBucketSampler(src, tgt, 1000, batch_tokens=1001)


def test_train_config_packs_to_the_step_where_it_is_below_a_micro_batch():
    cfg = TrainSettings(max_tokens=1000, tokens_per_step=500)
    assert (cfg.batch_tokens(1), cfg.accumulation(1)) == (500, 1)
    assert (cfg.batch_tokens(2), cfg.accumulation(2)) == (250, 1)
    paper = TrainSettings(max_tokens=3125, tokens_per_step=25_000)
    steps = [(paper.batch_tokens(w), paper.accumulation(w)) for w in (1, 8, 16)]
    assert steps == [(3125, 8), (3125, 1), (1563, 1)]


def test_sentence_longer_than_max_tokens_says_raise_max_tokens():
    src, tgt = [3, 10, 4], [3, 4, 40]
    with pytest.raises(UserError, match=r"raise max_tokens to at least 41"):
        TokenBucketSampler(src, tgt, 40)
    TokenBucketSampler(src, tgt, 41)  # BOS/EOS included: 40 + 1 fits exactly


def test_padding_stats_counts_slots():
    src, tgt = np.array([1, 3]), np.array([2, 2])
    stats = padding_stats([[0, 1]], src, tgt)
    assert stats["src_tokens"] == 2 + 4 and stats["tgt_tokens"] == 6
    assert stats["src_padding_share"] == pytest.approx(1 - 6 / 8)
    assert stats["tgt_padding_share"] == 0
    assert stats["padding_share"] == pytest.approx(2 / 14)


def test_collate_adds_bos_eos_and_padding(tmp_path):
    with BinarizedWriter(tmp_path / "d", 50) as w:
        w.add([10, 11, 12], [20])
        w.add([13], [21, 22, 23, 24])
    batch = collate(ParallelDataset(tmp_path / "d"), [1, 0])
    assert batch.src.tolist() == [[13, 3, 0, 0], [10, 11, 12, 3]]
    assert batch.tgt_in.tolist() == [[2, 21, 22, 23, 24], [2, 20, 0, 0, 0]]
    assert batch.tgt_out.tolist() == [[21, 22, 23, 24, 3], [20, 3, 0, 0, 0]]
    assert batch.src.dtype == torch.long and batch.tgt_in.dtype == torch.long
    assert batch.src_tokens == 6 and batch.tgt_tokens == 7
    assert batch.src_tokens == int((batch.src != 0).sum())
    assert batch.tgt_tokens == int((batch.tgt_out != 0).sum())


def test_padding_share_on_multi30k_under_ten_percent(multi30k_train_lengths):
    """The real Multi30k train set, encoded with a joint BPE 8000 model trained in the test."""
    src, tgt = multi30k_train_lengths
    sampler = TokenBucketSampler(src, tgt, 4000, seed=1)
    for epoch in range(2):
        batches = sampler.batches(epoch)
        stats = padding_stats(batches, src, tgt)
        print(f"Multi30k train, 4000 tokens, epoch {epoch}: {stats}")
        assert stats["padding_share"] < 0.10
        assert all(cost(b, src) <= 4000 and cost(b, tgt) <= 4000 for b in batches)


def test_collate_rounds_widths_up_and_records_what_the_host_needs(tmp_path):
    """Widths padded to a multiple (8 on GPUs); the token counts and the non-pad target
    positions come with the batch, so nothing needs reading back from a device."""
    with BinarizedWriter(tmp_path / "d", 50) as w:
        w.add([10, 11, 12], [20])
        w.add([13], [21, 22, 23, 24])
    dataset = ParallelDataset(tmp_path / "d")
    exact, padded = collate(dataset, [1, 0]), collate(dataset, [1, 0], multiple=8)
    assert padded.src.shape == (2, 8) and padded.tgt_in.shape == padded.tgt_out.shape == (2, 8)
    for name in ("src", "tgt_in", "tgt_out"):
        narrow = getattr(exact, name)
        wide = getattr(padded, name)
        assert (
            torch.equal(wide[:, : narrow.size(1)], narrow) and not wide[:, narrow.size(1) :].any()
        )
    for batch in (exact, padded):
        flat = batch.tgt_out.reshape(-1)
        assert batch.target_index.tolist() == (flat != 0).nonzero()[:, 0].tolist()
    counts = padded.counts
    assert (counts.sentences, counts.src_tokens, counts.tgt_tokens) == (2, 6, 7)
    assert (counts.src_sq, counts.tgt_causal, counts.src_tgt) == (2 * 2 + 4 * 4, 15 + 3, 10 + 8)


@pytest.mark.kernels  # numbers of torch's kernels (docs/tests.md)
def test_padding_to_a_multiple_changes_no_loss(tmp_path):
    rng = np.random.default_rng(3)
    with BinarizedWriter(tmp_path / "d", 50) as w:
        for _ in range(6):
            w.add(rng.integers(4, 50, rng.integers(2, 9)).tolist(), rng.integers(4, 50, 5).tolist())
    dataset = ParallelDataset(tmp_path / "d")
    loss_model = LossModel(tiny_model(tiny_config()))
    losses = []
    for multiple in (1, 8):
        batch = collate(dataset, list(range(6)), multiple=multiple)
        losses.append(loss_model(batch.src, batch.tgt_in, batch.tgt_out, 0.1, batch.target_index))
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-5)


def prefetch_corpus(path, n=30):
    rng = np.random.default_rng(4)
    with BinarizedWriter(path, 50) as w:
        for _ in range(n):
            w.add(rng.integers(4, 50, rng.integers(2, 9)).tolist(), rng.integers(4, 50, 4).tolist())
    return ParallelDataset(path)


def test_prefetcher_gives_the_streams_batches_and_position(tmp_path):
    dataset = prefetch_corpus(tmp_path / "d")
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, 40, seed=2)
    cfg = tiny_config()
    reference = BatchStream(dataset, sampler, cfg)
    prefetcher = Prefetcher(BatchStream(dataset, sampler, cfg), depth=3)
    try:
        for _ in range(3 * len(sampler.batches(0))):  # three epochs
            expected = reference.next()
            batch = prefetcher.next()
            assert torch.equal(batch.src, expected.src) and torch.equal(
                batch.tgt_out, expected.tgt_out
            )
            # The position of the batches taken, not of those collated ahead.
            assert prefetcher.position == reference.position and prefetcher.epoch == reference.epoch
    finally:
        prefetcher.close()
    assert not prefetcher._thread.is_alive()


def test_prefetcher_raises_the_error_of_its_thread(tmp_path):
    dataset = prefetch_corpus(tmp_path / "d")
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, 40, seed=2)
    stream = BatchStream(dataset, sampler, tiny_config())
    taken = len(sampler.batches(0))

    def broken(i):
        raise OSError(f"{tmp_path / 'd'}: cannot read pair {i}")

    prefetcher = Prefetcher(stream, depth=2)
    first = prefetcher.next()  # the thread may have collated a few batches already
    assert first.src.size(0) > 0
    dataset.src = broken  # every batch the thread collates from now on fails
    with pytest.raises(OSError, match="cannot read pair"):
        for _ in range(taken + 3):
            prefetcher.next()
    prefetcher.close()
