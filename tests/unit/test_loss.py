"""Label-smoothed cross-entropy (fused with the projection) against a hand computation and autograd."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_core.evaluation.perplexity import exp_mean_nll
from transformer_core.training import loss as loss_module
from transformer_core.training.loss import projected_label_smoothed_loss

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

IDENTITY = torch.eye(3)  # logits = hidden


def test_against_hand_computation():
    # One token, vocabulary 3: p = (1/2, 1/4, 1/4).
    hidden = torch.tensor([[math.log(2.0), 0.0, 0.0]])
    out = projected_label_smoothed_loss(hidden, IDENTITY, torch.tensor([0]), epsilon=0.3, pad_id=99)
    nll = math.log(2.0)
    mean_neg_logp = (math.log(2.0) + math.log(4.0) + math.log(4.0)) / 3
    # q = (1 - eps) * onehot + eps / V = (0.8, 0.1, 0.1): -sum q log p
    by_q = -(0.8 * math.log(0.5) + 0.1 * math.log(0.25) + 0.1 * math.log(0.25))
    assert out.loss.item() == pytest.approx(0.7 * nll + 0.3 * mean_neg_logp, rel=1e-6)
    assert out.loss.item() == pytest.approx(by_q, rel=1e-6)
    assert out.nll.item() == pytest.approx(nll, rel=1e-6) and out.tokens == 1


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("chunk_elements", [13 * 2, 1 << 24])  # 2 tokens per chunk, or all at once
def test_loss_and_gradients_equal_autograd_of_torch(epsilon, chunk_elements, monkeypatch):
    monkeypatch.setitem(loss_module.CHUNK_ELEMENTS, "cpu", chunk_elements)
    torch.manual_seed(1)
    hidden = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[1, 0, 5, 12], [4, 7, 0, 0]])  # three pads
    out = projected_label_smoothed_loss(hidden, weight, target, epsilon=epsilon, pad_id=0)
    (0.37 * out.loss).backward()
    ours = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    logits = F.linear(hidden, weight).view(-1, 13)
    ref = F.cross_entropy(
        logits, target.view(-1), ignore_index=0, reduction="sum", label_smoothing=epsilon
    )
    ref_nll = F.cross_entropy(logits, target.view(-1), ignore_index=0, reduction="sum")
    (0.37 * ref).backward()
    assert out.tokens == 5 and not out.nll.requires_grad
    torch.testing.assert_close(out.loss.double(), ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.nll.double(), ref_nll.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours[0], hidden.grad)
    torch.testing.assert_close(ours[1], weight.grad)


def test_no_gradient_work_without_grad():
    with torch.no_grad():
        out = projected_label_smoothed_loss(
            torch.randn(4, 3), IDENTITY, torch.tensor([1, 2, 0, 1]), 0.1
        )
    assert out.tokens == 3 and torch.isfinite(out.loss)


def test_perplexity():
    assert exp_mean_nll(4 * math.log(5.0), 4) == pytest.approx(5.0)
    assert exp_mean_nll(1e6, 1) == math.inf


def test_autocast_path_matches_fp32(monkeypatch):
    """Under bf16 autocast (the GPU default) matmuls run in bf16, log-softmax and sums in fp32."""
    monkeypatch.setitem(loss_module.CHUNK_ELEMENTS, "cpu", 3 * 50)
    torch.manual_seed(2)
    hidden = torch.randn(7, 16, requires_grad=True)
    weight = (0.3 * torch.randn(50, 16)).requires_grad_()
    target = torch.randint(1, 50, (7,))
    ref = projected_label_smoothed_loss(hidden, weight, target, 0.1)
    ref.loss.backward()
    ref_grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = projected_label_smoothed_loss(hidden, weight, target, 0.1)
    out.loss.backward()
    assert out.loss.dtype == torch.float32 and weight.grad.dtype == torch.float32
    torch.testing.assert_close(out.loss, ref.loss, rtol=2e-2, atol=0)
    torch.testing.assert_close(hidden.grad, ref_grads[0], rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(weight.grad, ref_grads[1], rtol=5e-2, atol=5e-2)


def test_target_index_drops_the_same_positions_as_the_pad_mask():
    """The host's index of non-pad targets (what training passes) equals reading the mask."""
    torch.manual_seed(3)
    hidden = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[1, 0, 5, 12], [4, 7, 0, 0]])
    by_mask = projected_label_smoothed_loss(hidden, weight, target, 0.1, pad_id=0)
    by_mask.loss.backward()
    grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    index = (target.reshape(-1) != 0).nonzero()[:, 0]
    by_index = projected_label_smoothed_loss(hidden, weight, target, 0.1, 0, target_index=index)
    by_index.loss.backward()
    assert by_index.tokens == by_mask.tokens == 5
    torch.testing.assert_close(by_index.loss, by_mask.loss)
    torch.testing.assert_close(by_index.nll, by_mask.nll)
    torch.testing.assert_close(hidden.grad, grads[0])
    torch.testing.assert_close(weight.grad, grads[1])


def test_the_fused_chunk_gives_the_eager_loss_and_gradients(monkeypatch):
    """fused (compiled training on GPUs): each chunk's softmax, loss and gradient compiled in
    one function, against the eager bf16 path, on chunks of two sizes, compiled once."""
    import torch._dynamo

    monkeypatch.setitem(loss_module.CHUNK_ELEMENTS, "cpu", 3 * 50)
    torch.manual_seed(4)
    hidden = torch.randn(8, 16, requires_grad=True)
    weight = (0.3 * torch.randn(50, 16)).requires_grad_()
    target = torch.randint(1, 50, (8,))
    torch._dynamo.reset()
    loss_module._fused_chunk.cache_clear()
    counters = torch._dynamo.utils.counters
    graphs = counters["stats"]["unique_graphs"]  # a count kept over the whole process
    outputs = []
    for fused in (False, True, True):
        hidden.grad = weight.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = projected_label_smoothed_loss(hidden, weight, target, 0.1, fused=fused)
        out.loss.backward()
        outputs.append((out.loss, out.nll, hidden.grad.clone(), weight.grad.clone()))
    for fused in outputs[1:]:
        for got, want, rtol, atol in zip(
            fused, outputs[0], (1e-3, 1e-3, 2e-2, 2e-2), (0, 0, 2e-3, 2e-3), strict=True
        ):
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    # 8 rows in chunks of 3: rows 3 and 2, one dynamic graph for both (a chunk of 1 row would
    # be another: torch.compile specializes sizes of 1)
    assert counters["stats"]["unique_graphs"] == graphs + 1
