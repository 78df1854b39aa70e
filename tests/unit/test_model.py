"""The post-norm Transformer: shapes, masks, gradients, a torch.nn reference, incremental decoding."""

import pytest
import torch
from conftest import tiny_config, tiny_model
from torch import nn

import transformer_core.model.transformer as model_module
from transformer_core.model import decoder_state
from transformer_core.model.decoder_state import PositionBuffer
from transformer_core.model.transformer import Transformer, parameter_count, sinusoidal_encoding

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

TINY = tiny_config(dropout=0.1)  # train mode (the gradient test) goes through dropout
VARIANTS = {
    "tiny": TINY,
    "dk_ne_dv": TINY.replace(d_k=4, d_v=12),  # Table 3 row B: h*d_k != d_model
    "one_head": TINY.replace(h=1, d_k=32, d_v=32),
    "learned_positions": TINY.replace(positional="learned"),
    "asymmetric_depth": TINY.replace(encoder_layers=3, decoder_layers=1),
}


def random_batch(cfg, batch=3, src_len=7, tgt_len=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, cfg.vocab_size, (batch, src_len), generator=gen)
    tgt = torch.randint(4, cfg.vocab_size, (batch, tgt_len), generator=gen)
    tgt[:, 0] = cfg.bos_id
    return src, tgt


@pytest.mark.parametrize("name", VARIANTS)
def test_output_shape(name):
    cfg = VARIANTS[name]
    src, tgt = random_batch(cfg)
    logits = tiny_model(cfg)(src, tgt)
    assert logits.shape == (3, 5, cfg.vocab_size)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", VARIANTS)
def test_every_parameter_gets_a_gradient(name):
    cfg = VARIANTS[name]
    model = tiny_model(cfg).train()
    src, tgt = random_batch(cfg)
    model(src, tgt).logsumexp(-1).sum().backward()
    for pname, param in model.named_parameters():
        assert param.grad is not None, pname
        assert param.grad.abs().sum() > 0, pname


def test_causal_mask_hides_later_target_tokens():
    model = tiny_model(TINY)
    src, tgt = random_batch(TINY, tgt_len=8)
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(4, TINY.vocab_size, (3, 3))
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_extra_padding_leaves_outputs_unchanged():
    model = tiny_model(TINY)
    src, tgt = random_batch(TINY, batch=2, src_len=6, tgt_len=4)
    src[1, 4:] = TINY.pad_id  # second sentence is shorter
    tgt[1, 3:] = TINY.pad_id
    pad_src = torch.cat([src, torch.full((2, 5), TINY.pad_id)], dim=1)
    pad_tgt = torch.cat([tgt, torch.full((2, 3), TINY.pad_id)], dim=1)
    with torch.no_grad():
        plain = model(src, tgt)
        padded = model(pad_src, pad_tgt)
        alone = model(src[1:, :4], tgt[1:, :3])
    torch.testing.assert_close(padded[:, :4], plain, atol=1e-5, rtol=0)
    torch.testing.assert_close(plain[1:, :3], alone, atol=1e-5, rtol=0)


def test_sinusoids_match_the_formula():
    table = sinusoidal_encoding(10, 6)
    pos, i = 7, 1
    assert table[pos, 2 * i].item() == pytest.approx(
        torch.sin(torch.tensor(pos / 10000 ** (2 * i / 6))).item()
    )
    assert table[pos, 2 * i + 1].item() == pytest.approx(
        torch.cos(torch.tensor(pos / 10000 ** (2 * i / 6))).item()
    )


def test_sinusoids_extend_past_max_positions_but_learned_do_not():
    cfg = TINY.replace(max_positions=8)
    src, tgt = random_batch(cfg, src_len=12, tgt_len=3)
    assert tiny_model(cfg)(src, tgt).shape == (3, 3, cfg.vocab_size)
    with pytest.raises(ValueError, match="max_positions"):
        tiny_model(cfg.replace(positional="learned"))(src, tgt)


