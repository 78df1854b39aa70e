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
import json
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

import torch

from bench.hardware import result_path
from bench.probe import add_precision_arguments, chosen_precisions, peak_rss_mib
from bench.shared_data import SHARED_DATA
from transformer_core.decoding.inference import DecodingRuntime, inference_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.decoding.translate import translate_ids
from transformer_core.device import cpu_has_native_bf16
from transformer_core.export.transformers import marian_config
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer
from transformer_core.settings import DecodeSettings

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
    """HF Marian of the shape, random weights, in eval mode (generate ends at EOS, not forced)."""
    from transformers import MarianMTModel

    config = marian_config(ModelConfig(**SHAPES[shape]), dropout=0.0, forced_eos_token_id=None)
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
                beam=BEAM,
                alpha=0.6,
                max_len_a=0.0,
                max_len_b=OUT_LEN,
                min_len=OUT_LEN,
            )
        assert all(len(h[0].tokens) == OUT_LEN for h in hyps)

    return run_ours


def marian_beam_search(peer, src: torch.Tensor, length: int) -> torch.Tensor:
    """Marian's beam-4 outputs of ``src`` (decoder start token first), each ``length`` tokens
    long: EOS held off until then, as ``min_len`` holds it off in ours."""
    with torch.inference_mode():
        return peer.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            num_beams=BEAM,
            do_sample=False,
            min_new_tokens=length,
            max_new_tokens=length,
            length_penalty=0.6,
            early_stopping=False,
        )


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


def newstest_lengths(n: int = 3003) -> tuple[list[int], str]:
    """Source lengths of about newstest2014's: its English word counts x 1.3 (the pieces per
    word of a 37k BPE), or random lengths when the shared data is absent."""
    if NEWSTEST2014.is_file():
        lines = NEWSTEST2014.read_text(encoding="utf-8").split("\n")[:n]
        return [max(1, math.ceil(1.3 * len(line.split()))) for line in lines], str(NEWSTEST2014)
    rng = random.Random(0)
    return [rng.randint(3, 80) for _ in range(n)], "random lengths 3..80 (shared data absent)"


def newstest_sources(workdir: Path, vocab_size: int = 8000) -> list[list[int]]:
    """newstest2014's 3,003 English sources, cut into pieces by a BPE model trained here on
    newstest2014's English and German sides."""
    from transformer_core.data import bpe

    german = NEWSTEST2014.with_name(NEWSTEST2014.name.replace(".en", ".de"))
    bpe.train([NEWSTEST2014, german], vocab_size, workdir / "newstest_bpe", threads=4)
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(workdir / "newstest_bpe.model"))
    lines = NEWSTEST2014.read_text(encoding="utf-8").splitlines()
    return [sp.encode(line) for line in lines]


def bench_file_decoding(
    sources: list[list[int]],
    origin: str,
    max_tokens: int,
    device: str = "cuda",
    shape: str = "base",
    autocast: torch.dtype | None = torch.bfloat16,
    compile: bool = False,
) -> dict:
    """Decode ``sources`` through translate_ids, each output as long as its source (EOS blocked
    until then), after a warm-up on their first 64."""
    model = our_model(shape).to(device)
    # Outputs as long as their sources: max length = 1 * (pieces + EOS) - 1, EOS suppressed.
    options = DecodeSettings(beam=BEAM, alpha=0.6, max_len_a=1.0, max_len_b=-1, min_len=10**6)
    runtime = DecodingRuntime(max_tokens, autocast, compile)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    start = time.perf_counter()
    translate_ids(model, sources[:64], options, runtime)
    sync()
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    outs = translate_ids(model, sources, options, runtime)
    sync()
    seconds = time.perf_counter() - start
    tokens = sum(len(o) for o in outs)
    assert tokens == sum(len(s) for s in sources), "every output as long as its source"
    return {
        "shape": shape,
        "sentences": len(sources),
        "sources": origin,
        "target_tokens": tokens,
        "max_tokens": max_tokens,
        "beam": BEAM,
        "precision": "bf16" if autocast == torch.bfloat16 else "fp32",
        "compile": compile,
        "cudnn_attention": torch.backends.cuda.cudnn_sdp_enabled(),
        "warmup_seconds": round(warmup, 2),
        "seconds": round(seconds, 3),
        "target_tokens_per_s": round(tokens / seconds, 1),
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def gpu_variants(args: argparse.Namespace, out: Path, result: dict) -> None:
    """The GPU section: every combination of the ``--gpu-*`` lists, written as it goes."""
    import itertools
    import tempfile

    from transformer_core.device import choose_attention_backends

    cuda = torch.device("cuda")
    if NEWSTEST2014.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            sources = newstest_sources(Path(tmp))
        origin = f"{NEWSTEST2014}, BPE 8000 trained on newstest2014 here"
    else:
        lengths, origin = newstest_lengths(3003)
        gen = torch.Generator().manual_seed(2)
        sources = [torch.randint(4, 37000, (k,), generator=gen).tolist() for k in lengths]
    sources = sources[: 300 if args.quick else args.gpu_sentences]
    result["gpu"] = []
    for precision, compile, max_tokens, cudnn in itertools.product(
        args.gpu_precisions, args.gpu_compile, args.gpu_max_tokens, args.gpu_cudnn
    ):
        choose_attention_backends(cuda, cudnn=cudnn == "on")
        try:
            row = bench_file_decoding(
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
        out.write_text(json.dumps(result, indent=2) + "\n")


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
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.gpu_only:
        gpu_variants(args, out, result)
        return 0
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
        gpu_variants(args, out, result)
    result["load_average_after"] = os.getloadavg()  # other jobs on the CPU distort the numbers
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
