"""A training run's directory: its files, and whether a session starts, resumes or stops.

``RUN_DIR`` holds ``checkpoints/step_NNNNNNN.pt`` (every ``checkpoint_interval`` steps
and at the last step; the newest ``keep_last`` are kept), ``metrics.jsonl`` (one JSON
object per log line or dev evaluation), ``summary.json`` (written last: its presence
means the run finished), ``last.pt`` (the final checkpoint), ``train.log`` (every session's
log lines, appended: the workflow's own log of the job is replaced when Snakemake reruns it)
and ``train.lock`` (held by the session training it: ``run_lock``). A run that cannot continue with new settings is
moved to ``superseded/N/`` (``supersede``).

Every checkpoint also holds the run's metrics lines up to its step (``metrics_log``), so
the checkpoints alone rebuild the run's outputs: a resumed session rewrites
``metrics.jsonl`` from the checkpoint it continues (``metrics_log.MetricsLog.restore``), and a
finished run missing any of ``summary.json``, ``last.pt`` or ``metrics.jsonl`` (Snakemake
deletes a job's outputs before it reruns it, e.g. after its inputs were rebuilt) is
resumed at its last step, which writes all three again without training another step.

``RunDir`` is a session's hold on the folder, in the order ``train`` uses it, so that a
mistake fails before the data is read and the device is set up:

1. ``RunDir(out_dir, resume, restart_if_changed)`` (before the data is read) checks the
   flags against what the folder holds and loads the newest checkpoint that can be resumed;
2. ``decide`` (once the model config is known from the data) is the resume decision, a
   ``Start``: nothing to do (``finished``), ``resume``, ``start_over`` after moving the old
   run aside, or ``fresh``;
3. ``begin`` carries it out on the device's side: the old run moved aside, ``metrics.jsonl``
   as it was at the resumed checkpoint;
4. rank 0 then appends to the ``MetricsLog``, ``save``s each checkpoint and, at the end,
   ``finish``es (``last.pt`` and the session's ``summary``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from transformer_core.errors import UserError
from transformer_core.files import atomic_write_text
from transformer_core.model.checkpoint import (
    checkpoint_path,
    clean_temporaries,
    link_or_copy,
    list_checkpoints,
    newest_loadable,
    prune_checkpoints,
    save_checkpoint,
    tensor_bytes,
)
from transformer_core.model.config import ModelConfig
from transformer_core.settings import TrainSettings
from transformer_core.training import distributed
from transformer_core.training.distributed import DistContext
from transformer_core.training.metrics_log import MetricsLog, metrics_whole

# What a checkpoint needs beyond the model to be continued exactly.
TRAINING_STATE = ("train_config", "optimizer", "step", "rng", "data", "token_counts")


@dataclass(frozen=True)
class RunPaths:
    """The files of a run directory."""

    out_dir: Path

    @property
    def checkpoints(self) -> Path:
        return self.out_dir / "checkpoints"

    @property
    def metrics(self) -> Path:
        return self.out_dir / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.out_dir / "summary.json"

    @property
    def last(self) -> Path:
        return self.out_dir / "last.pt"

    @property
    def tensorboard(self) -> Path:
        return self.out_dir / "tensorboard"

    @property
    def log(self) -> Path:
        return self.out_dir / "train.log"


def settings_mismatch(
    payload: dict,
    model_cfg: ModelConfig,
    cfg: TrainSettings,
    spm_sha256: str | None = None,
    fixed_shapes: bool = False,
) -> str | None:
    """Why a run's checkpoint cannot be continued with these settings, and micro-batches of
    fixed shapes or not (``data.shapes``, as ``device.use_fixed_shapes`` resolves them);
    None when it can."""
    stored_spm = payload.get("spm_sha256")
    if stored_spm and spm_sha256 and stored_spm != spm_sha256:
        return (
            f"its data was encoded with another sentencepiece model "
            f"({payload.get('spm_model', '?')}, sha256 {stored_spm[:12]}; "
            f"this data's: {spm_sha256[:12]})"
        )
    # Through ModelConfig: a key added since the checkpoint was written takes its default.
    stored_model = ModelConfig.from_dict(payload["model_config"]).to_dict()
    diff = sorted(k for k, v in model_cfg.to_dict().items() if stored_model.get(k) != v)
    if diff:
        return (
            f"its model config differs in {', '.join(diff)} "
            f"({', '.join(f'{k}={stored_model.get(k)!r}' for k in diff)})"
        )
    # A setting added since the checkpoint was written takes its default.
    stored = {**TrainSettings(steps=cfg.steps).to_dict(), **payload["train_config"]}
    diff = [k for k in TrainSettings.trajectory() if stored.get(k) != getattr(cfg, k)]
    if diff:
        return f"it was trained with {', '.join(f'{k}={stored.get(k)!r}' for k in diff)}"
    stored_fixed = bool(payload.get("data", {}).get("fixed_shapes", False))  # absent: exact
    if stored_fixed != fixed_shapes:
        shapes = {True: "fixed", False: "exact"}
        return (
            f"its micro-batches were collated to {shapes[stored_fixed]} shapes, this run's would "
            f"be {shapes[fixed_shapes]} (batch_shapes {cfg.batch_shapes}; auto is fixed where "
            "the model is compiled)"
        )
    if cfg.cooldown and stored["steps"] != cfg.steps:
        return (
            f"its learning rate cools down over the last {cfg.cooldown} of {stored['steps']} "
            f"steps, not of --steps {cfg.steps}"
        )
    if int(payload["step"]) > cfg.steps:
        return f"it is at step {payload['step']}, beyond --steps {cfg.steps}"
    return None


def _identity(folder: Path) -> tuple[int, int] | None:
    """The device and inode of ``folder``, None where it is gone."""
    try:
        stat = folder.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def written_by(payload: dict | None) -> int | None:
    """How many ranks wrote a run's checkpoint ``payload`` (None: no checkpoint)."""
    return None if payload is None else int(payload.get("data", {}).get("world_size", 1))


