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

GPU section (only when CUDA is available): the base model decoding a
newstest2014-sized input (3003 sentences) through ``translate_ids`` (token
batches, sorted by length) in bf16 autocast, each output forced to its
source's length. Source lengths are the newstest2014 English word counts times
1.3 (about the pieces per word of a 37k BPE vocabulary) when the shared data is
there ($TRANSFORMER_CORE_SHARED_DATA, default ../shared/data), else random
lengths of about the same range.

Run from the repository root (``bench`` is a package):

    python -m bench.bench_decode                 # full measurement, about 1 minute on 2 CPU threads
    python -m bench.bench_decode --quick         # one run per side, a smoke check
Writes bench/results/decode.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

import torch

from bench.probe import add_precision_arguments, chosen_precisions, peak_rss_mib
from bench.shared_data import SHARED_DATA
from transformer_core.config import DecodeOptions, ModelConfig
from transformer_core.device import cpu_has_native_bf16, inference_model
from transformer_core.model import Transformer
from transformer_core.search import beam_search_nbest
from transformer_core.translate import translate_ids

ROOT = Path(__file__).resolve().parents[1]

SHAPES = {
    "tiny": dict(
        vocab_size=8000,
        encoder_layers=2,
        decoder_layers=2,
        d_model=128,
        d_ff=512,
        h=4,
        d_k=32,
        d_v=32,
    ),
    "base": dict(vocab_size=37000),
}
BATCH, SRC_LEN, OUT_LEN, BEAM = 32, 30, 30, 4
NEWSTEST2014 = SHARED_DATA / "wmt" / "newstest2014-deen-full.en"


def our_model(shape: str) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(dropout=0.0, **SHAPES[shape])).eval()


def marian_model(shape: str):
    from transformers import MarianConfig, MarianMTModel

    cfg = ModelConfig(**SHAPES[shape])
    config = MarianConfig(
        vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.h,
        decoder_attention_heads=cfg.h,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function="relu",
        scale_embedding=True,
        max_position_embeddings=cfg.max_positions,
        dropout=0.0,
        pad_token_id=cfg.pad_id,
        eos_token_id=cfg.eos_id,
        bos_token_id=cfg.bos_id,
        decoder_start_token_id=cfg.bos_id,
        forced_eos_token_id=None,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    return MarianMTModel(config).eval()


def sources(vocab_size: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, vocab_size, (BATCH, SRC_LEN), generator=gen)
    src[:, -1] = 3  # EOS
    return src


def best_times(fns: dict, repeats: int) -> dict[str, float]:
    """Best wall time of each function after one warm-up; runs interleaved, so a burst of
    load from other jobs hits both sides alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def trainable(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_ours_fn(ours: Transformer, src: torch.Tensor, precision: str):
    """Our beam search as ``translate`` runs it: in bf16, a bf16 copy of the model under autocast."""
    model = inference_model(ours, torch.bfloat16 if precision == "bf16" else None)

    def run_ours():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            hyps = beam_search_nbest(
                model,
                src,
                beam_size=BEAM,
                alpha=0.6,
                max_len_a=0.0,
                max_len_b=OUT_LEN,
                min_len=OUT_LEN,
            )
        assert all(len(h[0].tokens) == OUT_LEN for h in hyps)

    return run_ours


def bench_cpu_shape(shape: str, repeats: int, precision: str) -> dict:
    tokens = BATCH * OUT_LEN
    src = sources(SHAPES[shape]["vocab_size"])
    ours = our_model(shape)
    run_ours = run_ours_fn(ours, src, precision)
    peer = marian_model(shape)
    mask = torch.ones_like(src)

    def run_peer():
        with (
            torch.inference_mode(),
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"),
        ):
            out = peer.generate(
                input_ids=src,
                attention_mask=mask,
                num_beams=BEAM,
                do_sample=False,
                min_new_tokens=OUT_LEN,
                max_new_tokens=OUT_LEN,
                length_penalty=0.6,
                early_stopping=False,
            )
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


def newstest_lengths(n: int = 3003) -> tuple[list[int], str]:
    if NEWSTEST2014.is_file():
        lines = NEWSTEST2014.read_text(encoding="utf-8").split("\n")[:n]
        return [max(1, math.ceil(1.3 * len(line.split()))) for line in lines], str(NEWSTEST2014)
    rng = random.Random(0)
    return [rng.randint(3, 80) for _ in range(n)], "random lengths 3..80 (shared data absent)"


def bench_file_decoding(
    max_tokens: int,
    n: int,
    device: str = "cuda",
    shape: str = "base",
    autocast: torch.dtype | None = torch.bfloat16,
) -> dict:
    """Decode n newstest2014-length sources through translate_ids; outputs as long as sources."""
    model = our_model(shape).to(device)
    lengths, origin = newstest_lengths(n)
    gen = torch.Generator().manual_seed(2)
    srcs = [torch.randint(4, model.cfg.vocab_size, (k,), generator=gen).tolist() for k in lengths]
    # Outputs as long as their sources: max length = 1 * (pieces + EOS) - 1, EOS suppressed.
    options = DecodeOptions(beam_size=BEAM, alpha=0.6, max_len_a=1.0, max_len_b=-1, min_len=10**6)
    translate_ids(model, srcs[:64], options, max_tokens, autocast=autocast)  # warm-up
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    outs = translate_ids(model, srcs, options, max_tokens, autocast=autocast)
    sync()
    seconds = time.perf_counter() - start
    tokens = sum(len(o) for o in outs)
    assert tokens == sum(lengths), "every output as long as its source"
    return {
        "shape": shape,
        "sentences": len(srcs),
        "source_lengths": origin,
        "target_tokens": tokens,
        "max_tokens": max_tokens,
        "beam": BEAM,
        "precision": str(autocast or torch.float32),
        "seconds": seconds,
        "target_tokens_per_s": tokens / seconds,
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
    }


def peak_rss_of_decoding(shape: str, precision: str, threads: int) -> float:
    """Peak RSS (MiB) of a fresh process that builds our model for ``shape`` and decodes the batch once."""
    return peak_rss_mib(
        "import torch; from bench import bench_decode as b; "
        f"torch.set_num_threads({threads}); m = b.our_model({shape!r}); "
        f"b.run_ours_fn(m, b.sources(b.SHAPES[{shape!r}]['vocab_size']), {precision!r})()"
    )


def main(argv: list[str] | None = None) -> int:
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
        default=8192,
        help="source tokens per batch in the GPU section (default: 8192)",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "decode.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    repeats = 1 if args.quick else 3
    precisions = chosen_precisions(args)
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
    try:
        import transformers

        result["transformers"] = transformers.__version__
    except ImportError:
        print("bench_decode: pip install transformers (the peer) first", file=sys.stderr)
        return 2
    for shape in args.shapes.split(","):
        for precision in precisions:
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
    if torch.cuda.is_available():
        result["gpu"] = bench_file_decoding(args.gpu_max_tokens, 300 if args.quick else 3003)
        print(f"gpu base bf16: {result['gpu']['target_tokens_per_s']:.0f} tok/s", flush=True)
    result["load_average_after"] = os.getloadavg()  # other jobs on the CPU distort the numbers
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
