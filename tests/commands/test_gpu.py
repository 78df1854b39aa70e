"""On a CUDA GPU: its training step, beam search and resuming agree with the CPU's.

Run with ``pytest -m gpu``; without CUDA every test here is skipped, saying why.
"""

import pytest
import torch
from conftest import TRAIN_SHAPE, tiny_config, tiny_model
from corpora import write_corpus
from test_train_resume import kill_and_resume
from torch._dynamo.utils import counters

from transformer_core.data.batching import collate
from transformer_core.data.dataset import ParallelDataset
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.model.config import model_config
from transformer_core.model.transformer import Transformer
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.loss import LossModel
from transformer_core.training.step import Trainer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
CUDA = torch.device("cuda")
NODE_INPUTS = "cudagraph_recorded_non_static_inputs"  # inductor's count, at each recording


def test_bf16_step_on_cuda_matches_the_fp32_step_on_the_cpu(tmp_path):
    """The same model and batch: loss and gradients of a bf16 autocast step on the GPU against
    the fp32 step on the CPU, within bf16's rounding."""
    corpus = ParallelDataset(write_corpus(tmp_path / "train", n=60, vocab=24))
    cfg = model_config("base", vocab_size=24, **{**TRAIN_SHAPE, "dropout": 0.0})
    batch = collate(corpus, list(range(60)))
    results = []
    for device, autocast in ((torch.device("cpu"), False), (CUDA, True)):
        torch.manual_seed(0)
        model = LossModel(Transformer(cfg).to(device))
        tensors = [
            t.to(device) for t in (batch.src, batch.tgt_in, batch.tgt_out, batch.target_index)
        ]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss, nll = model(*tensors[:3], 0.1, tensors[3])
        loss.backward()
        grads = [p.grad.detach().float().cpu().flatten() for p in model.parameters()]
        results.append((loss.item(), torch.cat(grads)))
    (cpu_loss, cpu_grad), (gpu_loss, gpu_grad) = results
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-2)
    cosine = torch.nn.functional.cosine_similarity(cpu_grad, gpu_grad, dim=0).item()
    assert cosine > 0.999, cosine
    assert (gpu_grad - cpu_grad).norm() / cpu_grad.norm() < 0.03


def _ten_steps(corpus: ParallelDataset, device: torch.device, **settings) -> float:
    """The label-smoothed loss per target token over ten full Trainer steps (batches
    prefetched, and pinned for a GPU)."""
    cfg = model_config("base", vocab_size=24, **{**TRAIN_SHAPE, "dropout": 0.0})
    train_cfg = TrainSettings(max_tokens=64, tokens_per_step=128, warmup=5, **settings)
    trainer = Trainer.fresh(cfg, train_cfg, DistContext(0, 0, 1, device, owns_group=False), corpus)
    try:
        tokens = sum(trainer.train_step().tgt_tokens for _ in range(10))
        return trainer.interval_sums()[0] / tokens
    finally:
        trainer.close()


@pytest.mark.parametrize(
    "settings",
    [  # every path named: what auto picks on a GPU changes with the measurements
        {"compile": "off", "compute_weights": "fp32"},
        {"compile": "on", "compute_weights": "fp32"},
        {"compile": "on", "compute_weights": "bf16"},
    ],
    ids=["eager", "compiled-cuda-graphs", "compiled-bf16-weights"],
)
def test_training_steps_on_cuda_track_the_cpu(tmp_path, settings):
    """Ten steps in bf16 on the GPU (widths padded to 8; compiled: fixed shapes, each recorded
    as a CUDA graph; with bf16 compute weights) end at about the CPU's fp32 loss."""
    corpus = ParallelDataset(write_corpus(tmp_path / "train", n=200, vocab=24))
    cpu = _ten_steps(corpus, torch.device("cpu"), precision="fp32")
    # A copy, and the counters read anew after the run: inductor's first compile in a process
    # (on a cold cache) replaces counters["inductor"] with a copy, and a Counter held from
    # before it never moves.
    before = counters["inductor"].copy()
    assert _ten_steps(corpus, CUDA, precision="bf16", **settings) == pytest.approx(cpu, rel=2e-2)
    if (
        settings["compile"] == "on"
    ):  # each CUDA graph recorded counts its batch inputs; none skipped
        after = counters["inductor"]
        assert after["cudagraph_skips"] == before["cudagraph_skips"]
        assert after[NODE_INPUTS] > before[NODE_INPUTS]


