"""torch.compile against eager, for training and for beam-4 decoding, on this machine's CPU.

What ``compile: auto`` should do on a CPU (``device.AUTO_COMPILE``) is decided by this
benchmark. Per shape (the Multi30k model and the paper's base, as ``bench_train``'s), in the
precision ``auto`` picks here:

- training: target tokens per second of full optimizer steps at 4,000 target tokens, on the
  token-bucket batches of a synthetic corpus (``train_runners.synthetic_corpus``), eager and with
  ``compile=on``; the first steps of the compiled run (compilation) are timed apart;
- decoding: beam 4 over 32 sources of 30 tokens, outputs forced to 30 tokens (as
  ``bench_decode``), eager and with the compiled decoding copy (``inference.inference_model``),
  the first decode (compilation) timed apart.

Eager and compiled runs alternate, so that a burst of load from elsewhere hits both.

    python -m bench.bench_compile                  # Multi30k and base, minutes on 2 cores
    python -m bench.bench_compile --shapes multi30k --rounds 2
    python -m bench.bench_compile --kinds decoding --out compile_decoding.json

Writes bench/results/HARDWARE/compile_against_eager.json (or --out).
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

from bench.lib.decode_runners import sources
from bench.lib.hardware import result_path, write_result
from bench.lib.shapes import OUT_LEN, SHAPES, TOKENS_PER_STEP, decoding_config
from bench.lib.train_runners import Ours, synthetic_corpus, timed, train_settings
from transformer_core.decoding.inference import inference_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.device import autocast_dtype, cpu_has_native_bf16
from transformer_core.model.config import model_config
from transformer_core.model.transformer import Transformer

CPU = torch.device("cpu")


def training(shape: str, workdir: Path, rounds: int, steps: int) -> dict:
    cfg = model_config("base", **SHAPES[shape])
    dataset = synthetic_corpus(workdir / shape, cfg.vocab_size, sentences=6000)
    tokens = TOKENS_PER_STEP
    runners = {
        mode: Ours(cfg, dataset, CPU, train_settings("auto", tokens, tokens, mode))
        for mode in ("off", "on")
    }
    first = {}
    for mode, runner in runners.items():  # warm-up; the compiled one compiles here
        start = time.perf_counter()
        runner.step()
        first[mode] = time.perf_counter() - start
    rates: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode, runner in runners.items():
            done, seconds = timed(runner, steps, CPU)
            rates[mode].append(done / seconds)
    for runner in runners.values():
        runner.trainer.close()
    eager, compiled = (statistics.median(rates[m]) for m in ("off", "on"))
    return {
        "shape": shape,
        "precision": "bf16" if autocast_dtype(CPU, "auto") else "fp32",
        "target_tokens_per_step": tokens,
        "first_step_seconds": {k: round(v, 2) for k, v in first.items()},
        "eager_tgt_tokens_per_s": round(eager, 1),
        "compiled_tgt_tokens_per_s": round(compiled, 1),
        "compiled_over_eager": round(compiled / eager, 3),
        "rounds": {k: [round(r, 1) for r in v] for k, v in rates.items()},
    }


def decoding(shape: str, rounds: int) -> dict:
    autocast = autocast_dtype(CPU, "auto")
    torch.manual_seed(0)
    model = Transformer(decoding_config(shape)).eval()
    src = sources(model.cfg.vocab_size)
    out_len = OUT_LEN
    models = {mode: inference_model(model, autocast, mode == "on") for mode in ("off", "on")}

    def decode(mode: str) -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast is not None):
            hyps = beam_search_nbest(
                models[mode],
                src,
                beam=4,
                alpha=0.6,
                max_len_a=0.0,
                max_len_b=out_len,
                min_len=out_len,
            )
        assert all(len(h[0].tokens) == out_len for h in hyps)
        return time.perf_counter() - start

    first = {mode: decode(mode) for mode in models}
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode in models:
            times[mode].append(decode(mode))
    tokens = src.size(0) * out_len
    eager, compiled = (tokens / min(times[m]) for m in ("off", "on"))
    return {
        "shape": shape,
        "precision": "bf16" if autocast else "fp32",
        "sentences": src.size(0),
        "output_tokens": out_len,
        "first_decode_seconds": {k: round(v, 2) for k, v in first.items()},
        "eager_tgt_tokens_per_s": round(eager, 1),
        "compiled_tgt_tokens_per_s": round(compiled, 1),
        "compiled_over_eager": round(compiled / eager, 3),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shapes", nargs="+", default=["multi30k", "base"], choices=["multi30k", "base"]
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed rounds per variant (default: 3)"
    )
    parser.add_argument(
        "--steps", type=int, default=3, help="training steps per round (default: 3)"
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        default=["training", "decoding"],
        choices=["training", "decoding"],
        help="what to measure (default: both)",
    )
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument("--out", default=str(result_path("compile_against_eager")))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    result = {
        "bench": "compile",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_native_bf16": cpu_has_native_bf16(),
        "threads": args.threads,
        "training": [],
        "decoding": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            for kind in args.kinds:
                if kind == "training":
                    row = training(shape, Path(tmp), args.rounds, args.steps)
                else:
                    row = decoding(shape, args.rounds)
                result[kind].append(row)
                print(f"{kind} {shape}: {json.dumps(row)}", file=sys.stderr, flush=True)
                write_result(args.out, result, indent=2, quiet=True)
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
