"""Packed weights for CPU decoding: the same products as F.linear (to rounding), the same search
results, the caller's model untouched, and packing only where it pays."""

import pytest
import torch
from conftest import tiny_config, tiny_model
from torch import nn
from torch.nn import functional as F

from transformer_core.decoding.inference import inference_model
from transformer_core.decoding.packed import (
    PACK_MIN_D_MODEL,
    PackedLinear,
    pack_linears,
    worth_packing,
)
from transformer_core.decoding.search import beam_search
from transformer_core.device import cpu_has_native_bf16

pytestmark = [
    pytest.mark.kernels,  # numbers of torch's kernels: .ci/run reruns it on other CPU kinds'
    pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch has no oneDNN"),
]
WIDE = dict(vocab_size=300, d_model=PACK_MIN_D_MODEL, d_ff=512, h=4, d_k=64, d_v=64)


def test_packed_linear_is_the_same_product():
    linear = nn.Linear(256, 1000)
    packed = PackedLinear(linear.weight, linear.bias)
    for rows in (1, 7, 128):
        x = torch.randn(rows, 1, 256)
        torch.testing.assert_close(packed(x), linear(x), atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(
    not cpu_has_native_bf16(),
    reason="oneDNN packs bf16 weights only on CPUs that compute bf16 (translate refuses bf16 here)",
)
def test_packed_bf16_linear_takes_fp32_activations():
    linear = nn.Linear(256, 1000)
    half = PackedLinear(linear.weight.to(torch.bfloat16), linear.bias)
    x = torch.randn(3, 256)  # fp32 in (a layer norm's), bf16 out
    out = half(x)
    assert out.dtype == torch.bfloat16
    expected = F.linear(x.bfloat16(), linear.weight.bfloat16(), linear.bias.bfloat16())
    torch.testing.assert_close(out, expected, atol=0.05, rtol=0.02)


def test_packing_pays_from_the_threshold_up():
    assert not worth_packing(tiny_model(tiny_config()))  # d_model 32: a packed call costs more
    assert worth_packing(tiny_model(tiny_config(**WIDE)))


def test_packed_decoding_copy_searches_the_same_and_leaves_the_model():
    model = tiny_model(tiny_config(**WIDE), sharp=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    copy = inference_model(model, None)
    assert copy is not model and isinstance(copy.decoder_layers[0].feed_forward.w_1, PackedLinear)
    assert not any(isinstance(m, nn.Linear) for m in copy.modules())
    src = torch.randint(4, 300, (16, 12), generator=torch.Generator().manual_seed(0))
    src[:, -1] = model.cfg.eos_id
    assert beam_search(copy, src) == beam_search(model, src)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert type(model.decoder_layers[0].feed_forward.w_1) is nn.Linear


def test_pack_linears_packs_the_tied_projection():
    model = pack_linears(tiny_model(tiny_config(**WIDE)))
    y = torch.randn(5, model.cfg.d_model)
    expected = y @ model.embedding.weight.T
    torch.testing.assert_close(model.project(y), expected, atol=1e-4, rtol=1e-4)
