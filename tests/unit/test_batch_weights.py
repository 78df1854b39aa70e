"""bench.batch_weights: the loss weight of an epoch's steps, exact against fixed shapes, counted
by the sampler alone."""

import pytest
from corpora import write_corpus

from bench.batch_weights import layout_weights
from transformer_core.data.dataset import ParallelDataset


def test_the_weights_of_one_epoch_add_up(tmp_path):
    ds = ParallelDataset(write_corpus(tmp_path / "train", n=300, min_len=2, max_len=30))
    target = ds.tgt_lens + 1
    for fixed in (False, True):
        result = layout_weights(ds, 200, fixed)
        assert result["step_tokens"]["mean"] * result["steps"] == pytest.approx(
            target.sum(), abs=result["steps"] * 0.05
        )  # mean rounded
        assert (
            sum(band["steps"] for band in result["by_mean_sentence_length"].values())
            == (result["steps"])
        )
        # one EOS per sentence: its share lies between the shortest and longest sentence's
        assert 1 / target.max() <= result["eos_share_of_loss_weight"] <= 1 / target.min()
