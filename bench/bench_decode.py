"""Beam-4 decoding speed: our beam search against Hugging Face MarianMTModel.generate.

CPU section: the same shapes (tiny: 2+2 layers, d_model 128, d_ff 512, 4 heads,
vocabulary 8000; base: the paper's base model, vocabulary 37000), the same
random-weight model shape on both sides (post-norm, sinusoidal positions, tied
embeddings, ReLU), the same sources (batch 32, 30 source tokens), and outputs
forced to the same length: 30 generated tokens per sentence (EOS suppressed:
``min_len`` in ours, ``min_new_tokens`` in Marian). Speed is target tokens
(sentences x 30) per second, best of 3 runs (1 with ``--quick``) after one
warm-up, the two sides' runs interleaved. Each shape runs in every precision of
``--precisions`` (fp32, and bf16 where this CPU computes it natively): ours and
Marian under the same ``torch.autocast``. ``--memory`` adds the peak RSS of our
decoding in each shape and precision, each measured in a fresh process.

GPU section (only when CUDA is available; ``--gpu-only`` skips the CPU one): the
base model (vocabulary 37000, random weights) decoding the 3,003 real English
sources of newstest2014, cut into pieces by a BPE 8000 model trained on the fly
on newstest2014 ($TRANSFORMER_CORE_SHARED_DATA, default ../shared/data; random
lengths of about the same range when it is absent), through ``translate_ids``
(token batches, sorted by length), each output forced to its source's length,
in every combination of ``--gpu-precisions``, ``--gpu-compile``,
``--gpu-max-tokens`` and ``--gpu-cudnn``.

Run from the repository root (``bench`` is a package):

    python -m bench.bench_decode                 # full measurement, about 1 minute on 2 CPU threads
    python -m bench.bench_decode --quick         # one run per side, a smoke check
Writes bench/results/HARDWARE/decode_beside_marian.json (or --out).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import torch

from bench.lib.decode_runners import (
    best_times,
    file_decoding,
    gpu_sources,
    our_model,
    run_ours_fn,
    sources,
    trainable,
)
from bench.lib.hardware import result_path, write_result
from bench.lib.marian import marian_beam_search, marian_model
from bench.lib.probe import add_precision_arguments, chosen_precisions, peak_rss_mib
from bench.lib.shapes import BATCH, BEAM, OUT_LEN, SHAPES, SRC_LEN
from transformer_core.device import cpu_has_native_bf16


def bench_cpu_shape(shape: str, repeats: int, precision: str) -> dict:
    tokens = BATCH * OUT_LEN
    src = sources(SHAPES[shape]["vocab_size"])
    ours = our_model(shape)
    run_ours = run_ours_fn(ours, src, precision)
    peer = marian_model(shape)

    def run_peer():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = marian_beam_search(peer, src, OUT_LEN)
        assert out.shape[1] == OUT_LEN + 1  # decoder start token + 30

    best = best_times({"ours": run_ours, "marian": run_peer}, repeats)
    ours_s, peer_s = best["ours"], best["marian"]
    return {
        "shape": shape,
        "precision": precision,
        **SHAPES[shape],
        "batch": BATCH,
        "source_tokens": SRC_LEN,
        "output_tokens": OUT_LEN,
        "beam": BEAM,
        "ours_parameters": trainable(ours),
        "marian_parameters": trainable(peer),
        "ours_seconds": ours_s,
        "marian_seconds": peer_s,
        "ours_target_tokens_per_s": tokens / ours_s,
        "marian_target_tokens_per_s": tokens / peer_s,
        "speedup": peer_s / ours_s,
    }


def gpu_variants(args: argparse.Namespace, out: Path, result: dict) -> None:
    """The GPU section: every combination of the ``--gpu-*`` lists, written as it goes."""
    import itertools

    from transformer_core.device import choose_attention_backends

    cuda = torch.device("cuda")
    sources, origin = gpu_sources(300 if args.quick else args.gpu_sentences)
    result["gpu"] = []
    for precision, compile, max_tokens, cudnn in itertools.product(
        args.gpu_precisions, args.gpu_compile, args.gpu_max_tokens, args.gpu_cudnn
    ):
        choose_attention_backends(cuda, cudnn=cudnn == "on")
        try:
            row = file_decoding(
                sources,
                origin,
                max_tokens,
                autocast=torch.bfloat16 if precision == "bf16" else None,
                compile=compile == "on",
            )
        finally:
            choose_attention_backends(cuda)
        result["gpu"].append(row)
        print(
            f"gpu base {precision} compile {compile} max_tokens {max_tokens} cudnn {cudnn}: "
            f"{row['target_tokens_per_s']:.0f} tok/s ({row['seconds']:.2f} s)",
            flush=True,
        )
        write_result(out, result, indent=2, quiet=True)


def peak_rss_of_decoding(shape: str, precision: str, threads: int) -> float:
    """Peak RSS (MiB) of a fresh process that builds our model for ``shape`` and decodes the batch once."""
    return peak_rss_mib(
        "import torch; from bench.lib import decode_runners as d; "
        "from bench.lib.shapes import SHAPES; "
        f"torch.set_num_threads({threads}); m = d.our_model({shape!r}); "
        f"d.run_ours_fn(m, d.sources(SHAPES[{shape!r}]['vocab_size']), {precision!r})()"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="one timed run per side: a smoke check"
    )
    parser.add_argument("--shapes", default="tiny,base", help="comma-separated, of: tiny, base")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    add_precision_arguments(parser, "our decoding")
    parser.add_argument(
        "--gpu-max-tokens",
        type=int,
        nargs="+",
        default=[8192],
        help="source tokens per batch in the GPU section (default: 8192)",
    )
    parser.add_argument("--gpu-precisions", nargs="+", default=["bf16"], choices=["bf16", "fp32"])
    parser.add_argument("--gpu-compile", nargs="+", default=["off"], choices=["off", "on"])
    parser.add_argument(
        "--gpu-cudnn",
        nargs="+",
        default=["off"],
        choices=["off", "on"],
        help="cuDNN's attention left out (off, the default) or allowed",
    )
    parser.add_argument(
        "--gpu-sentences",
        type=int,
        default=3003,
        help="newstest2014 sources to decode (default: all)",
    )
    parser.add_argument("--gpu-only", action="store_true", help="skip the CPU section")
    parser.add_argument(
        "--out", default=None, help="default: bench/results/HARDWARE/decode_beside_marian.json"
    )
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU part runs where there is one
    args.out = args.out or result_path("decode_beside_marian", device)
    return args


def cpu_section(args: argparse.Namespace, result: dict) -> None:
    """Every shape of ``--shapes`` in every precision, beside Marian (and, with ``--memory``,
    the peak RSS of our decoding)."""
    repeats = 1 if args.quick else 3
    for shape in args.shapes.split(","):
        for precision in chosen_precisions(args):
            row = bench_cpu_shape(shape, repeats, precision)
            if args.memory:
                row["ours_peak_rss_mib"] = round(
                    peak_rss_of_decoding(shape, precision, args.threads), 1
                )
            result["cpu"].append(row)
            print(
                f"cpu {shape} {precision}: ours {row['ours_target_tokens_per_s']:.0f} tok/s, marian "
                f"{row['marian_target_tokens_per_s']:.0f} tok/s, x{row['speedup']:.2f}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    result = {
        "benchmark": "beam-4 decoding, target tokens per second",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": args.threads,
        "quick": args.quick,
        "cpu_native_bf16": cpu_has_native_bf16(),
        "load_average_before": os.getloadavg(),
        "cpu": [],
    }
    if args.gpu_only:
        gpu_variants(args, args.out, result)
        return 0
    try:
        import transformers

        result["transformers"] = transformers.__version__
    except ImportError:
        print("bench_decode: pip install transformers (the peer) first", file=sys.stderr)
        return 2
    cpu_section(args, result)
    if torch.cuda.is_available():
        gpu_variants(args, args.out, result)
    result["load_average_after"] = os.getloadavg()  # other jobs on the CPU distort the numbers
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
