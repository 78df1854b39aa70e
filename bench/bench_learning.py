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

``peer`` runs ``../shared/peers/multi30k_peer.py`` (HF ``MarianMTModel`` of the same shape, its
own BPE 8000, HF beam 4) as a subprocess for the same steps, on the same device; its dev NLL is
taken at its epoch ends and at the last step.

    # from the repository root (``bench`` is a package); data: the workflow's Multi30k data folder
    snakemake data/en_de/bin/train.json data/en_de/bin/dev.json data/en_de/bin/test.json \\
        --cores 2 --configfile=config/multi30k.yaml --config mirror=../shared/data
    python -m bench.bench_learning --data data/en_de --make-extra --variants normal_warmup200 peer --threads 2
    python -m bench.bench_learning --data data/en_de --device cuda --parallel 12 --threads 1  # all, one GPU
    python -m bench.bench_learning --data data/en_de --variants normal@2 normal@3   # other seeds
    python -m bench.bench_learning --data data/en_de --variants normal_warmup200 peer --steps 100 --no-decode

Variants that need files beyond the workflow's (``nofilter``: ``EXTRA/bin_nofilter/train``;
test_2017_flickr: ``EXTRA/test17.src`` and ``EXTRA/test17.de``) read them from ``--extra``;
``make_extra`` (``--make-extra``) writes them with ``transformer-core prepare`` and ``binarize``.
Writes one JSON file (``--out``, default bench/results/learning.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench.shared_data import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
PEER_DIR = ROOT.parent / "shared" / "peers"
WINDOWS = (1, 2, 3, 5)  # checkpoints averaged (1: the last alone)

# The recipe the ablation starts from: the peer's (and this configuration's before the ablation),
# peak lr 1.56e-3, 800 steps of 4000 target tokens, a checkpoint every 100. Every variant sets
# it, so a variant means the same whatever the configuration's recipe; the configuration gives
# the rest (shape, seed, precision).
START = {"warmup": 400, "lr_scale": 0.5, "tokens_per_step": 4000, "max_tokens": 4000}
STEPS, CHECKPOINT_INTERVAL = 800, 100
# One change each from "normal" (the first four separate the scale of the shared embedding from
# that of the projections). "normal_warmup200" was config/multi30k.yaml before the batches were
# halved; "tokens2000_lr0.7" is config/multi30k.yaml as shipped.
VARIANTS: dict[str, dict[str, Any]] = {
    "xavier": {"model": {"init": "xavier"}},
    "normal": {"model": {"init": "normal"}},
    "xavier_small_embedding": {"model": {"init": "xavier"}, "embedding_std": 0.02},
    "normal_large_embedding": {"model": {"init": "normal"}, "embedding_std": 256**-0.5},
    "normal_nofilter": {"model": {"init": "normal"}, "train_data": "nofilter"},
    "normal_tokens4200": {
        "model": {"init": "normal"},
        "train": {"max_tokens": 4200, "tokens_per_step": 4200},
    },
    "normal_heads4": {"model": {"init": "normal", "h": 4, "d_k": 64, "d_v": 64}},
    "normal_lr0.7": {"model": {"init": "normal"}, "train": {"lr_scale": 0.7}},
    "normal_lr1.0": {"model": {"init": "normal"}, "train": {"lr_scale": 1.0}},
    "normal_warmup200": {"model": {"init": "normal"}, "train": {"warmup": 200}},
    "normal_lr0.7_warmup200": {
        "model": {"init": "normal"},
        "train": {"lr_scale": 0.7, "warmup": 200},
    },
    # Half the tokens per step for twice the steps (and checkpoint interval, and warmup): the same
    # tokens and compute as "normal_warmup200", with twice the updates; peak lr 1.56e-3 (the
    # usual square-root rule for half the batch) or 2.2e-3 (the shipped peak).
    "tokens2000": {
        "model": {"init": "normal"},
        "train": {"max_tokens": 2000, "tokens_per_step": 2000, "warmup": 400},
        "step_scale": 2,
    },
    "tokens2000_lr0.7": {
        "model": {"init": "normal"},
        "train": {"max_tokens": 2000, "tokens_per_step": 2000, "warmup": 400, "lr_scale": 0.7},
        "step_scale": 2,
    },
    "peer": {},
}


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run ``cmd``, its output into ``log``; a failure raises with the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(cmd) + "\n")
        handle.flush()
        done = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)
    if done.returncode:
        tail = "".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[-20:])
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({done.returncode}); {log}:\n{tail}")


