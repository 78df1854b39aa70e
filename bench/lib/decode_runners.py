"""Our beam search as the decoding benches run it: the model of a shape with random weights,
the batch of random sources every engine decodes, the best of interleaved runs, and whole
files of sources through ``translate_ids`` (newstest2014's, cut by a BPE model trained on it,
or random ones of its lengths)."""

from __future__ import annotations

import math
import platform
import random
import tempfile
import time
from pathlib import Path

import torch

from bench.lib.shapes import BATCH, BEAM, OUT_LEN, SRC_LEN, decoding_config
from bench.lib.shared_data import NEWSTEST2014
from transformer_core.decoding.inference import DecodingRuntime, inference_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.decoding.translate import translate_ids
from transformer_core.model.transformer import Transformer
from transformer_core.settings import DecodeSettings

# Each output as long as its source: max length = 1 * (pieces + EOS) - 1, EOS blocked until then.
FORCED = DecodeSettings(beam=BEAM, alpha=0.6, max_len_a=1.0, max_len_b=-1, min_len=10**6)


def our_model(shape: str) -> Transformer:
    """Our model of ``shape`` (``shapes.SHAPES``), random weights of seed 0, in eval mode."""
    torch.manual_seed(0)
    return Transformer(decoding_config(shape)).eval()


def sources(vocab_size: int) -> torch.Tensor:
    """``BATCH`` random sources of ``SRC_LEN`` tokens, the last EOS, the same every run."""
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


def newstest_lengths(n: int = 3003) -> tuple[list[int], str]:
    """Source lengths of about newstest2014's: its English word counts x 1.3 (the pieces per
    word of a 37k BPE), or random lengths when the shared data is absent."""
    if NEWSTEST2014.is_file():
        lines = NEWSTEST2014.read_text(encoding="utf-8").split("\n")[:n]
        return [max(1, math.ceil(1.3 * len(line.split()))) for line in lines], str(NEWSTEST2014)
    rng = random.Random(0)
    return [rng.randint(3, 80) for _ in range(n)], "random lengths 3..80 (shared data absent)"


def decoding_sources(vocab_size: int, n: int, seed: int) -> list[list[int]]:
    """``n`` random sources of newstest2014's lengths (``newstest_lengths``)."""
    lengths, _ = newstest_lengths(3003)
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(4, vocab_size, (k,), generator=gen).tolist() for k in lengths[:n]]


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


def gpu_sources(count: int) -> tuple[list[list[int]], str]:
    """The first ``count`` sources of the GPU decodes, and where they came from: newstest2014
    cut by its own BPE 8000 model, or, without the shared data, random pieces of about its
    lengths."""
    if NEWSTEST2014.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            found = newstest_sources(Path(tmp))
        origin = f"{NEWSTEST2014}, BPE 8000 trained on newstest2014 here"
    else:
        lengths, origin = newstest_lengths(3003)
        gen = torch.Generator().manual_seed(2)
        found = [torch.randint(4, 37000, (k,), generator=gen).tolist() for k in lengths]
    return found[:count], origin


def file_decoding(
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
    runtime = DecodingRuntime(max_tokens, autocast, compile)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    start = time.perf_counter()
    translate_ids(model, sources[:64], FORCED, runtime)
    sync()
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    outs = translate_ids(model, sources, FORCED, runtime)
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
