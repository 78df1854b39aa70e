"""bf16 compute weights beside fp32 masters (``training/master_weights.py``): a step is as close
to the fp32 step as bf16 autocast's, the masters stay fp32 and the copy their rounding, a
resumed run continues bit for bit, and the setting needs bf16 precision."""

import pytest
import torch
from conftest import TINY_SHAPE, TRAIN_SHAPE
from corpora import write_corpus

from transformer_core.data.dataset import ParallelDataset
from transformer_core.device import cpu_has_native_bf16
from transformer_core.errors import ConfigError
from transformer_core.model.config import ModelConfig, model_config
from transformer_core.model.transformer import Transformer
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.loss import LossModel
from transformer_core.training.master_weights import MasterWeights, compute_dtype
from transformer_core.training.step import Trainer

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

CPU = DistContext(0, 0, 1, torch.device("cpu"), owns_group=False)
native = pytest.mark.skipif(
    not cpu_has_native_bf16(), reason="bf16 precision needs a CPU that computes bf16 natively"
)


def _micro_batches(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(3)
    return [
        (torch.randint(4, 50, (6, 9), generator=gen), torch.randint(4, 50, (6, 8), generator=gen))
        for _ in range(count)
    ]


def _gradients(loss_model: LossModel, batches, autocast: bool, master=None, weights=None):
    """The summed gradient of ``batches`` (a step's micro-batches) on ``weights`` (default:
    ``loss_model``'s), as the trainer forms it: through ``master`` where given."""
    loss_model.zero_grad(set_to_none=True)
    for i, (src, tgt) in enumerate(batches):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss, _ = loss_model(src, tgt[:, :-1], tgt[:, 1:], 0.1)
        (loss / 100).backward()
        if master:
            master.accumulate(first=i == 0)
    return [p.grad.clone() for p in (weights or loss_model).parameters()]


def test_a_step_of_the_bf16_copy_is_as_close_to_fp32_as_autocast():
    """Two micro-batches of the tiny model, no dropout: the fp32 gradients the copy's bf16 ones
    add up to differ from the fp32 step's about as much as bf16 autocast's do (bf16 rounding:
    a few percent), over all weights together; the copy's own gradients are freed."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**TINY_SHAPE))
    batches = _micro_batches(2)
    fp32 = _gradients(LossModel(model), batches, autocast=False)
    autocast = _gradients(LossModel(model), batches, autocast=True)
    master = MasterWeights(model, torch.bfloat16)
    copy = _gradients(LossModel(master.compute), batches, False, master, weights=model)
    assert all(g.dtype == torch.float32 for g in copy)
    assert all(p.grad is None for p in master.compute.parameters())

    def error(grads: list[torch.Tensor]) -> float:
        return float(
            torch.cat([(g - f).flatten() for g, f in zip(grads, fp32, strict=True)]).norm()
        )

    scale = float(torch.cat([f.flatten() for f in fp32]).norm())
    assert 0 < error(copy) <= 2 * error(autocast) + 1e-3 * scale, (error(copy), error(autocast))
    assert error(copy) < 0.05 * scale
    # A weight whose copy got no gradient (unused by the batch) gets zeros, not a stale sum.
    for weight in master.compute.parameters():
        weight.grad = torch.ones_like(weight)
    unused = master.compute.decoder_layers[0].norm_1.bias
    unused.grad = None
    master.accumulate(first=True)
    grads = {
        id(c): w.grad for c, w in zip(master.compute.parameters(), model.parameters(), strict=True)
    }
    assert not grads[id(unused)].any() and all(
        bool((g == 1).all()) for key, g in grads.items() if key != id(unused)
    )


def test_the_copy_is_the_masters_rounding_and_keeps_its_tensors():
    """After a refresh the copy holds the masters rounded to bf16, in the tensors it had (a CUDA
    graph reads them there); the embedding stays tied to the projection."""
    torch.manual_seed(1)
    model = Transformer(ModelConfig(**TINY_SHAPE))
    master = MasterWeights(model, torch.bfloat16)
    before = [p.data_ptr() for p in master.compute.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    master.refresh()
    assert [p.data_ptr() for p in master.compute.parameters()] == before
    for weight, copy in zip(model.parameters(), master.compute.parameters(), strict=True):
        assert copy.dtype == torch.bfloat16 and torch.equal(copy, weight.to(torch.bfloat16))
    assert len(list(master.compute.parameters())) == len(list(model.parameters()))


def test_bf16_weights_need_bf16_precision():
    assert compute_dtype("fp32", torch.bfloat16) is None
    assert compute_dtype("bf16", torch.bfloat16) == torch.bfloat16
    with pytest.raises(ConfigError, match="train.compute_weights bf16 needs bf16 precision"):
        compute_dtype("bf16", None)
    with pytest.raises(ConfigError, match="train.compute_weights"):
        TrainSettings(compute_weights="fp16")


def _trainer(corpus: ParallelDataset, **settings) -> Trainer:
    cfg = TrainSettings(
        max_tokens=64, tokens_per_step=128, warmup=4, precision="bf16", num_threads=1, **settings
    )
    return Trainer.fresh(model_config("base", vocab_size=24, **TRAIN_SHAPE), cfg, CPU, corpus)


@native
def test_a_resumed_run_with_bf16_weights_continues_bit_for_bit(tmp_path):
    """Four steps of two micro-batches (with dropout) against two, a checkpoint's state, and two
    more in a new trainer: the same fp32 masters, Adam moments and bf16 copy, and the same
    loss; the checkpoint's weights are the fp32 masters, and dev is scored with them."""
    corpus = ParallelDataset(write_corpus(tmp_path / "train"))

    def run(steps: int, payload: dict | None = None) -> tuple[list[torch.Tensor], dict]:
        """Train ``steps`` (after loading ``payload``): the trainer's tensors and state."""
        trainer = _trainer(corpus, compute_weights="bf16")
        try:
            if payload:
                trainer.load_state(payload, print)
            for _ in range(steps):
                trainer.train_step()
            state = {**trainer.state(0.0, {}), "model": trainer.model.state_dict()}
            assert trainer.scorer.model is trainer.model  # dev scored with the fp32 weights
            assert trainer.evaluate(corpus)["dev_loss"] > 0
        finally:
            trainer.close()
        moments = [m for state in trainer.optimizer.state.values() for m in state.values()]
        copy = list(trainer.master.compute.parameters())
        return [*state["model"].values(), *copy, *moments, *state["interval_sums"]], state

    whole, _ = run(4)
    _, checkpoint = run(2)
    assert all(t.dtype == torch.float32 for t in checkpoint["model"].values())
    resumed, _ = run(2, checkpoint)
    assert len(whole) > 3 * len(checkpoint["model"])
    for a, b in zip(whole, resumed, strict=True):
        assert torch.equal(a, b)
