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
  engines do the same work (Marian too: ``bench_decode.marian_model``).

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
import dataclasses
import importlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bench.bench_checks import cpu_model
from bench.bench_decode import marian_beam_search, marian_model, our_model
from bench.hardware import result_path
from transformer_core.decoding.translate import make_batches
from transformer_core.device import cpu_has_native_bf16
from transformer_core.export.ctranslate2 import SUPPRESSED_PIECES, ctranslate2_spec

ROOT = Path(__file__).resolve().parents[1]
BEAM, ALPHA, EXTRA_LENGTH = 4, 0.6, 50
BASE_SOURCES, BASE_LENGTH, BATCH = 200, 30, 32
GPU_MAX_TOKENS = 8192

Batches = list[list[list[int]]]  # batches of sources, each a list of piece ids (no EOS)


def our_precisions() -> list[str]:
    return ["fp32", "bf16", "int8"] if cpu_has_native_bf16() else ["fp32", "int8"]


def package_module(package: str, name: str, flat_name: str | None = None):
    """Module ``name`` of ``package`` (``decoding.search``), or, in a version of the package from
    before its modules were grouped into subpackages, its flat module ``flat_name`` (default:
    the last part of ``name``, ``search``)."""
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.{flat_name or name.rpartition('.')[2]}")


def our_runner(
    model,
    precision: str,
    forced: int | None,
    package: str = "transformer_core",
    compiled: bool = False,
) -> Callable[[Batches], list]:
    """Decode batches with our beam search in ``precision``, as ``translate`` does (``compiled``:
    as ``translate --compile on``); the search and its settings from ``package`` (another
    version's, imported under another name: ``bench.bench_paired``)."""
    inference, search, settings = (
        package_module(package, name, flat)
        for name, flat in (
            ("decoding.inference", "device"),
            ("decoding.search", None),
            ("settings", None),
        )
    )
    autocast = torch.bfloat16 if precision == "bf16" else None
    decoder = inference.inference_model(model, autocast, compiled, int8=precision == "int8")
    cfg = model.cfg
    # The beam's field: ``beam``, or ``beam_size`` in a version from before its rename.
    fields = {f.name for f in dataclasses.fields(settings.DecodeSettings)}
    beam = {"beam" if "beam" in fields else "beam_size": BEAM}
    if forced:  # min_len blocks EOS until then
        options = settings.DecodeSettings(
            **beam, alpha=ALPHA, max_len_a=0.0, max_len_b=forced, min_len=forced
        )
    else:
        options = settings.DecodeSettings(
            **beam, alpha=ALPHA, max_len_a=1.0, max_len_b=EXTRA_LENGTH
        )

    def run(batches: Batches) -> list[list[int]]:
        outputs = []
        for batch in batches:
            width = max(len(s) for s in batch) + 1
            src = torch.full((len(batch), width), cfg.pad_id, dtype=torch.long)
            for row, ids in enumerate(batch):
                src[row, : len(ids)] = torch.as_tensor(ids)
                src[row, len(ids)] = cfg.eos_id
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast is not None):
                outputs += search.beam_search(decoder, src, options)
        return outputs

    return run


def ctranslate2_folder(model, pieces: list[str], quantization: str, folder: Path) -> Path:
    """``model`` saved as a CTranslate2 model of weight type ``quantization`` under ``folder``."""
    specials = {"unk": pieces[1], "bos": pieces[2], "eos": pieces[3]}
    spec = ctranslate2_spec(model, pieces, specials)
    spec.validate()
    spec.optimize(quantization=quantization)
    out = folder / f"{model.cfg.vocab_size}-{quantization}"
    out.mkdir()
    spec.save(str(out))
    return out


def ctranslate2_runner(
    folder: Path,
    pieces: list[str],
    forced: int | str | None,
    device: str = "cpu",
    compute_type: str = "default",
):
    """Decode batches with CTranslate2 (on a CPU, one thread), searched like ours but for its
    length penalty; ``forced`` fixes every output's length (``"longest"``: each batch's to its
    longest source's, CTranslate2 taking one length per call)."""
    import ctranslate2

    translator = ctranslate2.Translator(
        str(folder), device=device, compute_type=compute_type, inter_threads=1, intra_threads=1
    )
    index = {piece: i for i, piece in enumerate(pieces)}

    def run(batches: Batches) -> list[list[int]]:
        outputs = []
        for batch in batches:
            longest = max(len(s) for s in batch) + 1 + EXTRA_LENGTH  # ours: 1 * (src + EOS) + 50
            length = max(len(s) for s in batch) if forced == "longest" else forced
            lengths = {"min_decoding_length": length, "max_decoding_length": length}
            results = translator.translate_batch(
                [[pieces[i] for i in ids] for ids in batch],
                beam_size=BEAM,
                length_penalty=ALPHA,
                max_batch_size=0,
                suppress_sequences=[[piece] for piece in SUPPRESSED_PIECES],
                **(lengths if forced else {"max_decoding_length": longest}),
            )
            outputs += [[index[p] for p in r.hypotheses[0]] for r in results]
        return outputs

    return run


