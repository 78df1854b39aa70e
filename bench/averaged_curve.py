"""BLEU of a run's averaged checkpoints against its training time: the curve of a recipe that
averages its last checkpoints (config/multi30k_tiny.yaml: the last 10, one an epoch), taken
while the run trains, since a run keeps only the checkpoints it averages at its end.

    python -m bench.averaged_curve watch RUN_DIR --every 630 --last 10 --until 8000 --out SNAPS
    python -m bench.averaged_curve score SNAPS --run-dir RUN_DIR --spm SPM \
        --split test SRC REF --split dev SRC REF [translate's flags ...] --out CURVE.json

``watch`` polls the run folder and, at the first checkpoint at or after every ``--every``
steps, averages it with the ``--last`` - 1 before it (``transformer-core average``) into
SNAPS/avg_stepN.pt. ``score`` decodes every snapshot on each split with ``transformer-core
translate`` (the flags after the options are translate's) and scores it with ``transformer-core
score``, and writes one point per snapshot: the step, the run's training minutes at that step
(``metrics.jsonl``'s ``elapsed_s``) and every BLEU of each split.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.lib.hardware import cpu_kind, write_result
from transformer_core.model.checkpoint import list_checkpoints

SNAPSHOT = re.compile(r"avg_step([0-9]+)\.pt")
SCORES = ("bleu_lowercased_tokenized", "sacrebleu", "bleu_paper_style")


def _cli(*args: object) -> None:
    """``transformer-core ARGS`` in a subprocess; exits naming the command where it fails."""
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_core", *map(str, args)], capture_output=True, text=True
    )
    if proc.returncode:
        sys.exit(f"averaged_curve: {' '.join(map(str, args[:2]))} failed: {proc.stderr[-2000:]}")


def watch(run_dir: Path, every: int, last: int, until: int, out: Path, poll: float) -> None:
    """Average the last ``last`` checkpoints at every ``every`` steps until step ``until``."""
    out.mkdir(parents=True, exist_ok=True)
    target = every
    while target < until:
        kept = list_checkpoints(run_dir / "checkpoints")
        at = [step for step, _ in kept if step >= target]
        if at:
            window = [path for step, path in kept if step <= at[0]][-last:]
            _cli("average", "--checkpoints", *window, "--out", out / f"avg_step{at[0]}.pt")
            print(f"step {at[0]}: the average of {len(window)} checkpoints", flush=True)
            target += every
        else:
            time.sleep(poll)


def minutes_at(metrics: Path, step: int) -> float | None:
    """The run's training minutes at ``step`` (its last metrics line at or before it)."""
    seconds = None
    for line in metrics.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("step", 0) <= step and "elapsed_s" in record:
            seconds = record["elapsed_s"]
    return None if seconds is None else round(seconds / 60, 1)


def score(args: argparse.Namespace, translate: list[str]) -> None:
    snapshots = sorted(
        (int(m.group(1)), path)
        for path in args.snapshots.glob("avg_step*.pt")
        if (m := SNAPSHOT.fullmatch(path.name))
    )
    points = []
    for step, path in snapshots:
        point = {"step": step, "minutes": minutes_at(args.run_dir / "metrics.jsonl", step)}
        for name, source, reference in args.split:
            hyp = args.snapshots / f"{path.stem}.{name}.txt"
            _cli("translate", "--checkpoint", path, "--spm", args.spm, "--input", source,
                 "--output", hyp, *translate)  # fmt: skip
            scored = args.snapshots / f"{path.stem}.{name}.json"
            _cli("score", "--hyp", hyp, "--ref", reference, "--bootstrap-resamples", 0,
                 "--out", scored)  # fmt: skip
            result = json.loads(scored.read_text(encoding="utf-8"))
            point[name] = {key: round(result[key], 2) for key in SCORES}
        points.append(point)
        print(json.dumps(point), flush=True)
    write_result(args.out, {
        "bench": "averaged_curve", "cpu": cpu_kind(), "run_dir": str(args.run_dir),
        "splits": [list(map(str, split)) for split in args.split], "translate": translate,
        "points": points,
    })  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    w = sub.add_parser("watch", help="average the last checkpoints while the run trains")
    w.add_argument("run_dir", type=Path)
    w.add_argument("--every", type=int, required=True, help="steps between two averages")
    w.add_argument("--last", type=int, required=True, help="checkpoints averaged")
    w.add_argument("--until", type=int, required=True, help="the run's last step")
    w.add_argument("--out", type=Path, required=True, help="folder of the averages")
    w.add_argument("--poll", type=float, default=20.0, help="seconds between looks (default 20)")
    s = sub.add_parser("score", help="decode and score every average; the rest: translate's")
    s.add_argument("snapshots", type=Path)
    s.add_argument("--run-dir", type=Path, required=True)
    s.add_argument("--spm", required=True)
    s.add_argument("--split", nargs=3, action="append", required=True,
                   metavar=("NAME", "SOURCE", "REFERENCE"))  # fmt: skip
    s.add_argument("--out", required=True)
    args, translate = parser.parse_known_args(argv)
    if not args.run_dir.is_dir():  # watch would wait for its checkpoints forever
        parser.error(f"{args.run_dir}: no such run folder")
    if args.action == "watch":
        if translate:
            parser.error(f"unrecognized arguments: {' '.join(translate)}")
        if min(args.every, args.last, args.until) < 1:
            parser.error("--every, --last and --until must be at least 1")
        watch(args.run_dir, args.every, args.last, args.until, args.out, args.poll)
    else:
        score(args, translate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
