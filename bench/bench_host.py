"""Host overhead of a training step and a decoding step: what a GPU would wait for, counted on a CPU.

A GPU runs what the host queues. The host stalls the queue when it reads a value
back (a synchronization), spends microseconds on every operator it dispatches, and
leaves the GPU idle while it prepares the next batch. None of that needs a GPU to
count, so this benchmark counts it on the CPU, with the real code paths:

- **training**: ``Trainer.train_step`` of the base and big shapes at 25,000 target
  tokens per step in 2 micro-batches of 12,500 (the GPU's split), bf16 autocast,
  on the real token-bucket batches of a synthetic corpus with newstest-like lengths
  (log-normal around 22 pieces, 3..80). The loss is chunked as on CUDA.
- **decoding**: beam 4, alpha 0.6, base shape, a bf16 copy of the model (as
  ``translate`` runs it), 32 sources whose outputs end at different steps (each at
  its source's length), so that hypotheses finish and sentences leave the batch.

Per training step and per decoding step it reports:

- ``host_reads``: reads of a tensor's value by the host. On a GPU each one waits for
  all queued work. Counted as the operators that must read values
  (``_local_scalar_dense``, i.e. ``.item()``/``bool()``/``float()``; ``nonzero``;
  boolean-mask ``index``; ``masked_select``; ``equal``; ``unique``) plus explicit
  copies out (``.tolist()``, ``.cpu()``, ``.numpy()``), each with
  its call site. On a CPU every tensor is a host tensor, so a read of a tensor
  that a GPU run would also keep on the host is counted too: the call sites tell
  them apart (``host_reads_by_site``).
- ``dispatcher_calls``: operators dispatched (forward, backward, optimizer), each a
  kernel launch or more on a GPU; ``autocast_casts``: casts to bf16 among them, and
  ``weight_casts``: those of a parameter.
- ``logit_passes``: operators that read or write a whole (rows, vocabulary) logits
  tensor, by name (the matrix products that make and use it among them).
- ``batch_wait_ms``: milliseconds per step the loop waits for its next batch.

And over a long run, without the model:

- ``training_shapes``: the distinct (batch, source width, target width) of 1,000
  steps of batches of a WMT-sized corpus (4.5M pairs), and of the first 100 and 500:
  a set whose size stops growing is a set of fixed shapes. The attention shapes of
  the timed steps are checked against these widths.
- ``decoding_shapes``: the distinct attention input shapes of a whole
  newstest2014-sized decode (3,003 sources of the newstest lengths), small model.

Run from the repository root (``bench`` is a package):

    python -m bench.bench_host            # in full: several minutes on a 2-core CPU
    python -m bench.bench_host --quick    # narrow layers, short steps: seconds (the test suite runs it)

Writes bench/results/HARDWARE/host_reads_per_step.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from bench.lib.decode_runners import FORCED, decoding_sources
from bench.lib.hardware import result_path, write_result
from bench.lib.host_reads import counting, per
from bench.lib.shapes import SHAPES, SMALL
from bench.lib.train_runners import synthetic_corpus
from transformer_core import device as device_module
from transformer_core.data.batching import TokenBucketSampler
from transformer_core.decoding.inference import DecodingRuntime, inference_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.decoding.translate import translate_ids
from transformer_core.model.config import ModelConfig, model_config
from transformer_core.model.transformer import Transformer
from transformer_core.settings import TrainSettings
from transformer_core.training import loss as loss_module
from transformer_core.training.distributed import DistContext

MATMULS = {"mm", "addmm", "addmm_", "bmm", "linear", "matmul"}
INDEXING = {"gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_select"}
VIEWS = {"t", "view", "slice", "narrow", "transpose", "expand", "detach", "alias", "as_strided"}
ALLOCATIONS = {"new_full", "new_empty", "empty_like", "empty"}


def logit_passes(ops: Counter, steps: int) -> dict:
    """Operators on the logits per loss chunk, by kind: matrix products (making or using them),
    indexing (one entry per row), and elementwise passes (reading or writing all of them)."""
    chunks = ops["log_softmax"] or ops["_log_softmax"] or 1
    kinds = {"matmul": MATMULS, "indexing": INDEXING}
    passes = {k: sum(ops[o] for o in names) / chunks for k, names in kinds.items()}
    passes["elementwise"] = (
        sum(n for o, n in ops.items() if o not in MATMULS | INDEXING | VIEWS | ALLOCATIONS) / chunks
    )
    return {
        "chunks_per_step": chunks / steps,
        "per_chunk": {k: round(v, 2) for k, v in passes.items()},
        "elementwise_ops": sorted(
            o for o in ops if o not in MATMULS | INDEXING | VIEWS | ALLOCATIONS
        ),
    }


# -- training ------------------------------------------------------------------------------------

TOKENS_PER_STEP, MAX_TOKENS = 25_000, 12_500  # the GPU bench's step: 2 micro-batches
QUICK_TRAIN = {
    "d_model": 64,
    "d_ff": 128,
    "h": 4,
    "d_k": 16,
    "d_v": 16,
}  # layers and vocabulary kept


def trainer_for(
    shape: str, workdir: Path, quick: bool, tokens: int, max_tokens: int
) -> tuple[object, ModelConfig]:
    from transformer_core.training.step import Trainer

    cfg = model_config("base", **{**SHAPES[shape], **(QUICK_TRAIN if quick else {})})
    dataset = synthetic_corpus(workdir / shape, cfg.vocab_size, sentences=4000 if quick else 30000)
    train_cfg = TrainSettings(max_tokens=max_tokens, tokens_per_step=tokens, warmup=4000)
    ctx = DistContext(0, 0, 1, torch.device("cpu"), owns_group=False)
    trainer = Trainer.fresh(cfg, train_cfg, ctx, dataset)
    trainer.autocast = torch.bfloat16  # the GPU's precision (emulated where this CPU lacks bf16)
    return trainer, cfg


class TimedBatches:
    """Wraps ``trainer.stream.next``: the time the training loop spends getting batches."""

    def __init__(self, stream):
        self.stream, self.next_batch, self.seconds = stream, stream.next, 0.0
        self.shapes: set[tuple[int, int, int]] = set()  # (batch, source width, target width)
        stream.next = self

    def __call__(self):
        start = time.perf_counter()
        batch = self.next_batch()
        self.seconds += time.perf_counter() - start
        self.shapes.add((batch.src.size(0), batch.src.size(1), batch.tgt_in.size(1)))
        return batch


def attention_matches_batches(attention: list[tuple], batches: set[tuple[int, int, int]]) -> bool:
    """Every attention call's query/key lengths are a batch's source or target width."""
    widths = {(b, length) for b, s, t in batches for length in (s, t)}
    return all((q[0], q[2]) in widths and (k[0], k[2]) in widths for q, k in attention)


def bench_training(shape: str, workdir: Path, quick: bool, steps: int) -> dict:
    tokens, max_tokens = (2500, 1250) if quick else (TOKENS_PER_STEP, MAX_TOKENS)
    trainer, cfg = trainer_for(shape, workdir, quick, tokens, max_tokens)
    weights = {p.data_ptr() for p in trainer.model.parameters()}
    chunks = loss_module.CHUNK_ELEMENTS
    saved, chunks["cpu"] = chunks["cpu"], chunks["cuda"]  # chunk the loss as on a GPU
    try:
        trainer.train_step()  # warm-up: allocations, first-call paths
        timer = TimedBatches(trainer.stream)
        start = time.perf_counter()
        with counting(weights, cfg.vocab_size, max_tokens // 8) as mode:
            for _ in range(steps):
                trainer.train_step()
        seconds = time.perf_counter() - start
    finally:
        chunks["cpu"] = saved
    interval = getattr(trainer, "interval_sums", None)  # the log interval's one read
    with counting(weights, cfg.vocab_size, max_tokens // 8) as log_mode:
        if interval is not None:
            interval()
    if hasattr(trainer, "close"):  # the batch prefetch thread (233b447's trainer has none)
        trainer.close()
    return {
        "shape": shape,
        "widths": {k: getattr(cfg, k) for k in ("d_model", "d_ff", "h", "vocab_size")},
        "layers": [cfg.encoder_layers, cfg.decoder_layers],
        "target_tokens_per_step": tokens,
        "micro_batches": trainer.accumulation,
        "steps": steps,
        "seconds_per_step": round(seconds / steps, 3),
        "host_reads": round(sum(mode.reads.values()) / steps, 2),
        "host_reads_by_site": per(mode.reads, steps),
        "host_reads_per_log_interval": sum(log_mode.reads.values()) if interval else None,
        "dispatcher_calls": round(mode.calls / steps, 1),
        "autocast_casts": round(mode.casts / steps, 1),
        "weight_casts": round(mode.weight_casts / steps, 1),
        "parameter_tensors": len(weights),
        "logits": logit_passes(mode.logit_ops, steps),
        "batch_wait_ms": round(1000 * timer.seconds / steps, 2),
        "distinct_batch_shapes": len(timer.shapes),
        "distinct_attention_shapes": len(set(mode.attention_shapes)),
        "attention_shapes_are_batch_widths": attention_matches_batches(
            mode.attention_shapes, timer.shapes
        ),
    }


def training_shapes(quick: bool) -> dict:
    """Distinct micro-batch shapes over 1,000 steps of a WMT-sized corpus of newstest-like lengths."""
    from transformer_core.data import batching

    rng = np.random.default_rng(0)
    n = 300_000 if quick else 4_500_000
    src = np.clip(np.round(rng.lognormal(np.log(22), 0.5, n)), 3, 80).astype(np.int64)
    tgt = np.clip(np.round(src * rng.normal(1.05, 0.1, n)), 3, 80).astype(np.int64)
    sampler = TokenBucketSampler(src, tgt, MAX_TOKENS, seed=1)
    # The widths a GPU run pads to (no GPU needed to compute them); none before padding existed.
    width = getattr(batching, "padded_width", lambda length, multiple: length)
    multiple = getattr(device_module, "length_multiple", lambda device: 1)(torch.device("cuda"))
    seen: set[tuple[int, int, int]] = set()
    counts = {}
    step, epoch = 0, 0
    micro = TOKENS_PER_STEP // MAX_TOKENS
    while step < 1000:
        for batch in sampler.batches(epoch):
            idx = np.asarray(batch)
            seen.add(
                (
                    len(idx),
                    width(int(src[idx].max()) + 1, multiple),
                    width(int(tgt[idx].max()) + 1, multiple),
                )
            )
            step += 1 / micro
            if math.isclose(step, round(step)) and round(step) in (100, 500, 1000):
                counts[round(step)] = len(seen)
            if step >= 1000:
                break
        epoch += 1
    return {
        "corpus_pairs": n,
        "width_multiple": multiple,
        "max_tokens": MAX_TOKENS,
        "distinct_batch_shapes_after_steps": counts,
        "distinct_source_widths": len({s for _, s, _ in seen}),
        "distinct_target_widths": len({t for _, _, t in seen}),
    }


# -- decoding ------------------------------------------------------------------------------------

QUICK_DECODE = {"d_model": 64, "d_ff": 128, "h": 4, "d_k": 16, "d_v": 16}


def bench_decoding(quick: bool) -> dict:
    torch.manual_seed(0)
    cfg = ModelConfig(dropout=0.0, vocab_size=37000, **(QUICK_DECODE if quick else {}))
    model = inference_model(Transformer(cfg).eval(), torch.bfloat16)
    sources = decoding_sources(cfg.vocab_size, 32, seed=3)
    width = max(len(s) for s in sources) + 1
    src = torch.full((len(sources), width), cfg.pad_id, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids)
        src[row, len(ids)] = cfg.eos_id
    steps = 0
    decode_step = model.decode_step

    def counted_step(*args, **kwargs):
        nonlocal steps
        steps += 1
        return decode_step(*args, **kwargs)

    def search():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return beam_search_nbest(model, src, FORCED)

    search()  # warm-up
    model.decode_step = counted_step
    weights = {p.data_ptr() for p in model.parameters()}
    start = time.perf_counter()
    with counting(weights, cfg.vocab_size, 4) as mode:
        hyps = search()
    seconds = time.perf_counter() - start
    assert [len(h[0].tokens) for h in hyps] == [len(s) for s in sources]
    return {
        "widths": {k: getattr(cfg, k) for k in ("d_model", "d_ff", "h", "vocab_size")},
        "sentences": len(sources),
        "beam": 4,
        "steps": steps,
        "target_tokens": sum(len(s) for s in sources),
        "seconds": round(seconds, 3),
        "host_reads": round(sum(mode.reads.values()) / steps, 2),
        "host_reads_by_site": per(mode.reads, steps),
        "dispatcher_calls": round(mode.calls / steps, 1),
        "autocast_casts": round(mode.casts / steps, 2),
        "distinct_attention_shapes": len(set(mode.attention_shapes)),
    }


def decoding_shapes(quick: bool, max_tokens: int) -> dict:
    """Distinct attention (query, key) shapes of a whole newstest2014-sized decode."""
    torch.manual_seed(0)
    cfg = ModelConfig(dropout=0.0, vocab_size=8000, **SMALL)
    model = Transformer(cfg).eval()
    sources = decoding_sources(cfg.vocab_size, 300 if quick else 3003, seed=4)
    with counting(set(), cfg.vocab_size, 1 << 30) as mode:
        outputs = translate_ids(model, sources, FORCED, DecodingRuntime(max_tokens))
    assert [len(o) for o in outputs] == [len(s) for s in sources]
    shapes = set(mode.attention_shapes)
    return {
        "sentences": len(sources),
        "max_tokens": max_tokens,
        "attention_calls": len(mode.attention_shapes),
        "distinct_attention_shapes": len(shapes),
        "distinct_key_lengths": len({k[2] for _, k in shapes}),
        "distinct_row_counts": len({q[0] for q, _ in shapes}),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="narrow layers and short steps")
    parser.add_argument("--shapes", nargs="+", default=["base", "big"], choices=["base", "big"])
    parser.add_argument("--steps", type=int, default=2, help="timed training steps per shape")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument(
        "--decode-max-tokens",
        type=int,
        default=8192,
        help="source tokens per batch of the newstest-sized decode (default: 8192, the GPU bench's)",
    )
    parser.add_argument("--out", default=str(result_path("host_reads_per_step")))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    result = {
        "bench": "host",
        "quick": args.quick,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
        "training": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            result["training"][shape] = row = bench_training(
                shape, Path(tmp), args.quick, args.steps
            )
            print(f"train {shape}: {json.dumps(row)}", file=sys.stderr, flush=True)
    result["training_shapes"] = training_shapes(args.quick)
    print(f"training shapes: {json.dumps(result['training_shapes'])}", file=sys.stderr, flush=True)
    result["decoding"] = bench_decoding(args.quick)
    print(f"decode: {json.dumps(result['decoding'])}", file=sys.stderr, flush=True)
    result["decoding_shapes"] = decoding_shapes(args.quick, args.decode_max_tokens)
    print(f"decoding shapes: {json.dumps(result['decoding_shapes'])}", file=sys.stderr, flush=True)
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
