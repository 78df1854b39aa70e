"""``transformer-core train``: train one model (paper section 5), alone or under torchrun.

    transformer-core train --train data/bin/train --dev data/bin/dev --out-dir runs/base --experiment base
    torchrun --nproc_per_node 8 -m transformer_core train ...      # the same, on 8 GPUs

Every option left out takes the paper's value (steps from the experiment:
100K, 300K for big). Progress goes to stderr every --log-interval steps
(redirect it to keep a log file); RUN_DIR gets checkpoints/, metrics.jsonl,
summary.json and last.pt.
"""

from __future__ import annotations

import argparse

from transformer_core.commands import add_compile_argument, add_device_arguments, seed

HELP = "Train a Transformer (Adam, warmup + inverse-sqrt schedule, label smoothing, DDP under torchrun)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Help shows the defaults from their one source: TrainConfig (config.py is torch-free).
    from transformer_core.config import TrainConfig

    paper, big = TrainConfig(), TrainConfig.for_experiment("big")
    parser.add_argument("--train", required=True, metavar="PREFIX", help="binarized training split")
    parser.add_argument(
        "--dev",
        metavar="PREFIX",
        help="binarized dev split: loss and perplexity (no label smoothing) at each checkpoint",
    )
    parser.add_argument(
        "--out-dir", required=True, metavar="RUN_DIR", help="run directory to write"
    )
    parser.add_argument(
        "--experiment",
        default="base",
        metavar="NAME",
        help="preset or Table 3 row: base, big, A1..E (default: base)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a model config field, e.g. --set d_model=256 (repeatable)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help=f"optimizer steps (default: the experiment's, {paper.steps:,} base, {big.steps:,} big)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        help=f"tokens per micro-batch per device, per side, padding included (default: {paper.max_tokens})",
    )
    parser.add_argument(
        "--tokens-per-step",
        type=int,
        help="target tokens per optimizer step over all devices; gradients are accumulated "
        f"over ceil(this / (max-tokens x devices)) micro-batches (default: {paper.tokens_per_step})",
    )
    parser.add_argument(
        "--warmup", type=int, help=f"warmup steps of the schedule (default: {paper.warmup})"
    )
    parser.add_argument(
        "--lr-scale",
        type=float,
        help="multiplies the paper's learning rate d_model^-0.5 min(step^-0.5, step warmup^-1.5) "
        f"(default: {paper.lr_scale}, the paper; short smoke runs of tiny models may use another)",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        metavar="K",
        help=f"checkpoint every K steps (default: {paper.checkpoint_interval}; "
        f"{big.checkpoint_interval} for big), and always at the end",
    )
    parser.add_argument(
        "--keep-last",
        type=int,
        metavar="M",
        help=f"keep the newest M checkpoints (default: {paper.keep_last}; {big.keep_last} for big)",
    )
    parser.add_argument(
        "--seed",
        type=seed,
        help=f"random seed (default: {paper.seed}; rank r uses seed + r for dropout)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from RUN_DIR's newest checkpoint (a finished run is left as it is, "
        "its summary.json, last.pt and metrics.jsonl rewritten from its last checkpoint if "
        "any is missing); a run made with other settings is an error",
    )
    parser.add_argument(
        "--restart-if-changed",
        action="store_true",
        help="with --resume: move a run made with other settings (model, data, trajectory) "
        "to RUN_DIR/superseded/N/ and start over instead of stopping (the workflow's mode)",
    )
    parser.add_argument(
        "--log-interval",
        type=int,
        metavar="L",
        help=f"log every L steps (default: {paper.log_interval})",
    )
    add_device_arguments(parser, None, "; training keeps fp32 master weights, loss and optimizer")
    add_compile_argument(
        parser, "the encoder and decoder stacks (the fused loss stays eager)", default=None
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.config import TrainConfig, parse_overrides
    from transformer_core.train import train

    overrides = parse_overrides(args.set)
    cfg = TrainConfig.for_experiment(
        args.experiment,
        steps=args.steps,
        max_tokens=args.max_tokens,
        tokens_per_step=args.tokens_per_step,
        warmup=args.warmup,
        lr_scale=args.lr_scale,
        checkpoint_interval=args.checkpoint_interval,
        keep_last=args.keep_last,
        seed=args.seed,
        log_interval=args.log_interval,
        precision=args.precision,
        device=args.device,
        num_threads=args.num_threads,
        compile=args.compile,
    )
    train(
        args.train,
        args.out_dir,
        args.experiment,
        cfg,
        overrides,
        dev_prefix=args.dev,
        resume=args.resume,
        restart_if_changed=args.restart_if_changed,
    )
    return 0