def ranks_mismatch(payload: dict, world_size: int, cut: dict[str, int] | None) -> str | None:
    """Why a checkpoint written by another number of ranks cannot be continued by
    ``world_size`` ranks that would cut ``cut`` (``micro_batch.planned_cut``; None where the
    ranks are the same): they must cut the micro-batches its ranks cut. None when they can."""
    ranks = written_by(payload)
    if cut is None or ranks == world_size:
        return None
    data = {"fixed_shapes": False, **payload["data"]}  # exact before fixed shapes existed
    differs = [
        f"{key.replace('_', ' ')} {data.get(key, 'unrecorded')} against {value}"
        for key, value in cut.items()
        if data.get(key) != value
    ]
    if not differs:
        return None
    return (
        f"it was written by {ranks} rank(s), this run has {world_size}, and they cut other "
        f"micro-batches ({'; '.join(differs)})"
    )


def supersede(paths: RunPaths) -> Path:
    """Move a run's checkpoints, metrics, summary, last.pt, TensorBoard curves and log into
    ``superseded/N/``; returns it.

    Nothing is deleted: a run made with other settings stays readable beside the new one.
    """
    root = paths.out_dir / "superseded"
    number = 1 + max((int(p.name) for p in root.glob("*") if p.name.isdigit()), default=0)
    target = root / str(number)
    target.mkdir(parents=True)
    run_files = (paths.checkpoints, paths.metrics, paths.summary, paths.last, paths.tensorboard)
    for path in (*run_files, paths.log):
        if path.exists():
            path.rename(target / path.name)
    return target


@dataclass(frozen=True)
class RunFolder:
    """Where a run lives, and what a session may do with a run already there: with ``resume``,
    continue it (one made with other settings is an error); with ``restart_if_changed`` as
    well, move that one aside and start over (the workflow's mode, so that editing the
    configuration retrains). Without ``resume`` the folder must hold no checkpoint."""

    out_dir: Path
    resume: bool = False
    restart_if_changed: bool = False


@dataclass(frozen=True)
class PreviousRun:
    """What ``RunDir`` found in the folder when it opened it."""

    paths: RunPaths
    checkpoints: list[tuple[int, Path]]  # (step, path), oldest first; the newest is ``payload``'s
    payload: dict | None  # the newest checkpoint that loads (with ``resume`` only), else None


