"""Training (paper section 5): the training loop around ``trainer.Trainer``'s optimizer step.

The loop logs, evaluates on dev, checkpoints and watches for divergence; it reads the
device once per log interval and before each checkpoint (``trainer.py`` says why).
The run directory (checkpoints, metrics, summary; resuming or starting over) is
``run_dir.py``'s. A checkpoint holds everything the run needs to continue exactly:
weights, optimizer, schedule, step, every rank's RNG states and the data position,
so a killed run that is resumed ends with the same weights as one that never
stopped (bit-identical on CPU).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from transformer_core import distributed
from transformer_core.config import ModelConfig, model_config
from transformer_core.data.dataset import ParallelDataset, training_sets
from transformer_core.device import (
    cpu_threads,
    precision_name,
)
from transformer_core.distributed import DistContext
from transformer_core.divergence import DivergenceWatch, dev_diverged
from transformer_core.errors import UserError
from transformer_core.host_memory import keep_freed_memory
from transformer_core.model import count_parameters
from transformer_core.perplexity import exp_mean_nll
from transformer_core.run_dir import RunDir, Start, run_summary
from transformer_core.run_lock import run_lock
from transformer_core.settings import TrainConfig
from transformer_core.trainer import IntervalStats, Trainer, TrainingDiverged

# -- the run -------------------------------------------------------------------------------------


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _out_of_memory(err: BaseException) -> bool:
    """CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's RuntimeError."""
    return (
        isinstance(err, (torch.OutOfMemoryError, MemoryError))
        or "out of memory" in str(err)
        or "can't allocate memory" in str(err)
    )


def _check_fits(model_cfg: ModelConfig, datasets: dict[str, ParallelDataset]) -> None:
    """A learned position table must hold the longest sentence (sinusoids extend on the fly)."""
    if model_cfg.positional != "learned":
        return
    for name, ds in datasets.items():
        longest = int(max(ds.src_lens.max(initial=0), ds.tgt_lens.max(initial=0))) + 1
        if longest > model_cfg.max_positions:
            raise UserError(
                f"the {name} set has a sentence of {longest} positions (with BOS/EOS) but "
                f"the learned position table holds {model_cfg.max_positions}: raise it "
                f"with --set max_positions={longest} or filter long sentences"
            )


def train(
    train_prefix: str | Path,
    out_dir: str | Path,
    experiment: str,
    cfg: TrainConfig,
    model_overrides: dict[str, Any] | None = None,
    dev_prefix: str | Path | None = None,
    resume: bool = False,
    restart_if_changed: bool = False,
) -> dict[str, Any]:
    """Train one model; returns the summary (also written to ``out_dir/summary.json`` by rank 0).

    ``resume`` continues the run in ``out_dir`` from its newest checkpoint, rewriting
    ``metrics.jsonl`` from it (``run_dir.MetricsLog.restore``); a finished run made
    with the same settings is left as it is, or, when its summary.json, last.pt or
    metrics.jsonl is missing, has all three written again from its last checkpoint
    (no step trained, the same weights and metrics). A run made with
    other settings (model, data, trajectory) is an error, or, with
    ``restart_if_changed``, is moved aside (``run_dir.supersede``) and training
    starts over: the workflow's mode, so that editing the configuration retrains.
    Run it as one process, or under torchrun for several (``distributed.setup``).
    One session at a time holds ``out_dir`` (``run_lock``); a run that diverges
    (``divergence.py``) stops with ``TrainingDiverged``, keeping its checkpoints.
    """
    with run_lock(Path(out_dir), enabled=int(os.environ.get("RANK", "0")) == 0):
        return _train(
            out_dir, train_prefix, experiment, cfg, model_overrides, dev_prefix, resume,
            restart_if_changed,
        )  # fmt: skip


