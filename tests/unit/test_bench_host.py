"""The host-overhead benchmark's counts meet their targets (``bench/bench_host.py``, quick shapes).

Counts, not times: on a GPU each host read stalls the queue and each dispatched operator costs
host time, whatever the CPU that counts them. The quick shapes keep the layers, the vocabulary
and the two micro-batches of a GPU step, at narrow widths.
"""

import pytest

from bench import bench_host


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    return bench_host.bench_training("base", tmp_path_factory.mktemp("host"), quick=True, steps=1)


def test_a_training_step_reads_nothing_back(training):
    assert training["host_reads"] == 0, training["host_reads_by_site"]
    assert training["host_reads_per_log_interval"] == 1


def test_each_weight_is_cast_to_bf16_at_most_once_per_step(training):
    assert 0 < training["weight_casts"] <= training["parameter_tensors"]


def test_the_loss_passes_over_the_logits_four_times_per_chunk(training):
    """Under bf16 autocast: the bf16 logits copied into fp32, the log-softmax and the exp in
    place there, and the gradient cast back to bf16 once for its two products (the code before
    made six passes)."""
    assert training["logits"]["per_chunk"]["elementwise"] <= 4, training["logits"]


def test_attention_sees_the_batch_widths(training):
    assert training["attention_shapes_are_batch_widths"]


def test_a_decoding_step_reads_one_small_thing():
    decoding = bench_host.bench_decoding(quick=True)
    sites = decoding["host_reads_by_site"]
    per_step = [site for site, n in sites.items() if n == 1.0]
    assert len(per_step) == 1 and "beam_search_nbest" in per_step[0], sites
    # The rest: one read per batch, of its longest output length and of its results.
    assert decoding["host_reads"] <= 1 + 8 / decoding["steps"], sites


def test_training_widths_come_from_a_fixed_set():
    """Lengths 3..80 (+1) in widths rounded up to multiples of 8: at most 11 widths a side."""
    shapes = bench_host.training_shapes(quick=True)
    assert shapes["width_multiple"] == 8
    assert shapes["distinct_source_widths"] <= 11 and shapes["distinct_target_widths"] <= 11