def _open(paths: RunPaths, resume: bool, restart_if_changed: bool) -> PreviousRun:
    """The run already in ``paths``; a UserError when these flags must leave it alone.

    Without ``resume`` the directory must hold no checkpoint. With it, rank 0 first
    removes temporary files of killed writes and moves unreadable newest checkpoints
    aside (``newest_loadable``); a newest checkpoint that loads but holds no training
    state (an averaged one copied in) is the user's to move: an error naming it.
    """
    if restart_if_changed and not resume:
        raise UserError("--restart-if-changed goes with --resume")
    existing = list_checkpoints(paths.checkpoints)
    if existing and not resume:
        raise UserError(
            f"{paths.out_dir} already holds checkpoints "
            f"(newest {existing[-1][1].name}): pass --resume to continue that run, "
            "or choose another --out-dir"
        )
    if not resume:
        return PreviousRun(paths, existing, None)
    main = int(os.environ.get("RANK", "0")) == 0
    if main:
        for stale in clean_temporaries(paths.checkpoints) + clean_temporaries(paths.out_dir):
            print(f"removed {stale}: the temporary file of an interrupted write", file=sys.stderr)
    existing, payload = newest_loadable(paths.checkpoints, set_aside=main)
    if payload is not None:
        missing = [key for key in TRAINING_STATE if key not in payload]
        if missing:
            what = (
                "an averaged checkpoint"
                if "averaged_from" in payload
                else "not a training checkpoint"
            )
            raise UserError(
                f"cannot resume from {existing[-1][1]}: it holds no training state "
                f"({what}, without {', '.join(missing)}); "
                f"move it out of {paths.checkpoints}"
            )
    return PreviousRun(paths, existing, payload)


@dataclass(frozen=True)
class Start:
    """How a training session begins (``RunDir.decide``), with what that way needs.

    ``kind``: ``fresh`` (at step 0), ``resume`` (from ``payload``, read from ``checkpoint``),
    ``finished`` (a run made with these settings is done: nothing to do but return its
    ``summary``) or ``start_over`` (the previous run cannot continue, ``why``; ``RunDir.begin``
    moves it aside).
    """

    kind: Literal["fresh", "resume", "finished", "start_over"]
    payload: dict | None = None
    checkpoint: Path | None = None
    summary: dict | None = None
    why: str | None = None


def _decide(
    previous: PreviousRun,
    model_cfg: ModelConfig,
    cfg: TrainSettings,
    spm_sha256: str | None,
    restart_if_changed: bool,
    fixed_shapes: bool = False,
    ranks: tuple[int, dict[str, int] | None] = (1, None),
) -> Start:
    """Finished, resume, start over or fresh, for a session with these settings and flags,
    on ``ranks`` (its number, and the micro-batches they would cut where the checkpoint was
    written by another number: ``ranks_mismatch``).

    A finished run (``summary.json`` present, ``cfg.steps`` reached) made with the same
    settings is left as it is, if ``last.pt`` is there too and ``metrics.jsonl`` holds the
    lines its checkpoint recorded; with any of the three missing or cut it is resumed at its last step, which rewrites them all
    from the checkpoint (the run, its weights and its metrics unchanged). A run made with
    other settings (model, data, trajectory) is an error, or, with ``restart_if_changed``,
    is to be moved aside and training starts over: the workflow's mode, so that editing
    the configuration retrains.
    """
    payload, paths = previous.payload, previous.paths
    if payload is None:
        return Start("fresh")
    summary = (
        json.loads(paths.summary.read_text(encoding="utf-8")) if paths.summary.exists() else {}
    )
    why = settings_mismatch(payload, model_cfg, cfg, spm_sha256, fixed_shapes)
    complete = paths.last.exists() and metrics_whole(paths.metrics, payload)
    if (
        why is None
        and complete
        and summary.get("steps", 0) >= cfg.steps
        and int(payload["step"]) >= cfg.steps
    ):
        return Start("finished", summary=summary)
    checkpoint = previous.checkpoints[-1][1]
    if why is not None and not restart_if_changed:
        raise UserError(
            f"cannot resume from {checkpoint}: {why}; pass the same settings "
            "(or start a new --out-dir)"
        )
    ranks_why = ranks_mismatch(payload, *ranks)  # a finished run is left as it is on any ranks
    if ranks_why is not None and not restart_if_changed:
        raise UserError(
            f"cannot resume from {checkpoint}: {ranks_why}: resume it on "
            f"{written_by(payload)} rank(s) (or pass --restart-if-changed to start over)"
        )
    why = why or ranks_why
    if why is None:
        return Start("resume", payload=payload, checkpoint=checkpoint)
    return Start("start_over", why=why)


# -- what a session writes (rank 0) ---------------------------------------------------------------


# Bytes a checkpoint needs on disk: its tensors' bytes, with this much to spare (pickled
# structure, the metrics lines), plus 1 MiB.
DISK_SLACK = 1.1