def copy_attention(ours, ref: nn.MultiheadAttention):
    ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    ref.out_proj.weight.copy_(ours.w_o.weight)
    ref.out_proj.bias.copy_(ours.w_o.bias)


def copy_common(ours, ref):
    ref.linear1.load_state_dict(ours.feed_forward.w_1.state_dict())
    ref.linear2.load_state_dict(ours.feed_forward.w_2.state_dict())
    ref.norm1.load_state_dict(ours.norm_1.state_dict())
    ref.norm2.load_state_dict(ours.norm_2.state_dict())


def test_matches_torch_nn_post_norm_layers():
    cfg = TINY.replace(encoder_layers=3, decoder_layers=2)
    model = tiny_model(cfg)
    kw = dict(
        d_model=cfg.d_model,
        nhead=cfg.h,
        dim_feedforward=cfg.d_ff,
        dropout=cfg.dropout,
        activation="relu",
        layer_norm_eps=1e-6,
        batch_first=True,
        norm_first=False,
    )
    enc = nn.ModuleList(nn.TransformerEncoderLayer(**kw) for _ in range(cfg.encoder_layers)).eval()
    dec = nn.ModuleList(nn.TransformerDecoderLayer(**kw) for _ in range(cfg.decoder_layers)).eval()
    with torch.no_grad():
        for ours, ref in zip(model.encoder_layers, enc, strict=True):
            copy_attention(ours.self_attn, ref.self_attn)
            copy_common(ours, ref)
        for ours, ref in zip(model.decoder_layers, dec, strict=True):
            copy_attention(ours.self_attn, ref.self_attn)
            copy_attention(ours.cross_attn, ref.multihead_attn)
            copy_common(ours, ref)
            ref.norm3.load_state_dict(ours.norm_3.state_dict())

        src, tgt = random_batch(cfg, batch=3, src_len=9, tgt_len=6)
        src[0, 6:] = cfg.pad_id
        src_pad = src == cfg.pad_id
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        x = model.embedding(src) * cfg.d_model**0.5 + sinusoidal_encoding(9, cfg.d_model)
        for layer in enc:
            x = layer(x, src_key_padding_mask=src_pad)
        y = model.embedding(tgt) * cfg.d_model**0.5 + sinusoidal_encoding(6, cfg.d_model)
        for layer in dec:
            y = layer(y, x, tgt_mask=causal, memory_key_padding_mask=src_pad)
        reference = y @ model.embedding.weight.T
        ours = model(src, tgt)
    assert (ours - reference).abs().max().item() <= 1e-5


@pytest.mark.parametrize("name", VARIANTS)
def test_incremental_decoding_matches_full_forward(name):
    cfg = VARIANTS[name]
    model = tiny_model(cfg)
    src, tgt = random_batch(cfg, src_len=8, tgt_len=7)
    src[2, 5:] = cfg.pad_id
    with torch.no_grad():
        full = model(src, tgt)
        memory, src_mask = model.encode(src)
        state = model.init_state(memory, src_mask)
        for t in range(tgt.size(1)):
            step = model.decode_step(tgt[:, t], state)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=0)


def test_reorder_state_follows_the_selected_rows():
    model = tiny_model(TINY)
    src, tgt = random_batch(TINY, tgt_len=4)
    with torch.no_grad():
        memory, mask = model.encode(src)
        state = model.init_state(memory, mask)
        for t in range(2):
            model.decode_step(tgt[:, t], state)
        state.reorder(torch.tensor([2, 1, 0]))
        state.reorder(torch.tensor([0, 0, 2]))  # two reorders between steps compose
        order = torch.tensor([2, 2, 0])
        step = model.decode_step(tgt[order, 2], state)
        full = model(src[order], tgt[order])
    torch.testing.assert_close(step, full[:, 2], atol=1e-5, rtol=0)


