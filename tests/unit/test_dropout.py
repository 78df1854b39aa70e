"""Dropout with a mask from 16-bit integer draws: dropout's distribution, scaling, gradient and
seeding; the identity in eval mode."""

import pytest
import torch

from transformer_core.model.dropout import Dropout, keep_mask

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_each_element_is_kept_with_probability_one_minus_p(p):
    torch.manual_seed(0)
    keep = keep_mask((1000, 1000), p, torch.device("cpu"))
    assert keep.dtype == torch.bool and keep.shape == (1000, 1000)
    # 1M independent draws: the kept fraction within 5 standard deviations of 1 - p.
    assert abs(keep.float().mean().item() - (1 - p)) < 5 * (p * (1 - p) / 1e6) ** 0.5
    # Independent along rows and columns: no stripes (each row's and column's fraction).
    for axis in (0, 1):
        fractions = keep.float().mean(axis)
        assert fractions.std().item() < 2 * (p * (1 - p) / 1000) ** 0.5


def test_odd_sizes_and_extreme_probabilities():
    torch.manual_seed(1)
    assert keep_mask((3, 5, 7), 0.0, torch.device("cpu")).all()  # 105 values: an odd count
    assert not keep_mask((1001,), 0.999999999, torch.device("cpu")).any()


def test_training_scales_the_kept_elements_and_routes_their_gradient():
    torch.manual_seed(2)
    x = torch.randn(64, 256, requires_grad=True)
    out = Dropout(0.25).train()(x)
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] / 0.75)
    out.sum().backward()
    expected = kept.float() / 0.75
    torch.testing.assert_close(x.grad, expected)
    assert 0.7 < kept.float().mean().item() < 0.8


def test_bf16_keeps_its_dtype_and_scales_as_torch_does():
    """The kept bf16 values are x / (1 - p) rounded once, as torch's dropout gives them (not
    x times a bf16-rounded 1 / 0.9)."""
    torch.manual_seed(4)
    x = torch.randn(64, 64, dtype=torch.bfloat16, requires_grad=True)
    out = Dropout(0.1).train()(x)
    assert out.dtype == torch.bfloat16
    kept = out != 0
    torch.testing.assert_close(out[kept], (x * (1 / 0.9))[kept], atol=0, rtol=0)
    out.float().sum().backward()
    assert torch.equal(x.grad[kept], torch.full_like(x.grad[kept], 1 / 0.9))


def test_eval_mode_and_p_zero_are_the_identity_and_seeds_repeat():
    x = torch.randn(4, 8)
    assert Dropout(0.5).eval()(x) is x and Dropout(0.0).train()(x) is x
    torch.manual_seed(3)
    first = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    assert torch.equal(first, Dropout(0.5).train()(x))
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        Dropout(1.0)
