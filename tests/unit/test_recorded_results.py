"""Training and decoding give what they gave before the host-lean step and search (commit 233b447).

The expected values below were computed by that commit's code with this file's setup (one
thread): the loss of a fixed batch in fp32, the weights after three optimizer steps in float64,
and the 2-best hypotheses of a beam search in fp32. Since then the loss drops padding by a host-side index and
takes the label smoothing's sums through the projection's column sum; training runs its
micro-batches under one autocast context, checks divergence on the device and collates batches
ahead; beam search keeps its bookkeeping on the device and its caches preallocated. None of
that may change a result beyond rounding.
"""

import numpy as np
import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.data.batching import collate
from transformer_core.data.binarized import BinarizedWriter
from transformer_core.data.dataset import ParallelDataset
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.model.config import model_config
from transformer_core.model.transformer import Transformer
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.loss import LossModel
from transformer_core.training.step import Trainer

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

SHAPE = dict(
    encoder_layers=2, decoder_layers=2, d_model=32, d_ff=64, h=4, d_k=8, d_v=8, dropout=0.0
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """40 pairs: a source and its reverse, plus a token."""
    prefix = tmp_path_factory.mktemp("unchanged") / "c"
    rng = np.random.default_rng(0)
    with BinarizedWriter(prefix, 50) as writer:
        for _ in range(40):
            src = rng.integers(4, 50, rng.integers(3, 12)).tolist()
            writer.add(src, src[::-1] + [7])
    return ParallelDataset(prefix)


def test_loss_of_a_fixed_batch(corpus, one_thread):
    cfg = model_config("base", vocab_size=50, **SHAPE)
    torch.manual_seed(0)
    batch = collate(corpus, list(range(10)))
    with torch.no_grad():
        loss, nll = LossModel(Transformer(cfg))(batch.src, batch.tgt_in, batch.tgt_out, 0.1)
    assert loss.item() == pytest.approx(LOSS, rel=1e-6)
    assert nll.item() == pytest.approx(NLL, rel=1e-6)


@pytest.fixture
def one_thread():
    """The expected values were computed on one thread: reductions then add up in one order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def float64():
    """Models built and trained in float64 (``torch.set_default_dtype``) for the duration."""
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(dtype)


def test_weights_after_three_steps(corpus, one_thread, float64):
    """Three optimizer steps in float64, whose result does not depend on the CPU's kernels.

    In fp32 it would: the gradient of an attention's key bias is zero in exact arithmetic (the
    bias adds the same q . b to all of a query's scores, which the softmax ignores), so what the
    kernels compute for it is rounding, and Adam divides that rounding by its own size, moving
    each key bias by about the learning rate in a direction that the rounding picks. ATen's AVX2
    and AVX-512 kernels then disagree by 0.09 in the sum of the weights. In float64 that rounding
    (about 1e-18) is far below Adam's eps (1e-9), so the key biases move by about 1e-11 and every
    weight agrees to about 1e-10 across ATen's default, AVX2 and AVX-512 kernels; rel 1e-9 on the
    sums leaves room for that and nothing else: a wrong gradient moves them by percents.
    """
    cfg = model_config("base", vocab_size=50, **SHAPE)
    torch.manual_seed(0)
    train_cfg = TrainSettings(max_tokens=120, tokens_per_step=240, warmup=10, precision="fp32")
    ctx = DistContext(0, 0, 1, torch.device("cpu"), owns_group=False)
    trainer = Trainer.fresh(cfg, train_cfg, ctx, corpus)
    try:
        for _ in range(3):
            trainer.train_step()
    finally:
        trainer.close()
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    assert params.dtype == torch.float64
    assert params.sum().item() == pytest.approx(WEIGHTS_SUM, rel=1e-9)
    assert params.pow(2).sum().item() == pytest.approx(WEIGHTS_SQ, rel=1e-9)
    torch.testing.assert_close(
        trainer.model.embedding.weight[4, :6], torch.tensor(EMBEDDING_HEAD), rtol=1e-9, atol=1e-9
    )


def test_beam_search_hypotheses(one_thread):
    model = tiny_model(tiny_config(), seed=5, sharp=True)
    gen = torch.Generator().manual_seed(6)
    src = torch.randint(4, 50, (5, 9), generator=gen)
    src[:, -1] = 3
    src[3, 5:], src[3, 4] = 0, 3  # a shorter sentence, padded
    hyps = beam_search_nbest(model, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=5, nbest=2)
    assert [[h.tokens for h in best] for best in hyps] == [
        [tokens for tokens, _, _ in best] for best in BEAM
    ]
    for best, expected in zip(hyps, BEAM, strict=True):
        for h, (_, score, log_prob) in zip(best, expected, strict=True):
            assert h.score == pytest.approx(score, abs=1e-4)
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)


# What commit 233b447 computed (the float64 weights: its code run in float64, to within 1e-12).
LOSS = 372.9980773925781
NLL = 374.4999084472656
WEIGHTS_SUM = 326.62795087037307
WEIGHTS_SQ = 1497.9957906343673
EMBEDDING_HEAD = [
    -0.16020015432036053,
    -0.07461099968954292,
    -0.0524089142310621,
    0.16111692233642005,
    -0.05035514695441075,
    -0.10267446082232928,
]
BEAM = [  # per sentence, the 2 best: tokens, score, log-prob
    [
        [[28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28], -1.14726, -2.291],
        [[11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11], -1.70034, -3.39544],
    ],
    [
        [[30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30], -0.60649, -1.21112],
        [[11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11], -1.92011, -3.83431],
    ],
    [
        [[30, 27, 27, 27, 27, 27, 30, 30, 30, 30, 30, 30, 30, 30], -2.84533, -5.6819],
        [[30, 27, 27, 27, 27, 30, 30, 30, 30, 30, 30, 30, 30, 30], -2.92829, -5.84757],
    ],
    [
        [[30, 30, 27, 27, 27, 27, 30, 30, 30, 30], -2.03327, -3.52337],
        [[30, 30, 30, 30, 30, 30, 30, 30, 30, 30], -2.27657, -3.94497],
    ],
    [
        [[30, 30, 27, 27, 27, 27, 27, 27, 30, 30, 30, 30, 30, 30], -2.1264, -4.24625],
        [[30, 30, 27, 27, 27, 27, 27, 27, 27, 30, 30, 30, 30, 30], -2.21559, -4.42437],
    ],
]
