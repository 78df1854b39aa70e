"""Table 4's recipe on the NLTK sample, chosen on its dev split: one variant per call.

Each call prepares the split the workflow uses (``read_nltk_sample``: the last 20 files test, the
20 before them dev), linearizes the trees (``--linearization``: ``xx``, ``tags`` or ``words``),
trains a joint sentencepiece BPE model, binarizes, trains the 4-layer parsing preset at widths / 8 (d_model 128) with
``transformer-core train``, decodes the dev sentences, repairs the trees and scores them with
EVALB, all through the project's commands. ``--from NAME`` decodes an earlier variant's run
again (other beam, alpha, checkpoint averaging, or an earlier checkpoint with ``--checkpoint``)
without training; ``--train-only`` trains and stops. The schedule does not depend on the run's
length, so the checkpoint at step S of a long run is the run of S steps: one long run with
``--checkpoint-interval`` and ``--keep-last`` large enough gives the learning curve.

Per variant it appends one JSON line to ``--out``: the settings, dev F1 / recall / precision,
the last dev loss line (``dev loss with wrong sources``: the loss with each batch's sources
rotated; a model that ignores its input shows no gap), the training and decoding seconds and
the repairs ``treebank delinearize`` made.

    python -m bench.table4_dev T_normal --linearization tags --no-split-by-unicode-script --set init=normal
    python -m bench.table4_dev T_b21_a2 --from T_normal --beam 21 --alpha 2.0
    python -m bench.table4_dev T_4000 --from T_normal --checkpoint checkpoints/step_0004000.pt

``bench/gpu/table4_gpu_sweep.sh`` runs a series of variants side by side on one GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.lib.hardware import cpu_model, result_path, write_result
from bench.lib.shared_data import SHARED_DATA
from transformer_core.errors import UserError
from transformer_core.parsing.corpora import read_nltk_sample
from transformer_core.parsing.trees import LINEARIZATIONS, linearize

SHAPE = ("d_model=128", "d_ff=256", "d_k=16", "d_v=16")  # nltk_parsing.yaml's widths / 8
CLI = [sys.executable, "-m", "transformer_core"]
TRAINING = {"split_by_unicode_script", "vocab_size", "steps", "tokens_per_step", "max_tokens",
            "warmup", "lr_scale", "cooldown", "dev_interval", "set", "seed", "threads",
            "checkpoint_interval", "keep_last", "train_only"}  # fmt: skip


def run(command: list[str], log: Path) -> None:
    """Run a project command with its output in ``log``; a failure names the command and log."""
    with open(log, "w") as handle:
        if subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT).returncode:
            raise SystemExit(f"{' '.join(command[2:4])} failed: see {log}")


def prepare(data: Path, args: argparse.Namespace) -> None:
    """The split's words and linearized trees, the BPE model and the binarized splits."""
    data.mkdir(parents=True, exist_ok=True)
    splits = read_nltk_sample(args.zip, 20)
    for split in ("train", "dev"):
        trees = splits[split]
        lines = {
            "words": [" ".join(t.words()) for t in trees],
            "tree": [" ".join(linearize(t, args.linearization)) for t in trees],
        }
        if split == "dev":
            lines["gold"] = [str(t) for t in trees]
            lines["tags"] = [" ".join(t.tags()) for t in trees]
        for ext, text in lines.items():
            (data / f"{split}.{ext}").write_text("".join(line + "\n" for line in text))
    script = [
        "--split-by-unicode-script"
        if args.split_by_unicode_script
        else "--no-split-by-unicode-script"
    ]
    run(
        [*CLI, "spm", "train", "--input", str(data / "train.words"), str(data / "train.tree"),
         "--vocab-size", str(args.vocab_size), "--model-prefix", str(data / "spm"), *script],
        data / "spm.log",
    )  # fmt: skip
    for split in ("train", "dev"):
        run(
            [*CLI, "binarize", "--spm", str(data / "spm.model"), "--src", str(data / f"{split}.words"),
             "--tgt", str(data / f"{split}.tree"), "--out-prefix", str(data / split)],
            data / f"binarize_{split}.log",
        )  # fmt: skip


def train(data: Path, out: Path, args: argparse.Namespace) -> None:
    sets = [arg for value in (*SHAPE, *args.set) for arg in ("--set", value)]
    run(
        [*CLI, "train", "--train", str(data / "train"), "--dev", str(data / "dev"),
         "--out-dir", str(out / "run"), "--experiment", "parsing", *sets,
         "--steps", str(args.steps), "--tokens-per-step", str(args.tokens_per_step),
         "--max-tokens", str(args.max_tokens), "--warmup", str(args.warmup),
         "--lr-scale", str(args.lr_scale), "--cooldown", str(args.cooldown),
         "--checkpoint-interval", str(args.checkpoint_interval), "--keep-last", str(args.keep_last),
         *(["--dev-interval", str(args.dev_interval)] if args.dev_interval else []),
         "--seed", str(args.seed), "--log-interval", "100",
         "--num-threads", str(args.threads), "--device", args.device, "--precision", "auto",
         "--compile", "off"],
        out / "train.log",
    )  # fmt: skip