@pytest.mark.parametrize("beam", [1, 4])
def test_beam_search_on_cuda_returns_the_cpu_hypotheses(beam):
    model = tiny_model(tiny_config(), seed=5, sharp=True)
    gen = torch.Generator().manual_seed(6)
    src = torch.randint(4, 50, (7, 9), generator=gen)
    src[:, -1] = 3
    src[2, 4:], src[2, 3] = 0, 3
    settings = dict(beam=beam, alpha=0.6, max_len_a=1.0, max_len_b=5, nbest=beam)
    on_cpu = beam_search_nbest(model, src, **settings)
    on_gpu = beam_search_nbest(model.to(CUDA), src.to(CUDA), **settings)
    assert [[h.tokens for h in hs] for hs in on_gpu] == [[h.tokens for h in hs] for hs in on_cpu]
    for gpu_hyps, cpu_hyps in zip(on_gpu, on_cpu, strict=True):
        for g, c in zip(gpu_hyps, cpu_hyps, strict=True):
            assert g.score == pytest.approx(c.score, abs=1e-4)


def test_killed_and_resumed_run_on_cuda_is_exact(tmp_path):
    """As test_train_resume's CPU test, on the GPU (bf16 autocast, its default there)."""
    kill_and_resume(tmp_path, "--device", "cuda")


def test_compiled_step_gives_the_eager_loss_on_cuda(tmp_path):
    corpus = ParallelDataset(write_corpus(tmp_path / "train", n=60, vocab=24))
    cfg = model_config("base", vocab_size=24, **{**TRAIN_SHAPE, "dropout": 0.0})
    batch = collate(corpus, list(range(60)), multiple=8)
    tensors = [t.to(CUDA) for t in (batch.src, batch.tgt_in, batch.tgt_out, batch.target_index)]
    losses, grads = [], []
    for compile in (False, True):  # compiled: the stacks, and the loss's chunk (fused)
        torch.manual_seed(0)
        model = LossModel(Transformer(cfg).to(CUDA), compile)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(*tensors[:3], 0.1, tensors[3])[0]
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert losses[1] == pytest.approx(losses[0], rel=1e-2)
    assert torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0) > 0.999


def test_cuda_graph_replays_draw_new_dropout_masks(tmp_path):
    """The stacks compiled for one static shape run as CUDA graphs: warmed up, recorded, then
    replayed. Each run must draw new dropout masks, as eager steps do (the RNG's offset advanced
    per replay): the same batch and weights give another loss every time."""
    corpus = ParallelDataset(write_corpus(tmp_path / "train", n=60, vocab=24))
    cfg = model_config("base", vocab_size=24, **{**TRAIN_SHAPE, "dropout": 0.1})
    batch = collate(corpus, list(range(60)), multiple=8)
    tensors = [t.to(CUDA) for t in (batch.src, batch.tgt_in, batch.tgt_out, batch.target_index)]
    torch.manual_seed(0)
    model = LossModel(Transformer(cfg).to(CUDA), compile=True, static=True).train()
    assert model.cuda_graphs
    losses = []
    for _ in range(5):
        model.zero_grad(set_to_none=True)  # the graph's gradients live in its pool
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(*tensors[:3], 0.1, tensors[3])[0]
        loss.backward()
        losses.append(loss.item())
    assert len(set(losses)) == len(losses), losses


def test_compiled_fixed_shape_decoding_on_cuda_returns_the_cpu_hypotheses():
    """The fixed-shape step compiled with CUDA graphs (``inference_model(compile=True)``), fp32:
    the CPU's eager hypotheses over two batches of other shapes, and no graph compiled for the
    second."""
    from torch._dynamo.utils import counters

    from transformer_core.decoding.inference import inference_model

    model = tiny_model(tiny_config(), seed=5, sharp=True)
    compiled = inference_model(tiny_model(tiny_config(), seed=5, sharp=True).to(CUDA), None, True)
    graphs = None
    for sentences, width in [(7, 9), (13, 17)]:
        gen = torch.Generator().manual_seed(sentences)
        src = torch.randint(4, 50, (sentences, width), generator=gen)
        src[:, -1] = 3
        settings = dict(beam=4, alpha=0.6, max_len_a=1.0, max_len_b=20, nbest=2)
        on_cpu = beam_search_nbest(model, src, **settings)
        on_gpu = beam_search_nbest(compiled, src.to(CUDA), **settings)
        assert [[h.tokens for h in hs] for hs in on_gpu] == [
            [h.tokens for h in hs] for hs in on_cpu
        ]
        if graphs is None:
            graphs = counters["stats"]["unique_graphs"]
    assert counters["stats"]["unique_graphs"] == graphs
