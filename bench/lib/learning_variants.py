"""The runs of ``bench.bench_learning``: the ablation's starting recipe and its variants, one
project variant trained, decoded and scored, and the Hugging Face Marian peer run beside it."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
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
    from transformer_core.workflow_plan.scaling import scaled_model_overrides

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

    from transformer_core.model.transformer import Transformer
    from transformer_core.settings import TrainSettings
    from transformer_core.training.run_dir import RunFolder
    from transformer_core.training.session import train

    if spec.get("embedding_std"):
        reset = Transformer.reset_parameters

        def reset_with_embedding(self: Transformer) -> None:
            reset(self)
            torch.nn.init.normal_(self.embedding.weight, std=spec["embedding_std"])

        Transformer.reset_parameters = reset_with_embedding
    cfg = TrainSettings(**spec["train"])
    train(
        spec["train_prefix"],
        RunFolder(spec["out_dir"], resume=True, restart_if_changed=True),
        "base",
        cfg,
        model_overrides=spec["model"],
        dev_prefix=spec["dev_prefix"],
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


def variant_spec(name: str, args: argparse.Namespace, base_model: dict, base_train: dict) -> dict:
    """What ``worker`` trains for variant ``name`` (``NAME`` or ``NAME@SEED``): START and the
    variant's changes over the configuration's settings, its data, its run folder."""
    base_name, _, seed = name.partition("@")
    variant = VARIANTS[base_name]
    step_scale = variant.get("step_scale", 1)
    train_prefix = (
        args.extra / "bin_nofilter" / "train"
        if variant.get("train_data") == "nofilter"
        else args.data / "bin" / "train"
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
    return {
        "train": train_settings,
        "model": {**base_model, **variant.get("model", {})},
        "embedding_std": variant.get("embedding_std"),
        "train_prefix": str(train_prefix),
        "dev_prefix": str(args.data / "bin" / "dev"),
        "out_dir": str(args.runs / name),
    }


def training_record(name: str, args: argparse.Namespace, run_dir: Path, seconds: float) -> dict:
    """A trained variant's row before decoding: its settings, speed, train loss and dev
    perplexity (per piece and per word) and dev loss with wrong sources, read from its
    ``metrics.jsonl``."""
    base_name, _, seed = name.partition("@")
    metrics = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    train_records = [m for m in metrics if m["event"] == "train"]
    dev_records = [m for m in metrics if m["event"] == "dev"]
    words = count_words(args.data / "raw" / "dev.de")
    tokens = dev_tokens(args.data / "bin" / "dev")
    return {
        "variant": name,
        "settings": {**START, **VARIANTS[base_name], **({"seed": int(seed)} if seed else {})},
        "train_seconds_with_dev_evals": round(seconds, 1),
        "tgt_tokens_per_s": [round(r["tgt_tokens_per_s"]) for r in train_records],
        "train_loss": {r["step"]: round(r["loss"], 4) for r in train_records},
        "dev_ppl": {r["step"]: round(r["dev_ppl"], 3) for r in dev_records},
        "dev_ppl_per_word": {
            r["step"]: round(math.exp(r["dev_loss"] * tokens / words), 3) for r in dev_records
        },
        "dev_loss_wrong_src": {r["step"]: round(r["dev_loss_wrong_src"], 4) for r in dev_records},
    }


def decode(
    args: argparse.Namespace, run_dir: Path, checkpoint: Path, split: tuple, tag: str
) -> dict:
    """``checkpoint`` decoding ``split`` (source, reference) with beam 4, scored as ``tag``."""
    source, ref = split
    hyp = run_dir / "hyp" / f"{tag}.txt"
    hyp.parent.mkdir(parents=True, exist_ok=True)
    log = run_dir / "bench.log"
    run(
        [sys.executable, "-m", "transformer_core", "translate", "--checkpoint", str(checkpoint),
         "--spm", str(args.data / "spm.model"), "--input", str(source), "--output", str(hyp),
         "--beam", "4", "--alpha", str(args.alpha), "--max-len-a", "1.0", "--max-len-b", "50",
         "--device", args.device, "--precision", args.decode_precision,
         *(["--num-threads", str(args.threads)] if args.threads else [])],
        log,
    )  # fmt: skip
    return score(hyp, ref, run_dir / "hyp" / f"{tag}.json", log)


def averaged_checkpoints(run_dir: Path) -> dict[int, Path]:
    """The checkpoint of every window of ``WINDOWS``: the last, and the averages of the last
    2, 3 and 5 (``transformer-core average``)."""
    checkpoints = {}
    for window in WINDOWS:
        if window == 1:
            checkpoints[window] = run_dir / "last.pt"
            continue
        checkpoints[window] = run_dir / f"avg{window}.pt"
        run(
            [sys.executable, "-m", "transformer_core", "average", "--run-dir", str(run_dir),
             "--last", str(window), "--out", str(checkpoints[window])],
            run_dir / "bench.log",
        )  # fmt: skip
    return checkpoints


def project_variant(
    name: str, args: argparse.Namespace, base_model: dict, base_train: dict
) -> dict[str, Any]:
    """Train variant ``name`` in a process of its own, then (unless ``--no-decode``) decode
    the val set with every window of checkpoints, choose the best (val only), and decode the
    test sets with it and with the last checkpoint."""
    spec = variant_spec(name, args, base_model, base_train)
    run_dir = Path(spec["out_dir"])
    started = time.perf_counter()
    run(
        [sys.executable, "-m", "bench.bench_learning", "worker", json.dumps(spec)],
        run_dir / "bench.log",
    )
    result = training_record(name, args, run_dir, time.perf_counter() - started)
    if args.no_decode:
        return result
    data, extra = args.data, args.extra
    checkpoints = averaged_checkpoints(run_dir)
    dev = (data / "prepared" / "dev.src", data / "raw" / "dev.de")
    val = {w: decode(args, run_dir, checkpoints[w], dev, f"val.avg{w}") for w in WINDOWS}
    chosen = max(WINDOWS, key=lambda w: (val[w]["sacrebleu"], -w))
    tests = {
        "test_2016_flickr": (data / "prepared" / "test.src", data / "raw" / "test.de"),
        "test_2017_flickr": (extra / "test17.src", extra / "test17.de"),
    }
    test = {}
    for window in sorted({1, chosen}):
        for test_name, split in tests.items():
            if split[0].exists():
                tag = f"{test_name}.avg{window}"
                test[tag] = decode(args, run_dir, checkpoints[window], split, tag)
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
    script = args.peer_script
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