def _train(
    out_dir: str | Path,
    train_prefix: str | Path,
    experiment: str,
    cfg: TrainConfig,
    model_overrides: dict[str, Any] | None,
    dev_prefix: str | Path | None,
    resume: bool,
    restart_if_changed: bool,
) -> dict[str, Any]:
    """``train`` once it holds the run folder's lock."""
    folder = RunDir(out_dir, resume, restart_if_changed)
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    overrides = dict(model_overrides or {})
    if "vocab_size" in overrides:
        raise UserError("model.vocab_size comes from the dataset; do not --set it")
    train_set, dev_set = training_sets(train_prefix, dev_prefix)
    spm_sha256 = train_set.header.get("spm_sha256")
    model_cfg = model_config(experiment, vocab_size=train_set.vocab_size, **overrides)
    _check_fits(model_cfg, {"training": train_set, **({"dev": dev_set} if dev_set else {})})
    start = folder.decide(model_cfg, cfg, spm_sha256)
    # A resumed run keeps its identity; a fresh one, or a restart after a change, gets a new one.
    provenance = {
        "spm_sha256": spm_sha256,
        "spm_model": train_set.header.get("spm_model"),
        "run_id": (start.payload or {}).get("run_id") or uuid.uuid4().hex,
    }
    if start.kind == "finished":
        print(
            f"{folder.paths.summary}: the run already finished {start.summary['steps']} steps; "
            "nothing to do",
            file=sys.stderr,
        )
        return start.summary

    ctx = distributed.setup(cfg.device)
    if ctx.device.type == "cpu":
        keep_freed_memory()  # no page faults for the next step's same-size blocks
    try:
        return _run(folder, experiment, model_cfg, cfg, ctx, train_set, dev_set, start, provenance)
    finally:
        distributed.teardown(ctx)


def _run(
    folder: RunDir,
    experiment: str,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    ctx: DistContext,
    train_set: ParallelDataset,
    dev_set: ParallelDataset | None,
    start: Start,
    provenance: dict[str, Any],
) -> dict[str, Any]:
    def log(message: str) -> None:
        if ctx.is_main:
            print(message, file=sys.stderr, flush=True)

    trainer = Trainer(model_cfg, cfg, ctx, train_set)
    try:
        return _train_loop(
            trainer, folder, experiment, model_cfg, cfg, ctx, dev_set, start, provenance, log
        )
    finally:
        trainer.close()


def run_precision(payload: dict | None, session: str) -> str:
    """The precision a run was trained in: this session's, or, after a resume in another
    precision (``auto`` on a CPU without native bf16), each in order: ``bf16+fp32``."""
    earlier = (payload or {}).get("precision")
    if not earlier or earlier.split("+")[-1] == session:
        return earlier or session
    return f"{earlier}+{session}"