def test_bf16_training_on_cpu_takes_matmul_attention_up_to_its_key_limit(monkeypatch):
    """Under bf16 autocast on a CPU, attention over at most CPU_BF16_MATMUL_MAX_KEYS keys runs
    as batched matmuls (SDPA's bf16 kernel makes a call per sentence and head), longer keys
    and fp32 through SDPA; the loss and gradients agree with SDPA's within bf16 rounding."""
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        model_module.F,
        "scaled_dot_product_attention",
        lambda q, k, *args, **kwargs: calls.append(k.size(-2)) or sdpa(q, k, *args, **kwargs),
    )
    model = tiny_model(TINY).eval()  # no dropout: the runs compare
    src, tgt = random_batch(TINY, tgt_len=6)
    src[1, 3:] = TINY.pad_id

    def loss_and_grads(**autocast):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, **autocast):
            loss = model(src, tgt).float().logsumexp(-1).mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss, grads = loss_and_grads()
    assert calls == []  # every attention of the tiny batch: matmuls
    monkeypatch.setattr(model_module, "CPU_BF16_MATMUL_MAX_KEYS", 4)
    fused_loss, fused_grads = loss_and_grads()
    assert sorted(set(calls)) == sorted({src.size(1), tgt.size(1)})  # over 4 keys: SDPA
    torch.testing.assert_close(loss, fused_loss, atol=2e-2, rtol=0)
    for ours, theirs in zip(grads, fused_grads, strict=True):
        torch.testing.assert_close(ours, theirs, atol=3e-2, rtol=5e-2)
    fused_calls = len(calls)
    calls.clear()
    monkeypatch.setattr(model_module, "CPU_BF16_MATMUL_MAX_KEYS", 10**6)
    loss_and_grads(enabled=False)  # fp32: SDPA whatever the length
    assert len(calls) == fused_calls > 0


def test_beam_rows_share_their_sentence_encoder_cache():
    """beam rows per sentence: rows move within their sentence, sentences leave; logits stay exact."""
    model = tiny_model(TINY)
    src, tgt = random_batch(TINY, tgt_len=4)
    src[1, 4:] = TINY.pad_id
    beam = 2
    with torch.no_grad():
        memory, mask = model.encode(src)
        state = model.init_state(memory, mask, beam=beam)
        assert state.layers[0].cross_k.size(0) == src.size(0)  # one copy per sentence
        row_tgt = tgt.repeat_interleave(beam, dim=0)  # (3 * 2, T): row r decodes sentence r // 2
        for t in range(2):
            model.decode_step(row_tgt[:, t], state)
        # Sentence 1 leaves; sentence 0 keeps row 1 twice, sentence 2 swaps its rows.
        rows = torch.tensor([1, 1, 5, 4])
        state.reorder(rows, sentences=torch.tensor([0, 2]))
        step = model.decode_step(row_tgt[rows, 2], state)
        sentence_of_row = rows // beam
        full = model(src[sentence_of_row], row_tgt[rows])
    torch.testing.assert_close(step, full[:, 2], atol=1e-5, rtol=0)


