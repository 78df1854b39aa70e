"""Attention on CPUs as batched matmuls: SDPA's output and gradients under every mask, and a
decoding step's attention equal to the training form's."""

import pytest
import torch

from transformer_core.model.cpu_attention import decoding_attention, matmul_attention

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels


def _grads_of(attention, *tensors, **kwargs):
    """attention's output on leaf copies of ``tensors``, and their gradients of a loss."""
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    out = attention(*leaves, **kwargs)
    out.square().sum().backward()
    return out.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("masking", ["padding", "per query", "causal", "padding and causal"])
def test_matmul_attention_equals_sdpa_forward_and_backward(masking):
    """The batched-matmul attention (its mask added inside the product, its backward without
    the masked weights' pass) gives SDPA's output and gradients, for a padding mask
    (B, 1, 1, S), a mask per query (B, 1, T, S), the causal mask, and both."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(3, 2, 6, 8, generator=gen) for _ in range(3))
    mask = torch.ones(3, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    if masking == "per query":
        mask = torch.rand(3, 1, 6, 6, generator=gen) > 0.3
        mask[..., 0] = True  # every query sees a key
    kwargs = {
        "mask": None if masking == "causal" else mask,
        "is_causal": "causal" in masking,
    }
    sdpa_kwargs = {"attn_mask": kwargs["mask"], "is_causal": kwargs["is_causal"]}
    if masking == "padding and causal":  # SDPA takes one of the two: the causal mask folded in
        sdpa_kwargs = {"attn_mask": mask & torch.ones(6, 6, dtype=torch.bool).tril()}
    ours, our_grads = _grads_of(matmul_attention, q, k, v, **kwargs)
    theirs, their_grads = _grads_of(
        torch.nn.functional.scaled_dot_product_attention, q, k, v, **sdpa_kwargs
    )
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    for mine, fused in zip(our_grads, their_grads, strict=True):
        torch.testing.assert_close(mine, fused, atol=1e-5, rtol=0)


@pytest.mark.parametrize("keys", [1, 5, 12, 30])
@pytest.mark.parametrize("queries", [1, 4])
def test_decoding_attention_equals_matmul_attention(keys, queries):
    """A decoding step's attention (one query per row and head: fp32 products and sums, bf16
    k q^T; short rows: the softmax over the whole tensor), with and without a padding mask,
    gives matmul_attention's result (in bf16 within two roundings: matmul_attention scales q
    before the product, decoding the scores after it)."""
    gen = torch.Generator().manual_seed(keys)
    q, k, v = (torch.randn(6, 4, n, 32, generator=gen) for n in (queries, keys, keys))
    mask = torch.ones(6, 1, 1, keys, dtype=torch.bool)
    mask[2, ..., keys // 2 + 1 :] = False
    for m in (None, mask):
        torch.testing.assert_close(
            decoding_attention(q, k, v, m), matmul_attention(q, k, v, m), atol=1e-6, rtol=0
        )
        q16, k16, v16 = (t.bfloat16() for t in (q, k, v))
        torch.testing.assert_close(
            decoding_attention(q16, k16, v16, m).float(),
            matmul_attention(q16, k16, v16, m).float(),
            atol=2e-2,
            rtol=0,
        )


@pytest.mark.parametrize("keys", [3, 13, 40])  # below and above CPU_SMALL_BMM at d_k 32
def test_decoding_attention_reads_position_major_caches(keys):
    """Caches laid out (B, t, h, d) within a longer buffer, seen as (B, h, t, d): the same
    attention as on contiguous head-major copies, masked or not, at every length."""
    gen = torch.Generator().manual_seed(5)
    buffers = [torch.randn(4, 50, 3, 32, generator=gen) for _ in range(2)]  # 50 positions room
    k, v = (b[:, :keys].transpose(1, 2) for b in buffers)  # (4, 3, keys, 32), strided
    q = torch.randn(4, 3, 1, 32, generator=gen)
    mask = torch.ones(4, 1, 1, keys, dtype=torch.bool)
    mask[2, ..., keys - 1 :] = False
    for m in (None, mask):
        torch.testing.assert_close(
            decoding_attention(q, k, v, m),
            matmul_attention(q, k.contiguous(), v.contiguous(), m),
            atol=1e-6,
            rtol=0,
        )
