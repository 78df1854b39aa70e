"""Two versions of the project's beam search, alternating in one process, on one CPU thread.

Separate runs of ``bench.bench_ctranslate2`` on a shared machine drift by more than a change
of 5 to 10% (docs/ctranslate2.md). Here the working tree's ``transformer_core`` runs beside
the package of git revision ``--old``, extracted and imported under another name; both decode
the same batches with the same weights, in alternating order, round after round, and each
round's time of the new version is divided by the old one's. Neighbouring runs see the same
machine, so the ratios resolve what separate runs do not. The JSON gives every round's times
and ratio, their median, the median target tokens per second of each version, and how many
outputs are identical.

    python -m bench.bench_paired --old HEAD~1 --checkpoint runs/en_de/base/averaged.pt \\
        --spm data/en_de/spm.model --source data/en_de/raw/test.en [--batching tok4096]
    python -m bench.bench_paired --old HEAD~1 --shape base   # random weights, outputs forced

With ``--checkpoint``: the sentences of ``--source`` sorted by length, in batches of 32
(``b32``) or in ``translate``'s 4,096-token batches (``tok4096``). Without: ``--shape``
(``bench.lib.shapes``) with random weights and ``bench_ctranslate2``'s 200 random sources,
every output forced to 30 tokens. Beam 4, alpha 0.6, maximum length source + 50, as
``bench_ctranslate2``. Writes bench/results/HARDWARE/decode_paired_versions.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch

from bench.lib.ctranslate2_runners import (
    BASE_LENGTH,
    Batches,
    base_batches,
    our_runner,
    package_module,
)
from bench.lib.hardware import cpu_model, result_path, write_result
from bench.lib.shapes import BATCH, DECODE_SHAPES, decoding_config
from transformer_core.errors import UserError
from transformer_core.files import check_input_file

ROOT = Path(__file__).resolve().parents[1]
OLD = "transformer_core_old"  # the name the --old version is imported under


def extract_package(revision: str, into: Path, name: str = OLD) -> str:
    """``transformer_core`` of git ``revision`` as package ``name`` under ``into``, its imports of
    itself renamed; ``into`` goes first on ``sys.path``. Returns the revision's commit."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "transformer_core"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        message = archive.stderr.decode(errors="replace").strip()
        raise SystemExit(f"bench_paired: --old {revision}: git archive failed: {message}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    package = into / name
    (into / "transformer_core").rename(package)
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\btransformer_core\b", name, text), encoding="utf-8")
    sys.path.insert(0, str(into))
    return commit.stdout.strip()


def models(args) -> tuple[torch.nn.Module, torch.nn.Module, Batches]:
    """The model of each version (new, old), the same weights, and the batches to decode."""
    import transformer_core.model.transformer as new_model

    old_model = package_module(OLD, "model.transformer", "model")
    if args.checkpoint:
        from transformer_core.decoding.translate import load_translation_model, make_batches

        new, sp = load_translation_model(args.checkpoint, args.spm, torch.device("cpu"))
        lines = Path(args.source).read_text(encoding="utf-8").splitlines()
        sources = [sp.encode(line) for line in lines]
        if args.batching == "b32":
            order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
            groups = [order[k : k + BATCH] for k in range(0, len(order), BATCH)]
        else:
            groups = make_batches([len(s) + 1 for s in sources], 4096)
        batches = [[sources[i] for i in group] for group in groups]
    else:
        torch.manual_seed(0)
        new = new_model.Transformer(decoding_config(args.shape)).eval()
        batches = base_batches(new.cfg.vocab_size)
    old_config = package_module(OLD, "model.config", "config").ModelConfig
    known = {field.name for field in dataclasses.fields(old_config)}  # fields the old version has
    old = old_model.Transformer(
        old_config(**{k: v for k, v in new.cfg.to_dict().items() if k in known})
    ).eval()
    old.load_state_dict(new.state_dict())
    return new, old, batches


def paired(runners: dict, batches: Batches, rounds: int) -> tuple[dict, dict]:
    """Each runner's seconds per round (after a warm-up on two batches), in alternating order,
    and its outputs of the last round."""
    seconds = {name: [] for name in runners}
    outputs = {}
    for run in runners.values():
        run(batches[:2])
    for r in range(rounds):
        names = list(runners) if r % 2 == 0 else list(runners)[::-1]
        for name in names:
            start = time.perf_counter()
            outputs[name] = runners[name](batches)
            seconds[name].append(round(time.perf_counter() - start, 3))
            print(f"round {r + 1}/{rounds} {name}: {seconds[name][-1]} s", flush=True)
    return seconds, outputs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the git revision to compare against")
    parser.add_argument("--checkpoint", help="a trained checkpoint (averaged.pt)")
    parser.add_argument("--spm", help="its sentencepiece model (with --checkpoint)")
    parser.add_argument("--source", help="sentences to translate, one a line (with --checkpoint)")
    parser.add_argument("--batching", choices=["b32", "tok4096"], default="b32")
    parser.add_argument(
        "--shape", choices=sorted(DECODE_SHAPES), default="base", help="no --checkpoint"
    )
    parser.add_argument("--precision", choices=["fp32", "bf16", "int8"], default="fp32")
    parser.add_argument("--rounds", type=int, default=6, help="timed runs of each (default 6)")
    parser.add_argument("--out", default=str(result_path("decode_paired_versions")))
    args = parser.parse_args(argv)
    if args.checkpoint and not (args.spm and args.source):
        parser.error("--checkpoint needs --spm and --source")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        for flag in ("checkpoint", "spm", "source"):
            if getattr(args, flag):
                check_input_file(getattr(args, flag), f"--{flag}")
    except UserError as err:
        parser.error(str(err))
    return args


def summary(args, old_commit: str, batches: Batches, seconds: dict, outputs: dict) -> dict:
    """The result: every round's seconds and ratio, their medians, identical outputs."""
    ratios = [n / o for n, o in zip(seconds["new"], seconds["old"], strict=True)]
    tokens = {name: sum(len(o) for o in out) for name, out in outputs.items()}
    return {
        "cpu": cpu_model(),
        "threads": 1,
        "torch": torch.__version__,
        "old": args.old,
        "old_commit": old_commit,
        "new": "working tree",
        "benchmark": args.batching if args.checkpoint else f"{args.shape}, forced {BASE_LENGTH}",
        "checkpoint": args.checkpoint,
        "precision": args.precision,
        "batches": len(batches),
        "sentences": sum(len(b) for b in batches),
        "seconds": seconds,
        "ratios_new_over_old": [round(r, 3) for r in ratios],
        "median_ratio": round(statistics.median(ratios), 3),
        "median_target_tokens_per_s": {
            name: round(tokens[name] / statistics.median(seconds[name]), 1) for name in seconds
        },
        "identical_outputs": sum(
            a == b for a, b in zip(outputs["new"], outputs["old"], strict=True)
        ),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        old_commit = extract_package(args.old, Path(tmp))
        new, old, batches = models(args)
        forced = None if args.checkpoint else BASE_LENGTH
        runners = {
            "new": our_runner(new, args.precision, forced),
            "old": our_runner(old, args.precision, forced, package=OLD),
        }
        seconds, outputs = paired(runners, batches, args.rounds)
    result = summary(args, old_commit, batches, seconds, outputs)
    print(json.dumps({k: v for k, v in result.items() if k != "seconds"}, indent=1))
    write_result(args.out, result, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