def test_one_row_per_sentence_spreads_over_the_beam():
    """Beam search's first step: one row per sentence, then the first reorder spreads each
    sentence over ``beam`` rows (the caches grow in rows); logits stay exact."""
    model = tiny_model(TINY)
    src, tgt = random_batch(TINY, tgt_len=4)
    beam = 3
    with torch.no_grad():
        memory, mask = model.encode(src)
        state = model.init_state(memory, mask, capacity=2)  # one row per sentence
        model.decode_step(tgt[:, 0], state)
        rows = torch.arange(src.size(0)).repeat_interleave(beam)  # each sentence's one row, 3 times
        state.reorder(rows, beam=beam)
        row_tgt = tgt.repeat_interleave(beam, dim=0)
        model.decode_step(row_tgt[:, 1], state)
        # Sentence 0 leaves; the others permute their rows.
        rows = torch.tensor([4, 3, 3, 8, 6, 7])
        state.reorder(rows, sentences=torch.tensor([1, 2]))
        step = model.decode_step(row_tgt[rows, 2], state)
        full = model(src[rows // beam], row_tgt[rows])
    assert state.beam == beam
    torch.testing.assert_close(step, full[:, 2], atol=1e-5, rtol=0)


def test_parameter_count_matches_instantiated_model():
    assert parameter_count(TINY) == sum(p.numel() for p in Transformer(TINY).parameters())


def test_initializations():
    """xavier: Xavier-uniform projections, embedding N(0, d_model^-0.5); normal: every matrix N(0, init_std)."""
    cfg = TINY.replace(d_model=64, d_ff=256, d_k=16, d_v=16, vocab_size=2000)
    xavier, normal = tiny_model(cfg), tiny_model(cfg.replace(init="normal", init_std=0.05))
    w_1 = xavier.encoder_layers[
        0
    ].feed_forward.w_1.weight.detach()  # (256, 64): bound sqrt(6 / (64 + 256))
    assert w_1.abs().max() <= (6 / 320) ** 0.5 and w_1.std().item() == pytest.approx(
        (2 / 320) ** 0.5, rel=0.05
    )
    assert xavier.embedding.weight.std().item() == pytest.approx(64**-0.5, rel=0.05)
    for model in (xavier, normal):
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                assert not param.any(), name
    for name, param in normal.named_parameters():
        if param.dim() > 1:
            assert param.std().item() == pytest.approx(0.05, rel=0.1), name
            assert param.mean().abs().item() < 0.01, name
    assert cfg.init == "xavier"  # the paper's code (tensor2tensor) is the default


@pytest.mark.parametrize("dim", [1, 2])  # positions right after the rows (one run a row), or not
@pytest.mark.parametrize("capacity", [1, 3, 40])  # growing past it, and not
def test_position_buffer_equals_a_growing_tensor(capacity, dim):
    """Appends and reorders (rows kept, repeated, dropped) give what concatenation gives."""
    gen = torch.Generator().manual_seed(7)
    rows = 6
    shape = [2, 3]
    shape.insert(dim - 1, 1)  # one position: (R, 1, 2, 3) or (R, 2, 1, 3)
    buffer = PositionBuffer(rows, (2, 3), dim, capacity, torch.empty(0))
    reference = torch.empty(rows, *shape).narrow(dim, 0, 0)
    for step in range(9):
        new_rows = max(1, rows - step // 3)
        order = torch.randint(0, reference.size(0), (new_rows,), generator=gen)
        new = torch.randn(new_rows, *shape, generator=gen)
        if step % 2:
            buffer.append(new, order)
            reference = torch.cat([reference[order], new], dim=dim)
        elif new_rows == reference.size(0):
            buffer.append(new)
            reference = torch.cat([reference, new], dim=dim)
        else:
            continue
        assert torch.equal(buffer.values, reference)


def test_cache_layouts_give_the_same_logits(monkeypatch):
    """Position-major self-attention caches (CPUs in fp32) and head-major ones (bf16, GPUs):
    the same logits through beam-style reorders, sentences leaving included."""
    model = tiny_model(TINY)
    src, tgt = random_batch(TINY, tgt_len=4)
    beam = 2
    logits = {}
    for layout in (True, False):
        monkeypatch.setattr(decoder_state, "position_major", lambda like, layout=layout: layout)
        with torch.no_grad():
            state = model.init_state(*model.encode(src), capacity=2)
            steps = [model.decode_step(tgt[:, 0], state)]
            state.reorder(torch.arange(src.size(0)).repeat_interleave(beam), beam=beam)
            row_tgt = tgt.repeat_interleave(beam, dim=0)
            steps.append(model.decode_step(row_tgt[:, 1], state))
            rows = torch.tensor([3, 2, 5, 5])  # sentence 0 leaves
            state.reorder(rows, sentences=torch.tensor([1, 2]))
            steps.append(model.decode_step(row_tgt[rows, 2], state))
        assert (state.layers[0].self_k.dim == 1) == layout
        logits[layout] = steps
    for position_major, head_major in zip(logits[True], logits[False], strict=True):
        torch.testing.assert_close(position_major, head_major, atol=1e-6, rtol=0)