def scale_settings(config_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The base model's overrides and the training settings of a workflow configuration."""
    from transformer_core.scaling import scaled_model_overrides

    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    rule = config["scale_rule"]
    model = {
        **scaled_model_overrides("base", rule["width_divisor"], rule.get("layer_divisor", 1)),
        **config.get("model", {}),
    }
    return model, dict(config["train"])


# -- one variant of the project --------------------------------------------------------------------


def worker(spec: dict[str, Any]) -> None:
    """Train one variant in this process (``embedding_std`` re-draws the shared embedding)."""
    import torch

    from transformer_core.model import Transformer
    from transformer_core.settings import TrainConfig
    from transformer_core.train import train

    if spec.get("embedding_std"):
        reset = Transformer.reset_parameters

        def reset_with_embedding(self: Transformer) -> None:
            reset(self)
            torch.nn.init.normal_(self.embedding.weight, std=spec["embedding_std"])

        Transformer.reset_parameters = reset_with_embedding
    cfg = TrainConfig(**spec["train"])
    train(
        spec["train_prefix"],
        spec["out_dir"],
        "base",
        cfg,
        model_overrides=spec["model"],
        dev_prefix=spec["dev_prefix"],
        resume=True,
        restart_if_changed=True,
    )


def count_words(path: Path) -> int:
    return sum(len(line.split()) for line in path.read_text(encoding="utf-8").splitlines())


def dev_tokens(dev_prefix: Path) -> int:
    """Target positions scored on dev: word pieces plus EOS, as the trainer counts them."""
    from transformer_core.data.dataset import ParallelDataset

    dev = ParallelDataset(dev_prefix)
    return int(dev.tgt_lens.sum()) + len(dev.tgt_lens)


def score(hyp: Path, ref: Path, out: Path, log: Path) -> dict[str, Any]:
    run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "score",
            "--hyp",
            str(hyp),
            "--ref",
            str(ref),
            "--lang",
            "de",
            "--out",
            str(out),
        ],
        log,
    )
    result = json.loads(out.read_text(encoding="utf-8"))
    return {
        "sacrebleu": result["sacrebleu"],
        "bleu_paper_style": result["bleu_paper_style"],
        "length_ratio": round(result["sacrebleu_stats"]["ratio"], 4),
    }


def variant_name(text: str) -> str:
    """``NAME`` or ``NAME@SEED`` (the variant trained with another seed), checked against VARIANTS."""
    name, _, seed = text.partition("@")
    if name not in VARIANTS or (seed and (not seed.isdigit() or name == "peer")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME or NAME@SEED, NAME one of {', '.join(VARIANTS)}"
        )
    return text


def project_variant(
    name: str, args: argparse.Namespace, base_model: dict, base_train: dict
) -> dict[str, Any]:
    base_name, _, seed = name.partition("@")
    variant = VARIANTS[base_name]
    step_scale = variant.get("step_scale", 1)
    run_dir = args.runs / name
    log = run_dir / "bench.log"
    data, extra = args.data, args.extra
    train_prefix = (
        extra / "bin_nofilter" / "train"
        if variant.get("train_data") == "nofilter"
        else data / "bin" / "train"
    )
    train_settings = {
        **base_train,
        **START,
        **variant.get("train", {}),
        **({"seed": int(seed)} if seed else {}),
        "steps": args.steps * step_scale,
        "checkpoint_interval": base_train["checkpoint_interval"] * step_scale,
        "keep_last": max(WINDOWS),
        "log_interval": 50,
        "device": args.device,
        "precision": args.precision,
        "num_threads": args.threads,
    }
    spec = {
        "train": train_settings,
        "model": {**base_model, **variant.get("model", {})},
        "embedding_std": variant.get("embedding_std"),
        "train_prefix": str(train_prefix),
        "dev_prefix": str(data / "bin" / "dev"),
        "out_dir": str(run_dir),
    }
    started = time.perf_counter()
    run([sys.executable, "-m", "bench.bench_learning", "worker", json.dumps(spec)], log)
    train_seconds = time.perf_counter() - started
    metrics = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    train_records = [m for m in metrics if m["event"] == "train"]
    dev_records = [m for m in metrics if m["event"] == "dev"]
    words = count_words(data / "raw" / "dev.de")
    tokens = dev_tokens(data / "bin" / "dev")

    def decode(checkpoint: Path, source: Path, ref: Path, tag: str) -> dict[str, Any]:
        hyp = run_dir / "hyp" / f"{tag}.txt"
        hyp.parent.mkdir(parents=True, exist_ok=True)
        run(
            [
                sys.executable,
                "-m",
                "transformer_core",
                "translate",
                "--checkpoint",
                str(checkpoint),
                "--spm",
                str(data / "spm.model"),
                "--input",
                str(source),
                "--output",
                str(hyp),
                "--beam",
                "4",
                "--alpha",
                str(args.alpha),
                "--max-len-a",
                "1.0",
                "--max-len-b",
                "50",
                "--device",
                args.device,
                "--precision",
                args.decode_precision,
                *(["--num-threads", str(args.threads)] if args.threads else []),
            ],
            log,
        )
        return score(hyp, ref, run_dir / "hyp" / f"{tag}.json", log)

    result = {
        "variant": name,
        "settings": {**START, **variant, **({"seed": int(seed)} if seed else {})},
        "train_seconds_with_dev_evals": round(train_seconds, 1),
        "tgt_tokens_per_s": [round(r["tgt_tokens_per_s"]) for r in train_records],
        "train_loss": {r["step"]: round(r["loss"], 4) for r in train_records},
        "dev_ppl": {r["step"]: round(r["dev_ppl"], 3) for r in dev_records},
        "dev_ppl_per_word": {
            r["step"]: round(math.exp(r["dev_loss"] * tokens / words), 3) for r in dev_records
        },
        "dev_loss_wrong_src": {r["step"]: round(r["dev_loss_wrong_src"], 4) for r in dev_records},
    }
    if args.no_decode:
        return result
    checkpoints = {}
    for window in WINDOWS:
        if window == 1:
            checkpoints[window] = run_dir / "last.pt"
        else:
            checkpoints[window] = run_dir / f"avg{window}.pt"
            run(
                [
                    sys.executable,
                    "-m",
                    "transformer_core",
                    "average",
                    "--run-dir",
                    str(run_dir),
                    "--last",
                    str(window),
                    "--out",
                    str(checkpoints[window]),
                ],
                log,
            )
    val = {
        window: decode(
            checkpoints[window],
            data / "prepared" / "dev.src",
            data / "raw" / "dev.de",
            f"val.avg{window}",
        )
        for window in WINDOWS
    }
    chosen = max(WINDOWS, key=lambda w: (val[w]["sacrebleu"], -w))
    tests = {
        "test_2016_flickr": (data / "prepared" / "test.src", data / "raw" / "test.de"),
        "test_2017_flickr": (extra / "test17.src", extra / "test17.de"),
    }
    test = {}
    for window in sorted({1, chosen}):
        for test_name, (source, ref) in tests.items():
            if source.exists():
                test[f"{test_name}.avg{window}"] = decode(
                    checkpoints[window], source, ref, f"{test_name}.avg{window}"
                )
    return {
        **result,
        "val_bleu_by_window": {w: val[w] for w in WINDOWS},
        "chosen_window": chosen,
        "test": test,
    }