def _train_loop(
    trainer: Trainer,
    folder: RunDir,
    experiment: str,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    ctx: DistContext,
    dev_set: ParallelDataset | None,
    start: Start,
    provenance: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Train to ``cfg.steps``, logging, evaluating and checkpointing on the way."""
    # metrics.jsonl as it was at the resumed checkpoint (empty when starting fresh): without the
    # lines of a killed session after it, and whole again if it was deleted.
    metrics_log = folder.begin(start, ctx)
    last_metrics: dict[str, Any] = {}
    if start.kind == "resume":
        trainer.load_state(start.payload, log)
        last_metrics = dict(start.payload.get("metrics", {}))
        log(f"resuming from {start.checkpoint} (step {trainer.step})")
    watch = DivergenceWatch(model_cfg.vocab_size)
    watch.replay(metrics_log.records)
    # The newest checkpoint written before the loss rose (divergence.py); pruning spares it.
    last_good = start.checkpoint if not watch.rising else None
    precision = run_precision(start.payload, precision_name(trainer.autocast))
    params = count_parameters(trainer.model)
    log(
        f"training {experiment}: {params:,} parameters, vocabulary {model_cfg.vocab_size}, "
        f"{ctx.world_size} x {device_name(ctx.device)} ({cpu_threads()} each), "
        f"precision {precision_name(trainer.autocast)}"
        f"{', compiled' if trainer.compiled else ''}, "
        f"{cfg.batch_tokens(ctx.world_size)} tokens per micro-batch x {trainer.accumulation} accumulation x {ctx.world_size} "
        f"device(s) for {cfg.tokens_per_step} target tokens per step; {cfg.steps} steps"
        f"{f', the last {cfg.cooldown} cooled down' if cfg.cooldown else ''}"
    )

    session_start = time.perf_counter()
    interval = IntervalStats()

    def wall() -> float:
        return trainer.wall_before + time.perf_counter() - session_start

    def diverged(why: str) -> TrainingDiverged:
        """The run's one-line error, and its record in metrics.jsonl."""
        metrics_log.write({"event": "diverged", "step": trainer.step, "why": why})
        where = (
            f"the last checkpoint before the loss rose is {last_good}"
            if last_good is not None
            else "no checkpoint was written before the loss rose"
        )
        return TrainingDiverged(
            f"the run diverged: {why}; stopped there, {where}. Lower --lr-scale (or raise "
            "--warmup), or check the data"
        )

    while trainer.step < cfg.steps:
        try:
            result = trainer.train_step()
            step = trainer.step
            saving = step % cfg.checkpoint_interval == 0 or step == cfg.steps
            if step % cfg.log_interval == 0 or step == cfg.steps:
                loss_sum, nll_sum = trainer.interval_sums()  # the interval's one device read
            elif saving:
                trainer.raise_if_diverged()
        except TrainingDiverged as err:
            raise diverged(str(err)) from None
        except (MemoryError, RuntimeError) as err:
            if not _out_of_memory(err):
                raise
            raise UserError(
                f"out of memory at step {trainer.step + 1} with --max-tokens {cfg.max_tokens} "
                f"per micro-batch on {device_name(ctx.device)}: lower --max-tokens (gradient "
                f"accumulation keeps {cfg.tokens_per_step} target tokens per step)"
            ) from None
        interval.add(result)
        if step % cfg.log_interval == 0 or step == cfg.steps:
            seconds = time.perf_counter() - interval.started
            why = watch.observe(step, loss_sum / interval.tgt_tokens)
            if why is not None:
                raise diverged(why)
            record = {
                "event": "train",
                "step": step,
                "loss": loss_sum / interval.tgt_tokens,
                "ppl": exp_mean_nll(nll_sum, interval.tgt_tokens),
                "lr": result.lr,
                "tgt_tokens_per_s": interval.tgt_tokens / seconds,
                "src_tokens_per_s": interval.src_tokens / seconds,
                "tgt_tokens_per_step": interval.tgt_tokens / interval.steps,
                "epoch": trainer.stream.epoch,
                "elapsed_s": wall(),
            }
            metrics_log.write(record)
            log(
                f"step {step}/{cfg.steps} | loss {record['loss']:.4f} | ppl {record['ppl']:.2f} | "
                f"lr {result.lr:.3e} | {record['tgt_tokens_per_s']:,.0f} tgt tok/s | "
                f"epoch {record['epoch']} | elapsed {_elapsed(record['elapsed_s'])}"
            )
            last_metrics.update(train_loss=record["loss"], train_ppl=record["ppl"])
            interval = IntervalStats()
        if dev_set is not None and (step % cfg.dev_every == 0 or step == cfg.steps):
            dev = trainer.evaluate(dev_set)
            why = dev_diverged(step, dev)
            if why is not None:  # before the step's checkpoint, which is then never written
                raise diverged(why)
            last_metrics.update(dev, dev_step=step)
            metrics_log.write({"event": "dev", "step": step, **dev, "elapsed_s": wall()})
            log(
                f"step {step} | dev loss {dev['dev_loss']:.4f} | dev ppl {dev['dev_ppl']:.2f} | "
                f"dev loss with wrong sources {dev['dev_loss_wrong_src']:.4f}"
            )
        if step % cfg.checkpoint_interval == 0 or step == cfg.steps:
            state = trainer.state(wall(), last_metrics)  # every rank: gathers RNG states
            if ctx.is_main:
                path = folder.save(
                    cfg.keep_last,
                    model_cfg,
                    trainer.model.state_dict(),
                    prune=not watch.rising,
                    experiment=experiment,
                    precision=precision,
                    **provenance,
                    **state,
                    metrics_log=metrics_log.records,
                )
                log(f"step {step} | saved {path}")
                if not watch.rising:
                    last_good = path

    summary = run_summary(
        experiment,
        model_cfg,
        cfg,
        steps=trainer.step,
        counts=trainer.counts,
        wall_seconds=wall(),
        device=device_name(ctx.device),
        devices=ctx.world_size,
        accumulation=trainer.accumulation,
        precision=precision,
        params=params,
        metrics=last_metrics,
    )
    if ctx.is_main:
        folder.finish(summary)
        log(
            f"done: {trainer.step} steps, {_elapsed(summary['wall_seconds'])}, "
            f"{summary['tokens_tgt']:,} target tokens; summary in {folder.paths.summary}"
        )
    distributed.barrier(ctx)
    return summary
