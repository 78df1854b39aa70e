"""Attention weights of a trained model and the paper's Figures 3-5 drawn from them."""

import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.figures.attention_maps import encoder_attention, figure_layer, pick_heads
from transformer_core.figures.draw import draw_figure
from transformer_core.paper import ATTENTION_FIGURES

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

CFG = tiny_config()


def test_weights_are_what_forward_applies():
    model = tiny_model(CFG, seed=1)
    attn = model.encoder_layers[0].self_attn
    x = torch.randn(2, 5, CFG.d_model)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]
    weights = attn.attention_weights(x, x, mask)  # (B, h, T, S)
    assert weights.shape == (2, CFG.h, 5, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(2, CFG.h, 5))
    assert (weights[1, :, :, 3:] == 0).all()  # padding gets no attention
    _, v = attn.project_kv(x)
    by_hand = attn.w_o(torch.matmul(weights, v).transpose(1, 2).reshape(2, 5, -1))
    assert torch.allclose(by_hand, attn(x, x, mask), atol=1e-5)


def test_recording_leaves_the_encoder_unchanged():
    model = tiny_model(CFG, seed=2)
    ids = [5, 6, 7, 8]
    src = torch.tensor([[*ids, CFG.eos_id]])
    before, _ = model.encode(src)
    attention = encoder_attention(model, ids, ["\u2581a", "\u2581b", "c", "\u2581d"], layer=2)
    after, _ = model.encode(src)
    assert torch.equal(before, after) and not model.encoder_layers[1].self_attn._forward_pre_hooks
    assert attention.tokens[-1] == "<EOS>" and attention.weights.shape == (CFG.h, 5, 5)
    assert attention.word_position("b") == 1 and attention.word_position("bc") == 1
    heads = pick_heads(attention, "d", 2)
    assert len(set(heads)) == 2 and pick_heads(attention, None, 1)[0] in range(CFG.h)


def test_figure_layer_is_the_papers_or_the_last():
    assert figure_layer(6) == 5 and figure_layer(8) == 5 and figure_layer(3) == 3


def test_every_figure_draws_a_png(tmp_path):
    model = tiny_model(CFG, seed=3)
    for figure in ATTENTION_FIGURES:
        words = figure.sentence.split()
        ids = [4 + i % 40 for i in range(len(words))]
        attention = encoder_attention(model, ids, [f"\u2581{w}" for w in words], layer=2)
        out = tmp_path / f"{figure.name}.png"
        draw_figure(figure, attention, out, "tiny")
        assert out.read_bytes()[:4] == b"\x89PNG"
