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

from transformer_core.model.config import experiment
from transformer_core.settings import TrainSettings, add_option, flag_values, flagged_fields

HELP = "Train a Transformer (Adam, warmup + inverse-sqrt schedule, label smoothing, DDP under torchrun)."


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `train`: one per flagged ``TrainSettings`` field, the recipe's and the
    runtime's. They parse to None when left out, so the experiment's preset decides
    (``TrainSettings.for_experiment``); the help shows base's value and big's where it differs."""
    base, big = (TrainSettings.for_experiment(experiment(name)) for name in ("base", "big"))
    for f in flagged_fields(TrainSettings):
        shown, other = getattr(base, f.name), getattr(big, f.name)
        if shown is None:
            shown = f.metadata["unset"]
        elif other != shown:
            shown = f"the experiment's: {shown} for base and Table 3's rows, {other} for big"
        add_option(parser, f, None, str(shown))


def train_config(args: argparse.Namespace) -> TrainSettings:
    """The ``TrainSettings`` of ``args.experiment`` with ``add_train_arguments``' flags where
    given."""
    return TrainSettings.for_experiment(
        experiment(args.experiment), **flag_values(TrainSettings, args)
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train", required=True, metavar="PREFIX", help="binarized training split")
    parser.add_argument(
        "--dev",
        metavar="PREFIX",
        help="binarized dev split: loss and perplexity (no label smoothing) every --dev-interval steps",
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
    add_train_arguments(parser)
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


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from transformer_core.model.config import parse_overrides
    from transformer_core.training.run_dir import RunFolder
    from transformer_core.training.session import train

    overrides = parse_overrides(args.set)
    cfg = train_config(args)
    folder = RunFolder(Path(args.out_dir), args.resume, args.restart_if_changed)
    train(args.train, folder, args.experiment, cfg, overrides, dev_prefix=args.dev)
    return 0
