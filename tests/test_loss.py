"""Label-smoothed cross-entropy against a hand computation."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_core.loss import label_smoothed_nll_loss, perplexity


def test_against_hand_computation():
    # One token, vocabulary 3, uniform logits except the gold entry.
    logits = torch.tensor([[math.log(2.0), 0.0, 0.0]])  # p = (1/2, 1/4, 1/4)
    target = torch.tensor([0])
    out = label_smoothed_nll_loss(logits, target, epsilon=0.3, pad_id=99)
    nll = math.log(2.0)
    mean_neg_logp = (math.log(2.0) + math.log(4.0) + math.log(4.0)) / 3
    # q = (1 - eps) * onehot + eps / V = (0.8, 0.1, 0.1): -sum q log p
    by_q = -(0.8 * math.log(0.5) + 0.1 * math.log(0.25) + 0.1 * math.log(0.25))
    assert out.loss.item() == pytest.approx(0.7 * nll + 0.3 * mean_neg_logp, rel=1e-6)
    assert out.loss.item() == pytest.approx(by_q, rel=1e-6)
    assert out.nll.item() == pytest.approx(nll, rel=1e-6) and out.tokens == 1


def test_padding_ignored_and_sums_match_torch():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11)
    target = torch.randint(1, 11, (2, 5))
    target[0, 3:] = 0
    target[1, 4:] = 0
    out = label_smoothed_nll_loss(logits, target, epsilon=0.1, pad_id=0)
    ref = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, reduction="sum",
                          label_smoothing=0.1)
    ref_nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, reduction="sum")
    assert out.tokens == 7
    torch.testing.assert_close(out.loss, ref)
    torch.testing.assert_close(out.nll, ref_nll)


def test_no_smoothing_is_nll_and_gradient_flows():
    logits = torch.randn(4, 7, requires_grad=True)
    target = torch.tensor([1, 2, 3, 4])
    out = label_smoothed_nll_loss(logits, target, epsilon=0.0)
    torch.testing.assert_close(out.loss, F.cross_entropy(logits, target, reduction="sum"))
    out.loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_perplexity():
    assert perplexity(4 * math.log(5.0), 4) == pytest.approx(5.0)
    assert perplexity(1e6, 1) == math.inf


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_gradient_equals_autograd_of_torch_cross_entropy(epsilon):
    torch.manual_seed(1)
    logits = torch.randn(6, 13, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 0, 5, 12, 0, 7])  # two pads
    out = label_smoothed_nll_loss(logits, target, epsilon=epsilon, pad_id=0)
    (0.37 * out.loss).backward()
    ours = logits.grad.clone()
    logits.grad = None
    ref = F.cross_entropy(logits, target, ignore_index=0, reduction="sum", label_smoothing=epsilon)
    (0.37 * ref).backward()
    torch.testing.assert_close(out.loss.double(), ref.double())
    torch.testing.assert_close(ours, logits.grad)
    assert out.tokens == 4 and not out.nll.requires_grad
