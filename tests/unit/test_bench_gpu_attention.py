"""The attention benchmark's checks hold where they can run (``bench/gpu/bench_gpu_attention.py``):
packed sentences are the padded rows' real positions end to end, each kernel that runs is
compared with the fp32 reference on those positions, and one that cannot run is recorded, saying
why, instead of ending the run. On a CPU only SDPA's flash kernel runs (the causal case)."""

import torch

from bench.gpu import bench_gpu_attention as bench


def test_packed_rows_are_the_real_positions_end_to_end():
    lengths = torch.tensor([3, 6, 1])
    x = torch.randn(3, 2, 6, 4)  # (B, h, W, d)
    packed = bench.packed(x, lengths)
    cu = bench.cumulative(lengths, torch.device("cpu"))
    assert cu.tolist() == [0, 3, 9, 10] and cu.dtype == torch.int32
    for row, n in enumerate(lengths.tolist()):
        assert torch.equal(packed[cu[row] : cu[row + 1]], x[row, :, :n].transpose(0, 1))
    assert bench.key_mask(lengths, 6, torch.device("cpu"))[2, 0, 0].tolist() == [True] + [False] * 5


def test_each_kernel_is_checked_or_recorded_as_not_run():
    rows = bench.case_rows("base", 16, (12, 16), 1, torch.device("cpu"), tokens=128)
    ran = [r for r in rows if "ms_forward_backward" in r]
    assert [(r["kind"], r["kernel"]) for r in ran] == [("decoder self (causal)", "flash")]
    assert ran[0]["max_abs_error"] < 0.05  # bf16 against fp32
    assert 8 * 12 <= ran[0]["real_tokens"] <= 8 * 16  # 8 sentences of 12 to 16 tokens
    assert all(r["not_run"] for r in rows if r not in ran)
    assert {r["kernel"] for r in rows} == {"flash", "efficient", "cudnn", "varlen, packed"}