def evaluate(data: Path, run_dir: Path, out: Path, args: argparse.Namespace) -> dict:
    """Dev F1 of ``--checkpoint`` (the last by default) or of the average of the last ``--average``."""
    checkpoint = run_dir / args.checkpoint
    if args.average:
        checkpoint = out / "averaged.pt"
        run(
            [*CLI, "average", "--run-dir", str(run_dir), "--last", str(args.average),
             "--out", str(checkpoint)],
            out / "average.log",
        )  # fmt: skip
    run(
        [*CLI, "translate", "--checkpoint", str(checkpoint), "--spm", str(data / "spm.model"),
         "--input", str(data / "dev.words"), "--output", str(out / "dev.txt"),
         *(["--tree-constraint", args.linearization] if args.tree_constraint else []),
         "--beam", str(args.beam), "--alpha", str(args.alpha), "--max-len-a", "1.0",
         "--max-len-b", "300", "--num-threads", "2", "--device", args.device, "--compile", "off"],
        out / "translate.log",
    )  # fmt: skip
    run(
        [*CLI, "treebank", "delinearize", "--words", str(data / "dev.words"),
         "--pred", str(out / "dev.txt"), "--tags", str(data / "dev.tags"),
         "--out", str(out / "dev.tree"), "--linearization", args.linearization],
        out / "delinearize.log",
    )  # fmt: skip
    run(
        [*CLI, "evalb", "--gold", str(data / "dev.gold"), "--test", str(out / "dev.tree"),
         "--out", str(out / "dev.evalb"), "--json", str(out / "dev.json")],
        out / "evalb.log",
    )  # fmt: skip
    scores = json.loads((out / "dev.json").read_text())["all"]
    return {key: round(scores[key] or 0.0, 2) for key in ("f1", "recall", "precision")}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the variant's folder under --work")
    parser.add_argument("--work", type=Path, default=Path("table4_dev"))
    parser.add_argument(
        "--out", type=Path, help="default: bench/results/HARDWARE/table4_dev_ablation.jsonl"
    )
    parser.add_argument("--zip", type=Path, default=SHARED_DATA / "ptb" / "nltk_treebank.zip")
    parser.add_argument("--from", dest="source", help="decode this variant's run again")
    parser.add_argument(
        "--linearization", choices=LINEARIZATIONS, default="xx",
        help="with --from: the source's (read from its variant.json)",
    )  # fmt: skip
    parser.add_argument(
        "--split-by-unicode-script", action=argparse.BooleanOptionalAction, default=True
    )
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--tokens-per-step", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--lr-scale", type=float, default=0.2)
    parser.add_argument("--cooldown", type=int, default=0, help="train --cooldown (0: none)")
    parser.add_argument(
        "--set", action="append", default=[], help="model override, e.g. init=normal"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--average", type=int, default=0, help="average the last N checkpoints")
    parser.add_argument("--checkpoint-interval", type=int, default=100)
    parser.add_argument("--keep-last", type=int, default=5)
    parser.add_argument(
        "--dev-interval", type=int, default=0, help="train --dev-interval (0: every checkpoint)"
    )
    parser.add_argument(
        "--checkpoint", default="last.pt", help="the run's checkpoint to decode, e.g. "
        "checkpoints/step_0004000.pt (with --from)"
    )  # fmt: skip
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--tree-constraint", action="store_true", help="decode with translate --tree-constraint"
    )
    parser.add_argument("--train-only", action="store_true", help="train, decode nothing")
    args = parser.parse_args()
    args.out = args.out or result_path("table4_dev_ablation", args.device, ".jsonl")
    return args


def dev_line(log: Path, checkpoint: str) -> str:
    """The last dev loss line of the training ``log``, or that of ``checkpoint``'s step."""
    dev_lines = [line for line in log.read_text().splitlines() if "dev loss" in line]
    if checkpoint.startswith("checkpoints/step_"):  # the dev line of that step
        step = f"step {int(checkpoint.split('_')[1].split('.')[0])} |"
        dev_lines = [line for line in dev_lines if step in line] or ["(no dev line at " + step]
    return dev_lines[-1]


def main() -> None:
    args = parse_args()
    out = args.work / args.name
    out.mkdir(parents=True, exist_ok=True)
    source = args.work / (args.source or args.name)
    if args.source and not (source / "run" / args.checkpoint).is_file():
        raise SystemExit(f"--from {args.source}: no {args.checkpoint} in {source / 'run'}")
    settings = source / "variant.json"  # how the run was made: its linearization for decoding
    if args.source and settings.is_file():
        args.linearization = json.loads(settings.read_text())["linearization"]
    started = time.monotonic()
    if not args.source:
        settings.write_text(json.dumps(vars(args), default=str))
        prepare(source / "data", args)
        train(source / "data", out, args)
        if args.train_only:
            return
    trained = time.monotonic()
    scores = evaluate(source / "data", source / "run", out, args)
    result = {
        "name": args.name,
        **{
            k: v
            for k, v in vars(args).items()
            if k not in ("work", "out", "zip") and not (args.source and k in TRAINING)
        },  # a run decoded again (--from) records the decoding only: its training is its source's
        "work": str(args.work),
        **scores,
        "dev": dev_line(source / "train.log", args.checkpoint),
        "train_s": round(trained - started),
        "decode_s": round(time.monotonic() - trained),
        "repairs": (out / "delinearize.log").read_text().strip(),
        "cpu": cpu_model(),
    }
    print(json.dumps(result))
    write_result(args.out, result, append=True)


if __name__ == "__main__":
    try:
        main()
    except UserError as err:  # a missing or unreadable treebank zip
        raise SystemExit(str(err)) from None
