"""Beam-4 decoding on one CPU thread: the project (fp32, bf16, int8) beside CTranslate2 (float32,
int8, through ``transformer_core.export.ctranslate2``) and, at the base shape, HF Marian.

Three benchmarks, each engine given the same sources in the same batches:

- ``multi30k_b32``: a trained Multi30k model (``--checkpoint``, ``--spm``) decoding
  test_2016_flickr (``--source``, scored against ``--ref``), sorted by length and cut into
  batches of 32 sentences;
- ``multi30k_tok4096``: the same sentences in ``translate``'s own batches (``make_batches``,
  4,096 source tokens padded);
- ``base_b32``: the paper's base shape (vocabulary 37,000) with random weights, 200 sources
  of 30 tokens in batches of 32, every output forced to 30 tokens (EOS blocked), so that all
  engines do the same work (Marian too: ``bench.lib.marian``).

The search: beam 4, alpha 0.6, maximum length source + 50. The length penalties differ:
ours is GNMT's ((5 + |Y|) / 6)^alpha (the paper's), CTranslate2's |Y|^alpha; on Multi30k
each engine's outputs are its own, so tokens/s counts each one's tokens and BLEU
(sacreBLEU, 13a) is reported beside them. Speed is target tokens per second, the best of
``--repeats`` runs after a warm-up (its time recorded: a compiled engine compiles there),
engines interleaved. Without ``--checkpoint`` only ``base_b32`` runs. ``--compiled`` adds our
compiled step of fixed shapes in fp32 and bf16 (``translate --compile on``).

``--only gpu`` runs instead, on the GPU, newstest2014 at 8,192-token batches in bf16: ours
eager and compiled beside CTranslate2 (``bench_gpu``).

    python -m bench.bench_ctranslate2 --checkpoint runs/en_de/base/averaged.pt \\
        --spm data/en_de/spm.model --source data/en_de/raw/test.en --ref data/en_de/raw/test.de

Writes bench/results/HARDWARE/decode_beside_ctranslate2.json (or --out). Needs the serve extra (ctranslate2) and,
for Marian, the bench extra (transformers).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.lib.ctranslate2_runners import (
    ALPHA,
    BASE_LENGTH,
    BASE_SOURCES,
    base_batches,
    best_of,
    ctranslate2_folder,
    ctranslate2_runner,
    our_runners,
    sorted_batches,
)
from bench.lib.decode_runners import file_decoding, newstest_sources, our_model
from bench.lib.hardware import cpu_model, result_path, write_result
from bench.lib.marian import marian_model, marian_runner
from bench.lib.shapes import BATCH, BEAM
from bench.lib.shared_data import NEWSTEST2014
from transformer_core.decoding.translate import make_batches

GPU_MAX_TOKENS = 8192


def bench_multi30k(args, folder: Path) -> dict:
    import sacrebleu

    from transformer_core.decoding.translate import load_translation_model

    model, sp = load_translation_model(args.checkpoint, args.spm, torch.device("cpu"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    lines = Path(args.source).read_text(encoding="utf-8").splitlines()
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    sources = [sp.encode(line) for line in lines]
    runners = our_runners(model, None, args.compiled)
    for quantization in ("float32", "int8"):
        exported = ctranslate2_folder(model, pieces, quantization, folder)
        runners[f"ctranslate2_{quantization}"] = ctranslate2_runner(exported, pieces, None)
    by_32, order_32 = sorted_batches(sources, BATCH)
    groups = make_batches([len(s) + 1 for s in sources], 4096)
    by_tokens = [[sources[i] for i in group] for group in groups]
    order_tokens = [i for group in groups for i in group]
    results = {}
    for name, batches, order in (
        ("multi30k_b32", by_32, order_32),
        ("multi30k_tok4096", by_tokens, order_tokens),
    ):
        print(f"{name}: {len(batches)} batches", flush=True)
        measured = best_of(runners, batches, args.repeats)
        for engine, row in measured.items():
            hyps = [""] * len(lines)
            for i, ids in zip(order, row.pop("outputs"), strict=True):
                hyps[i] = sp.decode(ids)
            row["sacrebleu"] = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
            print(f"  {engine}: {row}", flush=True)
        results[name] = {"batches": len(batches), "sentences": len(sources), "engines": measured}
    return results


def bench_base(args, folder: Path) -> dict:
    model = our_model("base")
    vocab = model.cfg.vocab_size
    pieces = ["<pad>", "<unk>", "<s>", "</s>", *(f"t{i}" for i in range(4, vocab))]
    batches = base_batches(vocab)
    runners = our_runners(model, BASE_LENGTH, args.compiled)
    for quantization in ("float32", "int8"):
        exported = ctranslate2_folder(model, pieces, quantization, folder)
        runners[f"ctranslate2_{quantization}"] = ctranslate2_runner(exported, pieces, BASE_LENGTH)
    if not args.no_marian:
        runners["marian_fp32"] = marian_runner(marian_model("base"), BASE_LENGTH)
    print(f"base_b32: {len(batches)} batches", flush=True)
    measured = best_of(runners, batches, args.repeats)
    for engine, row in measured.items():
        assert all(len(o) == BASE_LENGTH for o in row.pop("outputs")), engine
        print(f"  {engine}: {row}", flush=True)
    return {"batches": len(batches), "sentences": BASE_SOURCES, "engines": measured}


def ctranslate2_on_gpu(sources: list[list[int]], folder: Path) -> dict:
    """CTranslate2 (compute type bfloat16) on the GPU: the base model's export decoding
    ``sources`` in batches of ``GPU_MAX_TOKENS``, each forced to its longest source."""
    model = our_model("base")
    pieces = ["<pad>", "<unk>", "<s>", "</s>", *(f"t{i}" for i in range(4, model.cfg.vocab_size))]
    exported = ctranslate2_folder(model, pieces, "float32", folder)
    run = ctranslate2_runner(exported, pieces, "longest", device="cuda", compute_type="bfloat16")
    batches = [[sources[i] for i in group] for group in make_batches(
        [len(s) + 1 for s in sources], GPU_MAX_TOKENS
    )]  # fmt: skip
    start = time.perf_counter()
    run(batches[:1])
    warm_up = time.perf_counter() - start
    start = time.perf_counter()
    tokens = sum(len(o) for o in run(batches))
    seconds = time.perf_counter() - start
    return {
        "warmup_seconds": round(warm_up, 2),
        "seconds": round(seconds, 3),
        "target_tokens": tokens,
        "target_tokens_per_s": round(tokens / seconds, 1),
    }


def bench_gpu(folder: Path) -> dict:
    """newstest2014 on the GPU, beam 4, in bf16 at 8,192-token batches: CTranslate2 (compute
    type bfloat16, each batch forced to its longest source), then ours eager and compiled
    (``decode_runners.file_decoding``, each output forced to its source's length).
    Each engine decodes the first 64 sources once before it is timed; where CTranslate2 cannot
    run on this GPU (its wheel's CUDA libraries missing), its row says why."""
    from transformer_core.device import choose_attention_backends

    choose_attention_backends(torch.device("cuda"))  # as translate does: cuDNN's attention off
    sources = newstest_sources(folder)
    origin = f"{NEWSTEST2014}, BPE 8000 trained on newstest2014 here"
    rows = {}
    try:
        rows["ctranslate2_bfloat16"] = ctranslate2_on_gpu(sources, folder)
    except (RuntimeError, OSError) as error:  # its CUDA libraries missing, say: recorded
        rows["ctranslate2_bfloat16"] = {"error": str(error), "target_tokens_per_s": 0.0}
    print(f"  gpu ctranslate2_bfloat16: {json.dumps(rows['ctranslate2_bfloat16'])}", flush=True)
    for compile in (False, True):  # the compiled engine last: its warm-up is the longest
        name = f"ours_bf16{'_compiled' if compile else ''}"
        rows[name] = file_decoding(sources, origin, GPU_MAX_TOKENS, compile=compile)
        print(f"  gpu {name}: {json.dumps(rows[name])}", flush=True)
    for engine, row in rows.items():
        print(f"  gpu {engine}: {row['target_tokens_per_s']:.0f} tok/s", flush=True)
    return {"device": torch.cuda.get_device_name(), "max_tokens": GPU_MAX_TOKENS, "engines": rows}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", help="a trained Multi30k checkpoint (averaged.pt)")
    parser.add_argument("--spm", help="its sentencepiece model")
    parser.add_argument("--source", help="test_2016_flickr English, one sentence per line")
    parser.add_argument("--ref", help="test_2016_flickr German, for sacreBLEU")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per engine (default 2)")
    parser.add_argument("--no-marian", action="store_true", help="leave HF Marian out")
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also our compiled fixed-shape step, fp32 and bf16 (translate --compile on)",
    )
    parser.add_argument("--only", choices=["multi30k", "base", "gpu"], help="one benchmark group")
    parser.add_argument("--out", default=str(result_path("decode_beside_ctranslate2")))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only == "gpu" and not torch.cuda.is_available():
        print("bench_ctranslate2: --only gpu needs a CUDA GPU", file=sys.stderr)
        return 2
    import ctranslate2

    torch.set_num_threads(1)
    result = {
        "cpu": cpu_model(),
        "threads": 1,
        "torch": torch.__version__,
        "ctranslate2": ctranslate2.__version__,
        "python": platform.python_version(),
        "beam": BEAM,
        "alpha": ALPHA,
        "repeats": args.repeats,
        "benchmarks": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.checkpoint and args.only in (None, "multi30k"):
            result["benchmarks"].update(bench_multi30k(args, Path(tmp)))
        if args.only in (None, "base"):
            result["benchmarks"]["base_b32"] = bench_base(args, Path(tmp))
        if args.only == "gpu":
            result["benchmarks"]["newstest2014_gpu"] = bench_gpu(Path(tmp))
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
