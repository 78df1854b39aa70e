"""Training cost: the paper's method reproduces Table 2, the analytic count matches torch's counter."""

import pytest
import torch
from conftest import tiny_config, tiny_model
from torch.utils.flop_counter import FlopCounterMode

from transformer_core.data.token_counts import TokenCounts
from transformer_core.errors import UserError
from transformer_core.training.flops import (
    device_spec,
    forward_flops,
    paper_method_cost,
    paper_run_costs,
    summary_costs,
    training_flops,
)

# Unequal depths and d_k != d_v: a term counted with the wrong one shows.
CFG = tiny_config(decoder_layers=3, d_v=12)


def test_paper_runs_reproduce_table2():
    rows = {r["run"]: r for r in paper_run_costs()}
    assert float(f"{rows['paper base']['flops_paper_method']:.1e}") == 3.3e18
    assert float(f"{rows['paper big']['flops_paper_method']:.1e}") == 2.3e19
    # The analytic count is below the paper's (peak-throughput) bound.
    for row in rows.values():
        assert 0.1 * row["flops_paper_method"] < row["flops_analytic"] < row["flops_paper_method"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Tesla P100-PCIE-16GB", "P100"),
        ("Tesla K40m", "K40"),
        ("Tesla V100-PCIE-16GB", "V100-PCIE"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200"),
    ],
)
def test_device_names(name, expected):
    assert device_spec(name).name == expected


def test_cpu_has_no_paper_cost():
    cost = paper_method_cost(1.0, 1, "cpu")
    assert cost["flops"] is None and "not in the table" in cost["note"]


def test_analytic_count_equals_torch_flop_counter():
    model = tiny_model(CFG).train()
    batch, src_len, tgt_len = 3, 7, 5
    src = torch.randint(4, 50, (batch, src_len))
    tgt = torch.randint(4, 50, (batch, tgt_len))
    counts = TokenCounts()
    counts.add([src_len] * batch, [tgt_len] * batch)
    # torch counts the full T x T causal score matrix; we count only the allowed pairs.
    masked = (
        CFG.decoder_layers
        * (2 * CFG.h * (CFG.d_k + CFG.d_v))
        * batch
        * (tgt_len * tgt_len - tgt_len * (tgt_len + 1) // 2)
    )
    with FlopCounterMode(display=False) as counter:
        model(src, tgt)
    assert counter.get_total_flops() == forward_flops(CFG, counts) + masked
    with FlopCounterMode(display=False) as counter:
        model(src, tgt).sum().backward()
    assert counter.get_total_flops() == training_flops(CFG, counts) + 3 * masked


def test_token_counts_and_summary():
    counts = TokenCounts()
    counts.add([3, 4], [2, 5])
    other = TokenCounts()
    other.add([1], [1])
    counts.merge(other)
    assert (counts.sentences, counts.src_tokens, counts.tgt_tokens) == (3, 8, 8)
    assert (counts.src_sq, counts.tgt_causal, counts.src_tgt) == (26, 3 + 15 + 1, 6 + 20 + 1)
    summary = {
        "model_config": CFG.to_dict(),
        "token_counts": vars(counts),
        "wall_seconds": 7200,
        "devices": 2,
        "device": "NVIDIA A100-SXM4-80GB",
        "steps": 10,
    }
    row = summary_costs(summary)
    assert row["flops_paper_method"] == pytest.approx(2 * 3600 * 2 * 19.5e12)
    assert row["flops_analytic"] == training_flops(CFG, counts)
    with pytest.raises(UserError, match="not a training summary"):
        summary_costs({"steps": 3}, where="x.json")
