"""The torch.compile paths against eager mode, on the CPU: the compiled decoding copy returns the
eager hypotheses, the compiled loss model the eager loss and gradients. Each compiles with
inductor (about 55 s together with a cold cache on 2 cores), so they run beside the command
tests rather than among the unit tests; `.ci/run` runs them on every CPU kind's kernels too."""

import numpy as np
import pytest
import torch
from conftest import TINY_SHAPE, tiny_config, tiny_model
from torch._dynamo.utils import counters

from transformer_core.data.batching import TokenBucketSampler, collate
from transformer_core.data.binarized import BinarizedWriter
from transformer_core.data.dataset import ParallelDataset
from transformer_core.decoding.inference import inference_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer
from transformer_core.training.loss import LossModel

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels


@pytest.mark.parametrize(
    "shape",
    [
        {},
        # d_model 256: the copy's products are oneDNN-packed (packed.worth_packing), compiled as
        # one opaque operator each (packed.packed_linear)
        dict(vocab_size=300, d_model=256, d_ff=512, h=4, d_k=64, d_v=64),
    ],
    ids=["tiny", "packed"],
)
def test_compiled_decoding_copy_returns_the_eager_hypotheses_and_compiles_once(shape):
    """inference.inference_model(compile=True): the fixed-shape step compiled, with dynamic
    shapes (one layer a side: each compiles as the others do, and compiling more costs time,
    not coverage). A second batch of other shapes (sentences, source width, output lengths
    past a cache block) compiles nothing more."""
    cfg = tiny_config(encoder_layers=1, decoder_layers=1, **shape)
    model = tiny_model(cfg, seed=5, sharp=True)
    compiled_model = inference_model(model, None, compile=True)
    settings = dict(beam=4, alpha=0.6, max_len_a=1.0, max_len_b=5, nbest=2)
    graphs = None
    for sentences, width, max_len_b in [(5, 9, 5), (11, 21, 20)]:
        gen = torch.Generator().manual_seed(sentences)
        src = torch.randint(4, 50, (sentences, width), generator=gen)
        src[:, -1] = 3
        settings["max_len_b"] = max_len_b
        eager = beam_search_nbest(model, src, **settings)
        compiled = beam_search_nbest(compiled_model, src, **settings)
        assert [[h.tokens for h in hs] for hs in compiled] == [
            [h.tokens for h in hs] for hs in eager
        ]
        for c_hyps, e_hyps in zip(compiled, eager, strict=True):
            for c, e in zip(c_hyps, e_hyps, strict=True):
                assert c.score == pytest.approx(e.score, abs=1e-5)
        if graphs is None:
            graphs = counters["stats"]["unique_graphs"]
    assert counters["stats"]["unique_graphs"] == graphs


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


def test_fixed_shapes_compile_once_each_and_bf16_is_as_close_to_fp32_as_eager_bf16(tmp_path):
    """Training's path on fixed shapes (data/shapes.py): the stacks compiled with static shapes
    under bf16 autocast. Two epochs over batches of three shapes compile three graphs, one per
    shape (dynamo's counters; dynamic shapes would compile two), none in the second epoch. Against the fp32 eager step on the exact batch, each
    step's loss and gradients are as close as the eager bf16 step's: bf16 rounding alone (a
    tiny model's key gradients differ by about 5% in bf16 either way). One layer a side, no
    dropout."""
    rng = np.random.default_rng(7)
    with BinarizedWriter(tmp_path / "d", 50) as writer:
        for i in range(24):  # sources of 2-7, 9-14 or 17-22 tokens: widths 8, 16 and 24
            length = int(rng.integers(2, 8)) + 8 * (i % 3)
            writer.add(rng.integers(4, 50, length).tolist(), rng.integers(4, 50, 6).tolist())
    dataset = ParallelDataset(tmp_path / "d")
    sampler = TokenBucketSampler(dataset.src_lens, dataset.tgt_lens, 64)
    fixed_shapes = sampler.fixed_shapes()
    cfg = ModelConfig(**{**TINY_SHAPE, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0})
    torch.manual_seed(0)
    compiled = LossModel(Transformer(cfg), compile=True, static=True)
    eager = LossModel(Transformer(cfg))
    eager.load_state_dict(compiled.state_dict())
    torch._dynamo.reset()
    counters.clear()
    graphs, shapes = [], set()
    for epoch in range(2):
        for indices in sampler.batches(epoch):
            fixed = collate(dataset, indices, shape=fixed_shapes.of(dataset, indices))
            exact = collate(dataset, indices)
            shapes.add(tuple(fixed.src.shape))
            results = []
            for loss_model, batch, low in ((compiled, fixed, True), (eager, exact, True),
                                           (eager, exact, False)):  # fmt: skip
                loss_model.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
                    loss, _ = loss_model(
                        batch.src, batch.tgt_in, batch.tgt_out, 0.1, batch.target_index
                    )
                loss.backward()
                results.append((loss.detach(), [p.grad.clone() for p in loss_model.parameters()]))
            (loss_new, grads_new), (loss_bf16, grads_bf16), (loss_fp32, grads_fp32) = results
            assert abs(loss_new - loss_fp32) <= 1.5 * abs(loss_bf16 - loss_fp32) + 1e-3
            for new, bf16, fp32 in zip(grads_new, grads_bf16, grads_fp32, strict=True):
                assert (new - fp32).norm() <= 1.5 * (bf16 - fp32).norm() + 1e-4 * fp32.norm()
        graphs.append(counters["stats"]["unique_graphs"])
    assert shapes == {(8, 8), (4, 16), (3, 24)}  # the most pairs of an exact batch a width
    assert graphs == [3, 3]
