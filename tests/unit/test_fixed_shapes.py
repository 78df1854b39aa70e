"""Fixed micro-batch shapes (data/shapes.py): the ladder, the sampler's packing against it, the
collation into its shapes, and the learning they leave unchanged: the padded rows and columns
change no loss and no gradient."""

import numpy as np
import pytest
import torch
from conftest import TRAIN_SHAPE, tiny_config, tiny_model
from corpora import write_corpus

from bench.bench_shapes import wmt_like_lengths
from transformer_core.data.batching import (
    BatchStream,
    TokenBucketSampler,
    collate,
    padding_stats,
)
from transformer_core.data.binarized import BinarizedWriter
from transformer_core.data.dataset import ParallelDataset
from transformer_core.data.shapes import FixedShapes, ladder
from transformer_core.device import AUTO_COMPILE, use_fixed_shapes
from transformer_core.errors import ConfigError, UserError
from transformer_core.model.checkpoint import load_checkpoint
from transformer_core.settings import TrainSettings
from transformer_core.training.loss import LossModel
from transformer_core.training.run_dir import RunFolder
from transformer_core.training.session import train

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels


def test_the_ladder_steps_by_8_then_by_about_an_eighth():
    widths = ladder(256)
    assert widths[:8] == [8, 16, 24, 32, 40, 48, 56, 64]
    assert all(w % 8 == 0 for w in widths)
    assert widths[-2] < 256 <= widths[-1] and len(widths) == 18
    for low, high in zip(widths[8:], widths[9:], strict=False):
        assert high <= low * 1.125 + 8
    shapes = FixedShapes(3125)
    assert shapes.widths(np.array([1, 8, 9, 65, 73])).tolist() == [8, 8, 16, 72, 88]
    assert shapes.shape(30) == (3125 // 32, 32)
    assert shapes.shape(5000)[0] == 1  # a pair over the budget is a batch of its own


def test_every_rank_s_batches_fit_the_shapes_of_the_split_for_the_ranks():
    """Split for 2 ranks, the fullest batch (7 pairs of width 16) becomes 3 pairs of width 8 and
    4 of width 16: each half has a shape that holds it."""
    src = tgt = np.array([7, 7, 7, 8, 8, 8, 8])  # with EOS or BOS: 8 (width 8) and 9 (width 16)
    for rank in range(2):
        sampler = TokenBucketSampler(src, tgt, 64, rank=rank, world_size=2)
        shapes = sampler.fixed_shapes()
        (batch,) = sampler.batches(0)
        rows, _ = shapes.shape(1 + int(max(src[batch])))
        assert len(batch) <= rows
    assert shapes.most_rows == {8: 3, 16: 4}


@pytest.mark.parametrize("batch_tokens", [400, 3125])
def test_fixed_batches_fit_their_shape_and_cover_every_sentence_once(batch_tokens):
    src, tgt = wmt_like_lengths(4000)
    sampler = TokenBucketSampler(src, tgt, 3125, seed=2, batch_tokens=batch_tokens)
    shapes = sampler.fixed_shapes()
    for epoch in range(2):
        batches = sampler.batches(epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        for batch in batches:
            longest = 1 + max(max(src[batch]), max(tgt[batch]))
            rows, width = shapes.shape(longest)
            assert len(batch) <= rows == shapes.most_rows[width]
    widths = {shapes.shape(1 + max(max(src[b]), max(tgt[b])))[1] for b in sampler.batches(0)}
    stats = padding_stats(sampler.batches(0), src, tgt, shapes)
    assert stats["shapes"] == len(widths) <= len(ladder(251))
    exact = padding_stats(sampler.batches(0), src, tgt)
    print(f"{batch_tokens} tokens: exact {exact}, fixed {stats}")
    assert stats["shapes"] < exact["shapes"]


def test_the_rows_of_a_width_are_the_most_pairs_of_its_exact_batches():
    # widths 16 (longest 9, 16, 12) and 32 (longest 30)
    shapes = FixedShapes(1000, np.array([9, 16, 12, 30]), np.array([100, 60, 80, 33]))
    assert shapes.rows(16) == 100 and shapes.rows(32) == 33
    assert shapes.rows(64) == 1000 // 64  # no batch of that width: as if every pair filled it
    assert FixedShapes(20).rows(32) == 1  # a pair over the budget: a row alone


def test_padding_stats_count_the_slots_of_each_collation():
    src, tgt = np.array([2, 9]), np.array([4, 1])  # with EOS / BOS: 3 and 10, 5 and 2
    exact = padding_stats([[0], [1]], src, tgt)
    eights = padding_stats([[0], [1]], src, tgt, multiple=8)
    fixed = padding_stats([[0], [1]], src, tgt, FixedShapes(32, np.array([5, 10]), np.ones(2)))
    assert exact["padding_share"] == pytest.approx(0)
    assert eights["padding_share"] == pytest.approx(1 - 20 / (8 + 16 + 8 + 8))
    assert fixed["padding_share"] == pytest.approx(1 - 20 / (2 * (8 + 16)))
    assert (exact["shapes"], eights["shapes"], fixed["shapes"]) == (2, 2, 2)


def corpus(path, lengths, seed=3):
    rng = np.random.default_rng(seed)
    with BinarizedWriter(path, 50) as w:
        for s, t in lengths:
            w.add(rng.integers(4, 50, s).tolist(), rng.integers(4, 50, t).tolist())
    return ParallelDataset(path)


def test_collate_to_a_shape_adds_empty_sentences_whose_targets_are_padding(tmp_path):
    dataset = corpus(tmp_path / "d", [(3, 1), (1, 4)])
    batch = collate(dataset, [1, 0], shape=(4, 8))
    assert batch.src.shape == batch.tgt_in.shape == batch.tgt_out.shape == (4, 8)
    assert batch.src[2:].tolist() == [[3, 0, 0, 0, 0, 0, 0, 0]] * 2  # EOS alone
    assert batch.tgt_in[2:].tolist() == [[2, 0, 0, 0, 0, 0, 0, 0]] * 2  # BOS alone
    assert not batch.tgt_out[2:].any()
    exact = collate(dataset, [1, 0])
    assert batch.target_index.tolist() == (batch.tgt_out.reshape(-1) != 0).nonzero()[:, 0].tolist()
    assert (batch.src_tokens, batch.tgt_tokens, batch.counts) == (
        exact.src_tokens,
        exact.tgt_tokens,
        exact.counts,
    )
    with pytest.raises(ValueError, match="do not fit the shape"):
        collate(dataset, [1, 0], shape=(1, 8))


def test_fixed_shapes_change_no_loss_and_no_gradient(tmp_path):
    """The same sentences collated exactly and to their fixed shape (one with rows to spare):
    the same loss sums and the same gradients, to fp32 rounding (no dropout)."""
    dataset = corpus(tmp_path / "d", list(zip(range(2, 9), range(7, 0, -1), strict=True)))
    cfg = tiny_config(dropout=0.0)
    indices = list(range(len(dataset)))
    shape = (len(indices) + 3, 16)  # three empty rows
    results = []
    for fixed in (None, shape):
        model = tiny_model(cfg, seed=1).train()
        loss_model = LossModel(model)
        batch = collate(dataset, indices, shape=fixed)
        loss, nll = loss_model(batch.src, batch.tgt_in, batch.tgt_out, 0.1, batch.target_index)
        loss.backward()
        results.append((loss.detach(), nll, [p.grad for p in model.parameters()]))
    (loss_a, nll_a, grads_a), (loss_b, nll_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll_b, nll_a, rtol=1e-5, atol=1e-5)
    for b, a in zip(grads_b, grads_a, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_the_stream_collates_the_exact_batches_to_their_fixed_shapes(tmp_path):
    """Which sentences share a micro-batch, and in which order, is the recipe: fixed shapes
    change only the collation (packed to a row count of their own, fixed batches lengthened
    Multi30k's translations). Over two epochs, each fixed batch holds the exact one's pairs in
    its first rows and columns, in the shape of its width."""
    dataset = corpus(tmp_path / "d", [(s % 13 + 1, (3 * s) % 11 + 1) for s in range(60)])
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, 64)
    shapes = sampler.fixed_shapes()
    fixed = BatchStream(dataset, sampler, tiny_config(), shapes=shapes)
    exact = BatchStream(dataset, sampler, tiny_config())
    seen = set()
    for _ in range(2 * len(sampler.batches(0))):
        a, b = fixed.next(), exact.next()
        rows, width = b.src.shape
        assert torch.equal(a.src[:rows, :width], b.src) and not a.src[:rows, width:].any()
        assert torch.equal(a.tgt_out[:rows, : b.tgt_out.size(1)], b.tgt_out)
        assert a.counts == b.counts and a.src.shape == a.tgt_in.shape
        seen.add(tuple(a.src.shape))
    batches = sampler.batches(0)
    longest = [1 + max(max(dataset.src_lens[b]), max(dataset.tgt_lens[b])) for b in batches]
    most = {
        w: max(len(b) for b, n in zip(batches, longest, strict=True) if (n > 8) == (w == 16))
        for w in (8, 16)
    }
    assert seen == {(most[8], 8), (most[16], 16)} and shapes.most_rows == most


def test_auto_fixes_shapes_where_compiled_and_a_bad_value_names_the_key():
    assert use_fixed_shapes("auto", compiled=True) and not use_fixed_shapes("auto", False)
    assert use_fixed_shapes("fixed", False) and not use_fixed_shapes("exact", True)
    with pytest.raises(UserError, match="--batch-shapes"):
        use_fixed_shapes("static", False)
    with pytest.raises(ConfigError, match="batch_shapes"):
        TrainSettings(batch_shapes="static")


def test_a_run_trains_in_fixed_shapes_and_resumes_only_in_them(tmp_path, capsys):
    """A checkpoint records its path (fixed shapes here); a resume under ``auto`` keeps it, as
    ``max_tokens: auto`` keeps its micro-batch, where auto alone would pick exact shapes on this
    CPU; an explicit setting that collates otherwise is refused naming both, or, with
    restart_if_changed (the workflow's mode), starts over."""
    corpus = write_corpus(tmp_path / "train")
    cfg = TrainSettings(
        steps=2, max_tokens=64, tokens_per_step=64, warmup=10, checkpoint_interval=1,
        num_threads=1, batch_shapes="fixed",
    )  # fmt: skip
    train(corpus, tmp_path / "run", "base", cfg, TRAIN_SHAPE)
    why = AUTO_COMPILE["train"]["cpu"][1]  # the log line names the path taken, and why
    assert f"eager (--compile auto: {why}), fixed batch shapes" in capsys.readouterr().err
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints" / "step_0000001.pt")
    assert ckpt["data"]["fixed_shapes"] is True
    assert ckpt["training_path"] == {
        "compile": "off",
        "batch_shapes": "fixed",
        "compute_weights": "fp32",
    }
    longer = {**cfg.to_dict(), "steps": 3}
    auto = TrainSettings(**{**longer, "batch_shapes": "auto"})  # fresh: exact on this CPU
    summary = train(corpus, RunFolder(tmp_path / "run", resume=True), "base", auto, TRAIN_SHAPE)
    assert summary["steps"] == 3
    assert "resumed as recorded: batch_shapes fixed" in capsys.readouterr().err
    last = load_checkpoint(tmp_path / "run" / "checkpoints" / "step_0000003.pt")
    assert last["data"]["fixed_shapes"] is True and last["training_path"]["batch_shapes"] == "fixed"
    exact = TrainSettings(**{**longer, "steps": 4, "batch_shapes": "exact"})
    with pytest.raises(UserError, match="collated to fixed shapes, this run's would be exact"):
        train(corpus, RunFolder(tmp_path / "run", resume=True), "base", exact, TRAIN_SHAPE)
    train(corpus, RunFolder(tmp_path / "run", resume=True, restart_if_changed=True), "base", exact, TRAIN_SHAPE)  # fmt: skip
    assert "starting over" in capsys.readouterr().err
    assert (tmp_path / "run" / "superseded" / "1").is_dir()
