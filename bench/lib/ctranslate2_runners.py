"""The engines the CTranslate2 and paired benches time on the same batches: our beam search
in each precision (and compiled), from this package or another version of it imported under
another name, and CTranslate2's on an export of the same model; the best of interleaved runs.

The search: beam 4, alpha 0.6, maximum length source + 50, or every output forced to one
length. The length penalties differ: ours is GNMT's ((5 + |Y|) / 6)^alpha (the paper's),
CTranslate2's |Y|^alpha.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bench.lib.shapes import BATCH, BEAM
from transformer_core.device import cpu_has_native_bf16
from transformer_core.export.ctranslate2 import SUPPRESSED_PIECES, ctranslate2_spec

ALPHA, EXTRA_LENGTH = 0.6, 50
BASE_SOURCES, BASE_LENGTH = 200, 30  # the base shape's random sources, outputs forced to 30

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


def base_batches(vocab: int) -> Batches:
    """``BASE_SOURCES`` random sources of ``BASE_LENGTH`` - 1 pieces (EOS makes ``BASE_LENGTH``),
    the same every run, in batches of ``BATCH``."""
    gen = torch.Generator().manual_seed(1)
    sources = torch.randint(4, vocab, (BASE_SOURCES, BASE_LENGTH - 1), generator=gen).tolist()
    return [sources[k : k + BATCH] for k in range(0, len(sources), BATCH)]
