"""Training speed: our trainer against a Hugging Face MarianMTModel of the same shape, on the same batches.

CPU (always, ``torch.set_num_threads(2)`` by default): target tokens per second
of full optimizer steps (forward, label-smoothed loss, backward, Adam) for the
tiny shape (2+2 layers, d_model 128, d_ff 512, 4 heads, vocabulary 8000), the
Multi30k shape (config/multi30k.yaml: 3+3 layers, d_model 256, d_ff 1024, 8
heads, vocabulary 8000) and the paper's base shape (vocabulary 37000), ~4000
target tokens per step, in each precision of ``--precisions`` (fp32, and bf16
autocast where this CPU computes bf16 natively): ours with ``--precision``,
the peer under the same ``torch.autocast``; ``--compute-weights fp32 bf16`` adds a row of
ours with a bf16 copy of the weights (``train.compute_weights``, the peer still under
autocast). ``--memory`` adds the peak RSS of
our training in each shape and precision, each measured in a fresh process. The peer
is ``transformers.MarianMTModel`` configured to the same model: post-norm,
sinusoidal positions, one embedding shared by encoder, decoder and output,
ReLU, dropout 0.1, the same label-smoothed loss and the same Adam. Both train
on the identical token-bucket batches of a synthetic corpus (random ids,
lengths drawn around 22 tokens, like WMT sentences in word pieces). The
measurement alternates rounds of ours and the peer's steps so that a shared,
noisy CPU slows both alike, and reports the median over rounds.

GPU (when CUDA exists): our trainer's target tokens per second for base and
big in bf16 autocast at 25,000 target tokens per step (2 micro-batches of
12,500), 50 timed steps after 10 of warm-up, eager and compiled
(``--gpu-compile off on``), with bf16 autocast or a bf16 copy of the weights
(``--gpu-compute-weights fp32 bf16``), and MFU = analytic training FLOPs per second
(``transformer_core.training.flops``) / the device's dense bf16 peak; then 5 steps under
torch.profiler: the share of the time the GPU sat idle, its time per step by kind of work
(matrix products, attention, inductor's fused kernels, softmax, copies, the optimizer, the
rest), the MFU the step would reach if only its products and attention took time, and the top
10 kernels; and as many steps again with Python's calls traced: the host's time per step by
operator and by Python function (where a step goes that leaves the GPU idle). Then, where
asked (``--gpu-peer eager compiled``), the peer on the same batches, eager and
``torch.compile``: each of our rows records its speed over the faster. ``--gpu-deadline``
starts no variant past its time, so a bench inside a lent GPU's minutes ends with what it
measured. ``--gpu-only`` skips the CPU section.

Run from the repository root (``bench`` is a package):

    python -m bench.bench_train                 # the real measurement (minutes on a 2-core CPU)
    python -m bench.bench_train --quick         # a short check that everything runs

Writes bench/results/HARDWARE/train_speed.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.lib.hardware import result_path, write_result
from bench.lib.probe import add_precision_arguments, chosen_precisions, peak_rss_mib
from bench.lib.shapes import SHAPES, TOKENS_PER_STEP
from bench.lib.train_gpu import GpuRun, GpuVariant, gpu_peers, gpu_throughput
from bench.lib.train_runners import Ours, Peer, Steps, synthetic_corpus, timed, train_settings
from transformer_core.data.batching import TokenBucketSampler, collate
from transformer_core.device import cpu_has_native_bf16
from transformer_core.model.config import model_config
from transformer_core.settings import COMPUTE_WEIGHTS

PLAN = {"tiny": (5, 4, 3), "multi30k": (3, 3, 2), "base": (3, 2, 1)}  # rounds, steps, warm-up
QUICK = (1, 1, 1)


def cpu_comparison(
    shape: str,
    precision: str,
    workdir: Path,
    rounds: int,
    steps: int,
    warmup: int,
    compute_weights: str = "fp32",
) -> dict:
    cfg = model_config("base", **SHAPES[shape])
    device = torch.device("cpu")
    dataset = synthetic_corpus(workdir / shape, cfg.vocab_size, sentences=6000)
    ours = Ours(cfg, dataset, device, train_settings(
        precision, TOKENS_PER_STEP, TOKENS_PER_STEP, compute_weights=compute_weights
    ))  # fmt: skip
    # The peer gets exactly the batches our trainer will see, collated once up front.
    sampler = TokenBucketSampler(
        dataset.src_lens, dataset.tgt_lens, TOKENS_PER_STEP, seed=ours.trainer.cfg.seed
    )
    peer_batches = [[collate(dataset, b)] for b in sampler.batches(0)]
    peer = Peer(cfg, peer_batches, device, autocast=precision == "bf16")
    rates = {"ours": [], "peer": []}
    try:
        for runner in (ours, peer):
            timed(runner, warmup, device)
        for _ in range(rounds):
            for name, runner in (("ours", ours), ("peer", peer)):
                tokens, seconds = timed(runner, steps, device)
                rates[name].append(tokens / seconds)
    finally:
        ours.trainer.close()  # its batch prefetch thread: a live one aborts the interpreter's exit
    ours_rate, peer_rate = statistics.median(rates["ours"]), statistics.median(rates["peer"])
    return {
        "shape": SHAPES[shape],
        "precision": precision,
        "compute_weights": compute_weights,
        "params_ours": ours.params,
        "params_peer": peer.params,
        "target_tokens_per_step": TOKENS_PER_STEP,
        "rounds": rounds,
        "steps_per_round": steps,
        "ours_tgt_tokens_per_s": round(ours_rate, 1),
        "peer_tgt_tokens_per_s": round(peer_rate, 1),
        "speedup": round(ours_rate / peer_rate, 3),
        "rounds_ours": [round(r, 1) for r in rates["ours"]],
        "rounds_peer": [round(r, 1) for r in rates["peer"]],
    }


def peak_rss_of_training(shape: str, precision: str, steps: int, threads: int) -> float:
    """Peak RSS (MiB) of a fresh process that builds our trainer for ``shape`` and runs ``steps`` steps."""
    return peak_rss_mib(
        "import tempfile, torch; from pathlib import Path; "
        "from bench.lib.shapes import SHAPES, TOKENS_PER_STEP as T; "
        "from bench.lib.train_runners import Ours, synthetic_corpus, train_settings; "
        "from transformer_core.model.config import model_config; "
        f"torch.set_num_threads({threads}); "
        f"cfg = model_config('base', **SHAPES[{shape!r}]); tmp = tempfile.mkdtemp(); "
        f"ds = synthetic_corpus(Path(tmp) / 'c', cfg.vocab_size, sentences=2000); "
        f"ours = Ours(cfg, ds, torch.device('cpu'), train_settings({precision!r}, T, T)); "
        f"[ours.step() for _ in range({steps})]"
    )


def past_deadline(started: float, deadline: float | None) -> bool:
    """Whether ``deadline`` seconds (None: never) have passed since ``started``."""
    return deadline is not None and time.perf_counter() - started > deadline


def add_cpu_arguments(parser: argparse.ArgumentParser) -> None:
    """The CPU section's options, with ``--quick``, ``--threads`` and the compute weights."""
    parser.add_argument(
        "--quick", action="store_true", help="a few steps only: checks that the bench runs"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument(
        "--shapes", nargs="+", default=["tiny", "multi30k", "base"], choices=list(PLAN)
    )
    add_precision_arguments(parser, "our training")
    for flag, rows in (
        ("--compute-weights", "the CPU's bf16 rows"),
        ("--gpu-compute-weights", "the GPU variants"),
    ):
        parser.add_argument(
            flag,
            nargs="+",
            default=["fp32"],
            choices=COMPUTE_WEIGHTS,
            help=f"{rows}' train.compute_weights: fp32 (bf16 autocast), bf16 (a bf16 copy of "
            "the weights; a CPU row named 'bf16 weights'), or both (default: fp32)",
        )


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    """The GPU section's options."""
    parser.add_argument(
        "--gpu-max-tokens",
        type=int,
        default=12500,
        help="tokens per micro-batch on the GPU (default: 12500, 2 micro-batches per step)",
    )
    parser.add_argument(
        "--gpu-tokens-per-step",
        type=int,
        default=25000,
        help="target tokens per step on the GPU (default: 25000; 3125: what each of 8 GPUs runs)",
    )
    parser.add_argument(
        "--gpu-only", action="store_true", help="skip the CPU section (and its peer)"
    )
    parser.add_argument(
        "--gpu-peer",
        nargs="*",
        default=[],
        choices=["eager", "compiled"],
        help="the peer's GPU variants to run, on the batches our Trainer cuts, each our row's "
        "speed given over the faster (default: none; `--gpu-peer eager compiled`: both)",
    )
    parser.add_argument(
        "--gpu-deadline", type=float, metavar="SECONDS", help="start no GPU variant or peer "
        "this many seconds after the bench started (the rest recorded as skipped; default: none)",
    )  # fmt: skip
    parser.add_argument("--gpu-shapes", nargs="+", default=["base", "big"], choices=["base", "big"])
    parser.add_argument(
        "--gpu-steps", type=int, default=50, help="timed GPU steps per variant (default: 50)"
    )
    parser.add_argument(
        "--gpu-warmup", type=int, default=10, help="GPU warm-up steps per variant (default: 10)"
    )
    parser.add_argument(
        "--gpu-compile",
        nargs="+",
        default=["off"],
        choices=["off", "on", "auto"],
        help="GPU variants: eager, compiled, what train.compile auto picks on a GPU, or several "
        "(default: off)",
    )
    parser.add_argument(
        "--gpu-batch-shapes",
        nargs="+",
        default=["auto"],
        choices=["auto", "fixed", "exact"],
        help="GPU variants' --batch-shapes (default: auto, fixed where compiled)",
    )
    parser.add_argument(
        "--gpu-cudnn-attention",
        action="store_true",
        help="also run each GPU variant with cuDNN's attention allowed (the default leaves it out)",
    )
    parser.add_argument(
        "--gpu-lengths",
        type=int,
        nargs=2,
        default=[3, 80],
        metavar=("LOW", "HIGH"),
        help="the synthetic corpus's sentence lengths, clipped to LOW..HIGH (default: 3 80; "
        "25 32: one batch width, so a compiled variant compiles one shape)",
    )
    parser.add_argument(
        "--gpu-profile-steps",
        type=int,
        default=5,
        help="steps of each GPU variant under torch.profiler after the timed ones (0: none)",
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_cpu_arguments(parser)
    add_gpu_arguments(parser)
    parser.add_argument(
        "--out", default=None, help="default: bench/results/HARDWARE/train_speed.json"
    )
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU part runs where there is one
    args.out = args.out or result_path("train_speed", device)
    return args


def cpu_section(args: argparse.Namespace, workdir: Path) -> dict:
    """Per shape of ``--shapes``, ours beside the peer in every precision (and bf16 compute
    weights where asked), with ``--memory`` our peak RSS; and bf16 over fp32 where both ran."""
    section = {}
    variants = [
        (precision, weights)
        for precision in chosen_precisions(args)
        for weights in (args.compute_weights if precision == "bf16" else ["fp32"])
    ]
    for shape in args.shapes:
        rounds, steps, warmup = QUICK if args.quick else PLAN[shape]
        rows = section[shape] = {}
        for precision, weights in variants:
            name = "bf16 weights" if weights == "bf16" else precision
            rows[name] = cpu_comparison(shape, precision, workdir, rounds, steps, warmup, weights)
            if args.memory and weights == "fp32":
                rows[name]["ours_peak_rss_mib"] = round(
                    peak_rss_of_training(shape, precision, 1 if args.quick else 2, args.threads),
                    1,
                )
            print(f"cpu {shape} {name}: {json.dumps(rows[name])}", file=sys.stderr, flush=True)
        if {"fp32", "bf16"} <= rows.keys():
            rows["ours_bf16_over_fp32"] = round(
                rows["bf16"]["ours_tgt_tokens_per_s"] / rows["fp32"]["ours_tgt_tokens_per_s"], 3
            )
    return section


def gpu_section(args: argparse.Namespace, workdir: Path, result: dict, started: float) -> None:
    """Every GPU variant of the ``--gpu-*`` lists, the result written after each; a variant
    due past ``--gpu-deadline`` recorded as skipped; then the peers where asked."""
    timed_steps, warmup = (3, 2) if args.quick else (args.gpu_steps, args.gpu_warmup)
    steps = Steps(args.gpu_max_tokens, args.gpu_tokens_per_step, timed_steps, warmup)
    run = GpuRun(steps, tuple(args.gpu_lengths), args.gpu_profile_steps)
    result["gpu"] = []
    variants = [
        GpuVariant(shape, compile, shapes, cudnn, weights)
        for shape in args.gpu_shapes
        for compile in args.gpu_compile
        for shapes in args.gpu_batch_shapes
        for cudnn in ((False, True) if args.gpu_cudnn_attention else (False,))
        for weights in args.gpu_compute_weights
    ]
    for variant in variants:
        if past_deadline(started, args.gpu_deadline):  # recorded, not measured
            result.setdefault("gpu_skipped_at_deadline", []).append(
                [variant.shape, variant.compile, variant.compute_weights]
            )
            continue
        row = gpu_throughput(variant, run, workdir)
        result["gpu"].append(row)
        print(f"gpu: {json.dumps(row)}", file=sys.stderr, flush=True)
        write_result(args.out, result, indent=2, quiet=True)
    if args.gpu_peer and not past_deadline(started, args.gpu_deadline):
        result["gpu_peer"] = gpu_peers(args.gpu_shapes, args.gpu_peer, run, workdir, result["gpu"])


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    peers = not args.gpu_only or (args.gpu_peer and torch.cuda.is_available())
    result = {
        "bench": "train",
        "quick": args.quick,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__ if peers else None,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": args.threads,
        "cpu_native_bf16": cpu_has_native_bf16(),
        "note": "CPU numbers on a shared machine are noisy; rounds alternate ours/peer to share the noise",
        "cpu": {},
        "gpu": None,
    }
    with tempfile.TemporaryDirectory() as tmp:
        if not args.gpu_only:
            result["cpu"] = cpu_section(args, Path(tmp))
        if torch.cuda.is_available():
            gpu_section(args, Path(tmp), result, started)
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
