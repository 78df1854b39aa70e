"""The torch.compile paths against eager mode, on the CPU: the compiled decoding copy returns the
eager hypotheses, the compiled loss model the eager loss and gradients. Each compiles with
inductor (about 55 s together with a cold cache on 2 cores), so they run beside the command
tests rather than among the unit tests; `.ci/run` runs them on every CPU kind's kernels too."""

import pytest
import torch
from conftest import TINY_SHAPE, tiny_config, tiny_model

from transformer_core.decoding.inference import inference_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer
from transformer_core.training.loss import LossModel


def test_compiled_decoding_copy_returns_the_eager_hypotheses():
    """inference.inference_model(compile=True): the encoder and each layer's step compiled (one
    layer a side: each compiles as the others do, and compiling more costs time, not coverage)."""
    model = tiny_model(tiny_config(encoder_layers=1, decoder_layers=1), seed=5, sharp=True)
    gen = torch.Generator().manual_seed(6)
    src = torch.randint(4, 50, (5, 9), generator=gen)
    src[:, -1] = 3
    settings = dict(beam=4, alpha=0.6, max_len_a=1.0, max_len_b=5, nbest=2)
    eager = beam_search_nbest(model, src, **settings)
    compiled = beam_search_nbest(inference_model(model, None, compile=True), src, **settings)
    assert [[h.tokens for h in hs] for hs in compiled] == [[h.tokens for h in hs] for hs in eager]
    for c_hyps, e_hyps in zip(compiled, eager, strict=True):
        for c, e in zip(c_hyps, e_hyps, strict=True):
            assert c.score == pytest.approx(e.score, abs=1e-5)


def test_compiled_loss_model_gives_the_eager_loss_and_gradients():
    """torch.compile of the encoder and decoder stacks (dynamic shapes: one graph for batches
    of other shapes) computes what eager mode does, to fp32 rounding. One layer a side: each
    compiles as the others do, and compiling more costs the test time, not coverage."""
    results = []
    for compile in (False, True):
        torch.manual_seed(0)
        shape = {**TINY_SHAPE, "encoder_layers": 1, "decoder_layers": 1}
        loss_model = LossModel(Transformer(ModelConfig(**shape)), compile)
        losses = []
        for rows, src_len, tgt_len in [(3, 7, 5), (4, 9, 6)]:
            gen = torch.Generator().manual_seed(rows)
            src = torch.randint(4, 50, (rows, src_len), generator=gen)
            tgt = torch.randint(4, 50, (rows, tgt_len), generator=gen)
            loss, _ = loss_model(src, tgt, tgt, 0.1)
            loss.backward()
            losses.append(loss.detach())
        grads = [p.grad for p in loss_model.parameters()]
        results.append((torch.stack(losses), grads))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    for compiled, eager in zip(results[1][1], results[0][1], strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
