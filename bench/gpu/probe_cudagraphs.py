"""What inductor's CUDA-graph trees do in compiled training on a GPU, under bf16 autocast (fp32
weights) and with bf16 compute weights: ten Trainer steps of each variant on a tiny model,
compiled on fixed shapes, with inductor's CUDA-graph counters, dynamo's count of compiled
graphs, and a tally of the calls the CUDA-graph trees made (their mode: warm-up, recording or
replay; the path's state before and after; whether a forward still waited for its backward;
whether a new generation could begin). Inductor's skip and recompile reasons go to stderr.

    python -m bench.gpu.probe_cudagraphs --out $OUT/cudagraphs.json 2> $OUT/cudagraphs.log

First, `pytest -m gpu`'s case of compiled training under autocast, in this process, with the
trees' calls and the counters read around it (and whether ``counters["inductor"]`` is still the
object it was before: inductor's first compile in a process, on a cold cache, replaces it).
Then the variants, in this order: autocast with 2 micro-batches a step, autocast with 1, bf16
weights with 2, autocast with 2 over sentences of 3-40 tokens (several widths, so several
graphs, as the test's corpus makes two); then autocast and bf16 weights with 2 where each
micro-batch starts a new generation (``torch.compiler.cudagraph_mark_step_begin``; last, since
marking switches the trees to explicit generations for the rest of the process).
Reading the result: many compiled graphs means dynamo recompiles per micro-batch (each call a
first call, warmed up, never recorded); few graphs but no recording, with forwards pending,
means the warm-up never ends; no tree calls at all, that the stacks ran without CUDA graphs.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

import torch

from bench.lib.hardware import write_result
from bench.lib.train_runners import synthetic_corpus
from transformer_core.model.config import model_config
from transformer_core.settings import TrainSettings
from transformer_core.training.distributed import DistContext
from transformer_core.training.step import Trainer

GPU_TEST = (
    "tests/commands/test_gpu.py::test_training_steps_on_cuda_track_the_cpu[compiled-cuda-graphs]"
)
VARIANTS = (  # name, compute weights, target tokens a step (micro-batches of 64), marked, lengths
    ("autocast, 2 micro-batches", "fp32", 128, False, (3, 14)),
    ("autocast, 1 micro-batch", "fp32", 64, False, (3, 14)),
    ("bf16 weights, 2 micro-batches", "bf16", 128, False, (3, 14)),
    ("autocast, 2 micro-batches, several widths", "fp32", 128, False, (3, 40)),
    ("autocast, 2 micro-batches, each a new generation", "fp32", 128, True, (3, 14)),
    ("bf16 weights, 2 micro-batches, each a new generation", "bf16", 128, True, (3, 14)),
)


def traced_tree_calls() -> list[tuple]:
    """Record each call of the CUDA-graph trees' manager from now on (its internals are read
    with defaults: they move between torch releases)."""
    from torch._inductor import cudagraph_trees

    calls: list[tuple] = []
    manager = cudagraph_trees.CUDAGraphTreeManager
    original = manager.run

    def run(self, inputs, function_id):
        pending = getattr(self, "running_forwards_with_pending_backwards", None)
        new_generation = getattr(self, "in_new_torch_compile_invocation", lambda: None)()
        before = getattr(getattr(self, "path_state", None), "name", None)
        out = original(self, inputs, function_id)
        mode = getattr(getattr(self, "id_to_mode", {}).get(function_id), "name", None)
        after = getattr(getattr(self, "path_state", None), "name", None)
        calls.append(
            (getattr(function_id, "id", None), mode, before, pending, new_generation, after)
        )
        return out

    manager.run = run
    return calls


def probe(corpus, weights: str, tokens_per_step: int, marked: bool, calls: list) -> dict:
    """Ten steps of one variant: its loss and what the CUDA-graph trees did."""
    from torch._dynamo.utils import counters

    cfg = model_config(
        "base", vocab_size=24, encoder_layers=1, decoder_layers=1, d_model=32, d_ff=64, h=2,
        d_k=16, d_v=16, dropout=0.0,
    )  # fmt: skip
    settings = TrainSettings(
        max_tokens=64, tokens_per_step=tokens_per_step, warmup=5, precision="bf16",
        compile="on", compute_weights=weights,
    )  # fmt: skip
    before = dict(counters["inductor"])
    graphs_before = counters["stats"]["unique_graphs"]
    calls.clear()
    trainer = Trainer.fresh(
        cfg, settings, DistContext(0, 0, 1, torch.device("cuda"), False), corpus
    )
    if marked:
        compiled = trainer.loss_model.decoder_states

        def marked_call(*args):
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*args)

        trainer.loss_model.decoder_states = marked_call
    loss, error = float("nan"), None
    try:
        tokens = sum(trainer.train_step().tgt_tokens for _ in range(10))
        loss = trainer.interval_sums()[0] / tokens
    except RuntimeError as raised:  # what the variant raised, beside what the trees did
        error = str(raised)[:600]
    finally:
        trainer.close()
    return {
        "loss_per_token": round(float(loss), 4),
        "error": error,
        "cuda_graphs": trainer.cuda_graphs,
        **tree_summary(calls, before, graphs_before),
    }


def gpu_test(calls: list) -> dict:
    """``GPU_TEST`` run in this process: its exit status, and what the trees did and the counters
    moved while it ran (read anew, and whether the object held from before is still the one
    inductor counts in)."""
    import pytest
    from torch._dynamo.utils import counters

    held, before = counters["inductor"], dict(counters["inductor"])
    graphs_before = counters["stats"]["unique_graphs"]
    calls.clear()
    status = pytest.main(["-q", "-m", "gpu", "-p", "no:cacheprovider", GPU_TEST])
    return {
        "pytest_exit": int(status),
        "counters_object_kept": counters["inductor"] is held,
        **tree_summary(calls, before, graphs_before),
    }


def tree_summary(calls: list, before: dict, graphs_before: int) -> dict:
    """Inductor's CUDA-graph counters moved since ``before``, the graphs dynamo compiled since
    ``graphs_before``, and a tally of the trees' ``calls``."""
    from torch._dynamo.utils import counters

    tally = collections.Counter(json.dumps(call[1:]) for call in calls)
    return {
        "inductor_counters": {
            key: value - before.get(key, 0)
            for key, value in counters["inductor"].items()
            if "cudagraph" in key and value != before.get(key, 0)
        },
        "compiled_graphs": counters["stats"]["unique_graphs"] - graphs_before,
        "tree_functions": len({call[0] for call in calls}),
        "tree_calls": [
            {"mode, state before, pending backward, new generation, state after": key, "calls": n}
            for key, n in tally.most_common(8)
        ],
        "first_calls": [list(call) for call in calls[:6]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="cudagraphs.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("probe_cudagraphs: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch._logging.set_logs(cudagraphs=True, recompiles=True, graph_breaks=True)
    calls = traced_tree_calls()
    with tempfile.TemporaryDirectory() as tmp:
        corpora = {
            lengths: synthetic_corpus(Path(tmp) / f"train{lengths[1]}", 24, 200, lengths=lengths)
            for lengths in {variant[-1] for variant in VARIANTS}
        }
        result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "runs": {}}
        result["gpu_test"] = gpu_test(calls)
        print(f"the GPU test: {json.dumps(result['gpu_test'])}", file=sys.stderr)
        for name, weights, tokens_per_step, marked, lengths in VARIANTS:
            result["runs"][name] = probe(corpora[lengths], weights, tokens_per_step, marked, calls)
            print(f"{name}: {json.dumps(result['runs'][name])}", file=sys.stderr, flush=True)
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