def marian_runner(model, forced: int):
    """Decode batches with HF Marian's generate, every output ``forced`` tokens long."""

    def run(batches: Batches) -> list[list[int]]:
        outputs = []
        for batch in batches:
            out = marian_beam_search(model, torch.tensor([ids + [3] for ids in batch]), forced)
            outputs += out[:, 1:].tolist()
        return outputs

    return run


def our_runners(model, forced: int | None, compiled: bool) -> dict[str, Callable]:
    """Our engines: each precision the CPU computes natively, and with ``compiled`` fp32 and
    bf16 (where native) compiled too (``ours_fp32_compiled``)."""
    runners = {f"ours_{p}": our_runner(model, p, forced) for p in our_precisions()}
    if compiled:
        for precision in our_precisions():
            if precision != "int8":
                runners[f"ours_{precision}_compiled"] = our_runner(
                    model, precision, forced, compiled=True
                )
    return runners


def best_of(runners: dict[str, Callable], batches: Batches, repeats: int) -> dict[str, dict]:
    """Each runner's best time over ``repeats`` after a warm-up (its time kept: a compiled
    engine compiles there), runs interleaved; its outputs."""
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    warm_up, outputs = {}, {}
    for name, run in runners.items():
        start = time.perf_counter()
        outputs[name] = run(batches[:1])
        warm_up[name] = time.perf_counter() - start
    for _ in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            outputs[name] = run(batches)
            seconds[name].append(time.perf_counter() - start)
    return {
        name: {
            "seconds": round(min(seconds[name]), 3),
            "target_tokens": sum(len(o) for o in outputs[name]),
            "target_tokens_per_s": round(
                sum(len(o) for o in outputs[name]) / min(seconds[name]), 1
            ),
            "warm_up_seconds": round(warm_up[name], 2),
            "outputs": outputs[name],
        }
        for name in runners
    }


def sorted_batches(sources: list[list[int]], size: int) -> tuple[Batches, list[int]]:
    """Sources sorted longest first, cut into batches of ``size``; the order used."""
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    return [[sources[i] for i in order[k : k + size]] for k in range(0, len(order), size)], order


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


def base_batches(vocab: int) -> Batches:
    """``BASE_SOURCES`` random sources of ``BASE_LENGTH`` - 1 pieces (EOS makes ``BASE_LENGTH``),
    the same every run, in batches of ``BATCH``."""
    gen = torch.Generator().manual_seed(1)
    sources = torch.randint(4, vocab, (BASE_SOURCES, BASE_LENGTH - 1), generator=gen).tolist()
    return [sources[k : k + BATCH] for k in range(0, len(sources), BATCH)]


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


def bench_gpu(args, folder: Path) -> dict:
    """newstest2014 on the GPU, beam 4, in bf16 at 8,192-token batches: CTranslate2 (compute
    type bfloat16, each batch forced to its longest source), then ours eager and compiled
    (``bench_decode.bench_file_decoding``, each output forced to its source's length).
    Each engine decodes the first 64 sources once before it is timed; where CTranslate2 cannot
    run on this GPU (its wheel's CUDA libraries missing), its row says why."""
    from bench.bench_decode import NEWSTEST2014, bench_file_decoding, newstest_sources
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
        rows[name] = bench_file_decoding(sources, origin, GPU_MAX_TOKENS, compile=compile)
        print(f"  gpu {name}: {json.dumps(rows[name])}", flush=True)
    for engine, row in rows.items():
        print(f"  gpu {engine}: {row['target_tokens_per_s']:.0f} tok/s", flush=True)
    return {"device": torch.cuda.get_device_name(), "max_tokens": GPU_MAX_TOKENS, "engines": rows}


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
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
            result["benchmarks"]["newstest2014_gpu"] = bench_gpu(args, Path(tmp))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