def _write_checkpoint(
    paths: RunPaths,
    keep_last: int,
    model_cfg: ModelConfig,
    model_state: dict,
    prune: bool = True,
    **state: Any,
) -> Path:
    """Save ``checkpoints/step_NNNNNNN.pt`` of ``state["step"]``, then keep the newest
    ``keep_last`` (all, when not ``prune``: while the loss is rising). Returns the path.

    Where the disk is short of what the checkpoint needs, the checkpoints it will supersede
    go first (never the newest); if it still does not fit, or the write fails for want of
    space, a UserError says how much it needs. The run stays resumable either way.
    """
    path = checkpoint_path(paths.checkpoints, state["step"])
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    needed = int(DISK_SLACK * tensor_bytes([model_state, state])) + (1 << 20)
    if prune:
        _make_room(paths.checkpoints, needed, keep_last)
    try:
        save_checkpoint(path, model_cfg, model_state, **state)
    except (OSError, RuntimeError):  # torch reports a full disk as a RuntimeError
        free = shutil.disk_usage(paths.checkpoints).free
        if free >= needed:
            raise
        raise UserError(
            f"cannot write {path}: the disk is full ({free / 1e6:,.1f} MB free, a checkpoint "
            f"needs about {needed / 1e6:,.1f} MB); free space or lower --keep-last, then resume"
        ) from None
    if prune:
        prune_checkpoints(paths.checkpoints, keep_last)
    return path


def _make_room(directory: Path, needed: int, keep_last: int) -> None:
    """Delete, oldest first, the checkpoints the next one supersedes (all but the newest
    ``keep_last - 1``, and never the newest) while ``directory``'s disk has under ``needed`` free."""
    superseded = list_checkpoints(directory)[: -max(keep_last - 1, 1)]
    for _, old in superseded:
        if shutil.disk_usage(directory).free >= needed:
            return
        old.unlink(missing_ok=True)
        print(
            f"low on disk space: removed {old} before writing the next checkpoint "
            "(it would be pruned after it)",
            file=sys.stderr,
            flush=True,
        )


class RunDir:
    """One training session's hold on its run folder: the resume decision (``decide``),
    ``begin``, ``save`` of each checkpoint, ``finish``. The module's docstring gives the order."""

    def __init__(self, out_dir: str | os.PathLike, resume: bool, restart_if_changed: bool):
        """Open the folder: a UserError when the flags must leave what it holds alone."""
        self.paths = RunPaths(Path(out_dir))
        self.restart_if_changed = restart_if_changed
        self.previous = _open(self.paths, resume, restart_if_changed)

    def decide(
        self,
        model_cfg: ModelConfig,
        cfg: TrainSettings,
        spm_sha256: str | None,
        fixed_shapes: bool = False,
        ranks: tuple[int, dict[str, int] | None] = (1, None),
    ) -> Start:
        """How this session begins with these settings on these ranks (``_decide``)."""
        return _decide(
            self.previous, model_cfg, cfg, spm_sha256, self.restart_if_changed, fixed_shapes,
            ranks,
        )  # fmt: skip

    def begin(self, start: Start, ctx: DistContext) -> MetricsLog:
        """Carry out ``start``: rank 0 moves a run that cannot continue aside (``supersede``)
        once every rank has read it; ``metrics.jsonl`` is rewritten as it was at the resumed
        checkpoint (empty when starting fresh). Returns the session's metrics log."""
        if start.kind == "start_over":
            distributed.barrier(ctx)
            if ctx.is_main:
                print(
                    f"{self.paths.out_dir}: the previous run cannot continue ({start.why}); "
                    f"moved it to {supersede(self.paths)} and starting over",
                    file=sys.stderr,
                    flush=True,
                )
        metrics_log = MetricsLog(self.paths.metrics, ctx.is_main)
        metrics_log.restore(start.payload)
        self.identity = _identity(self.paths.out_dir)
        return metrics_log

    def check_present(self, step: int) -> None:
        """A UserError where the run folder was removed, or replaced by another, since
        ``begin``: what the session would write next (metrics, curves, checkpoints) has no
        place, and a folder made anew would hold a run without its start."""
        if _identity(self.paths.out_dir) != self.identity:
            raise UserError(
                f"{self.paths.out_dir} was removed or replaced while the run trained (at step "
                f"{step}): stopped there, writing nothing more; train again into a folder "
                "that stays"
            )

    def save(
        self, keep_last: int, model_cfg: ModelConfig, model_state: dict, prune: bool, **state: Any
    ) -> Path:
        """Rank 0 writes the checkpoint of ``state["step"]`` (``_write_checkpoint``)."""
        return _write_checkpoint(self.paths, keep_last, model_cfg, model_state, prune, **state)

    def finish(self, summary: dict[str, Any]) -> None:
        """``last.pt`` becomes the final checkpoint, then ``summary.json`` marks the run finished."""
        link_or_copy(checkpoint_path(self.paths.checkpoints, summary["steps"]), self.paths.last)
        atomic_write_text(self.paths.summary, json.dumps(summary, indent=2) + "\n")
