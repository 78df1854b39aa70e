"""Learning on real data: the project's Multi30k model, variants of it, and the Hugging Face
Marian peer, trained for the same number of steps and measured the same way.

Every variant trains the ``multi30k`` scale's base model (``config/multi30k.yaml``: 3+3 layers,
d_model 256) with the recipe the ablation started from (``START``: 800 steps of about 4000 target
tokens, warmup 400, lr_scale 0.5, the peer's), changing one thing (``VARIANTS``): the
weight initialization, the training data's length-ratio filter, the tokens per batch, the heads,
the learning rate, the warmup, half the tokens per step for twice the steps (``step_scale``: the
same tokens and compute, twice the updates); ``NAME@SEED`` trains a variant with another seed.
Per variant:

- dev (val) perplexity per word piece at every checkpoint, and per *word* (the same for any
  segmentation, so comparable with the peer, whose sentencepiece model is its own);
- dev loss with each batch's sources rotated (``dev_loss_wrong_src``: a model that ignores its
  source shows no gap);
- target tokens per second of training;
- val BLEU (sacreBLEU, beam 4, alpha 0.6) of the last checkpoint and of the averages of the
  last 2, 3 and 5 checkpoints; the window with the best val BLEU is chosen (val only), and
  that checkpoint and the last one are decoded once on test_2016_flickr and test_2017_flickr.

``peer`` runs the peer script given as ``--peer-script`` (HF ``MarianMTModel`` of the same shape,
its own BPE 8000, HF beam 4) as a subprocess for the same steps, on the same device; its dev NLL
is taken at its epoch ends and at the last step.

    # from the repository root (``bench`` is a package); data: the workflow's Multi30k data folder
    snakemake data/en_de/bin/train.json data/en_de/bin/dev.json data/en_de/bin/test.json \\
        --cores 2 --configfile=config/multi30k.yaml --config mirror=../shared/data
    python -m bench.bench_learning --data data/en_de --make-extra --variants normal_warmup200 peer --threads 2 \\
        --peer-script PEER/multi30k_peer.py
    python -m bench.bench_learning --data data/en_de --device cuda --parallel 12 --threads 1  # all, one GPU
    python -m bench.bench_learning --data data/en_de --variants normal@2 normal@3   # other seeds
    python -m bench.bench_learning --data data/en_de --variants normal_warmup200 peer --steps 100 --no-decode

Variants that need files beyond the workflow's (``nofilter``: ``EXTRA/bin_nofilter/train``;
test_2017_flickr: ``EXTRA/test17.src`` and ``EXTRA/test17.de``) read them from ``--extra``;
``make_extra`` (``--make-extra``) writes them with ``transformer-core prepare`` and ``binarize``.
Writes one JSON file (``--out``, default bench/results/HARDWARE/multi30k_learning_ablation.json).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.lib.hardware import result_path, write_result
from bench.lib.learning_variants import (
    CHECKPOINT_INTERVAL,
    ROOT,
    STEPS,
    VARIANTS,
    peer_variant,
    project_variant,
    run,
    scale_settings,
    variant_name,
    worker,
)
from bench.lib.shared_data import SHARED_DATA


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, required=True, help="the workflow's data/en_de folder (Multi30k)"
    )
    parser.add_argument(
        "--extra",
        type=Path,
        default=None,
        help="nofilter data and test_2017 (default DATA/../extra)",
    )
    parser.add_argument("--make-extra", action="store_true", help="write the --extra files first")
    parser.add_argument(
        "--multi30k",
        type=Path,
        default=SHARED_DATA / "multi30k",
        help="raw Multi30k .gz files (the peer and --make-extra read them)",
    )
    parser.add_argument(
        "--peer-script",
        type=Path,
        help="the Hugging Face Marian peer's training script (multi30k_peer.py); the peer "
        "variant needs it",
    )
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "multi30k.yaml")
    parser.add_argument("--runs", type=Path, default=Path("bench/runs/learning"))
    parser.add_argument(
        "--out", type=Path, help="default: bench/results/HARDWARE/multi30k_learning_ablation.json"
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANTS),
        type=variant_name,
        help="NAME or NAME@SEED (default: every variant, seed from the configuration)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=STEPS,
        help=f"training steps of START, a variant's step_scale times more (default: {STEPS})",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        default=CHECKPOINT_INTERVAL,
        help=f"steps between checkpoints of START (default: {CHECKPOINT_INTERVAL})",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--precision", default="fp32", choices=["fp32", "bf16"], help="training precision"
    )
    parser.add_argument("--decode-precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument(
        "--alpha", type=float, default=0.6, help="GNMT length penalty of every decoding"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    parser.add_argument(
        "--no-decode",
        action="store_true",
        help="train and evaluate on dev only: speed and perplexity, no BLEU",
    )
    parser.add_argument(
        "--peer-decode-limit", type=int, default=0, help="decode only N test lines (checks)"
    )
    parser.add_argument(
        "--parallel", type=int, default=1, help="variants at once (a GPU holds several)"
    )
    args = parser.parse_args(argv)
    args.out = args.out or result_path("multi30k_learning_ablation", args.device)
    if "peer" in args.variants and args.peer_script is None:
        parser.error("the peer variant needs --peer-script (the peer's multi30k_peer.py)")
    args.extra = args.extra or args.data.parent / "extra"
    return args


def report_header(args: argparse.Namespace, base_model: dict, base_train: dict) -> dict:
    """The report before any variant: what ran, where, and the settings every variant starts from."""
    import torch

    return {
        "what": "Multi30k EN-DE, the multi30k scale's base model and variants beside the HF Marian peer",
        "steps": args.steps,
        "device": args.device,
        "device_name": torch.cuda.get_device_name()
        if args.device == "cuda"
        else platform.processor() or "cpu",
        "precision": args.precision,
        "decode_precision": args.decode_precision,
        "alpha": args.alpha,
        "threads": args.threads,
        "parallel": args.parallel,
        "torch": torch.__version__,
        "config": str(args.config),
        "base_model": base_model,
        "base_train": base_train,
        "results": [],
    }


def run_variants(
    args: argparse.Namespace, report: dict, base_model: dict, base_train: dict
) -> None:
    """Every variant of ``--variants``, ``--parallel`` at once, each one's row added to
    ``report`` and the file written as it finishes, so that a cut-off run keeps what it did."""
    started, lock = time.perf_counter(), threading.Lock()

    def one(name: str) -> None:
        try:
            result = (
                peer_variant(args)
                if name == "peer"
                else project_variant(name, args, base_model, base_train)
            )
        except (RuntimeError, OSError, KeyError) as err:
            result = {"variant": name, "error": str(err)}
        print(
            json.dumps(
                {k: result.get(k) for k in ("variant", "dev_ppl", "chosen_window", "test", "error")}
            ),
            flush=True,
        )
        with lock:
            report["results"].append(result)
            report["wall_seconds"] = round(time.perf_counter() - started, 1)
            write_result(args.out, report, quiet=True)

    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(pool.map(one, args.variants))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        worker(json.loads(argv[1]))
        return 0
    args = parse_args(argv)
    if args.make_extra:
        make_extra(args)
    base_model, base_train = scale_settings(args.config)
    base_train["checkpoint_interval"] = args.checkpoint_interval
    report = report_header(args, base_model, base_train)
    run_variants(args, report, base_model, base_train)
    write_result(args.out, report)
    return 1 if any("error" in r for r in report["results"]) else 0


def make_extra(args: argparse.Namespace) -> None:
    """test_2017_flickr (prepared like test) and the training set without the length-ratio filter."""
    import gzip

    extra, log = args.extra, args.extra / "make_extra.log"
    extra.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        with gzip.open(
            args.multi30k / f"test_2017_flickr.{lang}.gz", "rt", encoding="utf-8"
        ) as handle:
            (extra / f"test17.{lang}").write_text(handle.read(), encoding="utf-8")
    tc = [sys.executable, "-m", "transformer_core"]
    run(
        [
            *tc,
            "prepare",
            "--src-in",
            str(extra / "test17.en"),
            "--tgt-in",
            str(extra / "test17.de"),
            "--src-out",
            str(extra / "test17.src"),
            "--tgt-out",
            str(extra / "test17.tgt"),
            "--report",
            str(extra / "test17.report.json"),
            "--src-lang",
            "en",
            "--tgt-lang",
            "de",
            "--no-filter",
        ],
        log,
    )
    run(
        [
            *tc,
            "prepare",
            "--src-in",
            str(args.data / "raw" / "train.en"),
            "--tgt-in",
            str(args.data / "raw" / "train.de"),
            "--src-out",
            str(extra / "train_nofilter.src"),
            "--tgt-out",
            str(extra / "train_nofilter.tgt"),
            "--report",
            str(extra / "nofilter.report.json"),
            "--src-lang",
            "en",
            "--tgt-lang",
            "de",
            "--no-filter",
        ],
        log,
    )
    run(
        [
            *tc,
            "binarize",
            "--spm",
            str(args.data / "spm.model"),
            "--src",
            str(extra / "train_nofilter.src"),
            "--tgt",
            str(extra / "train_nofilter.tgt"),
            "--out-prefix",
            str(extra / "bin_nofilter" / "train"),
        ],
        log,
    )


if __name__ == "__main__":
    raise SystemExit(main())