# -- the peer --------------------------------------------------------------------------------------


def peer_variant(args: argparse.Namespace) -> dict[str, Any]:
    """The HF Marian peer for the same steps; on CUDA by making it the default device."""
    out_dir = args.runs / "peer"
    out_dir.mkdir(parents=True, exist_ok=True)
    script = args.peers / "multi30k_peer.py"
    prelude = "import torch, runpy, sys; "
    if args.device == "cuda":
        prelude += "torch.set_default_device('cuda'); "
    code = (
        prelude + f"sys.argv = sys.argv[1:]; runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    result = out_dir / "result.json"
    started = time.perf_counter()
    run(
        [
            sys.executable,
            "-c",
            code,
            str(script),
            "--data",
            str(args.multi30k),
            "--work",
            str(out_dir / "work"),
            "--out",
            str(result),
            "--hyp-dir",
            str(out_dir / "hyps"),
            "--max-steps",
            str(args.steps),
            "--budget-min",
            "100000",
            "--no-greedy",
            "--threads",
            str(args.threads or 2),
            *(["--decode-limit", str(args.peer_decode_limit)] if args.peer_decode_limit else []),
            *(["--decode-limit", "1"] if args.no_decode else []),
        ],
        out_dir / "bench.log",
    )
    seconds = time.perf_counter() - started
    peer = json.loads(result.read_text(encoding="utf-8"))
    words = count_words(args.data / "raw" / "dev.de")
    tokens = peer["data"]["val_tgt_tokens"]
    train = peer["train_result"]
    return {
        "variant": "peer",
        "seconds_total": round(seconds, 1),
        "device": args.device,
        "tgt_tokens_per_s": [round(r["tgt_tokens_per_s"]) for r in train["log"]],
        "train_loss": {r["step"]: r["train_loss"] for r in train["log"]},
        "dev_ppl": {r["step"]: r["dev_ppl"] for r in train["dev"]},
        "dev_ppl_per_word": {
            r["step"]: round(math.exp(r["dev_nll"] * tokens / words), 3) for r in train["dev"]
        },
        "dev_loss_wrong_src": {r["step"]: r["dev_nll_wrong_src"] for r in train["dev"]},
        **(
            {}
            if args.no_decode
            else {
                "test": {
                    "test_2016_flickr.last": {
                        "sacrebleu": peer["decode"]["beam4"]["bleu_cased"]["score"]
                    }
                }
            }
        ),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        worker(json.loads(argv[1]))
        return 0
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
    parser.add_argument("--peers", type=Path, default=PEER_DIR, help="folder of multi30k_peer.py")
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "multi30k.yaml")
    parser.add_argument("--runs", type=Path, default=Path("bench/runs/learning"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "learning.json")
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
    args.extra = args.extra or args.data.parent / "extra"
    if args.make_extra:
        make_extra(args)
    base_model, base_train = scale_settings(args.config)
    base_train["checkpoint_interval"] = args.checkpoint_interval
    started = time.perf_counter()
    import torch

    report = {
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
    lock = threading.Lock()

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
        with (
            lock
        ):  # the file is complete after every variant, so a cut-off run keeps what it finished
            report["results"].append(result)
            report["wall_seconds"] = round(time.perf_counter() - started, 1)
            write_json(args.out, report)

    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(pool.map(one, args.variants))
    print(f"wrote {args.out}")
    return 1 if any("error" in r for r in report["results"]) else 0


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``path`` through a temporary file and a rename: never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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
