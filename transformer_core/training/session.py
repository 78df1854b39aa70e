"""Training (paper section 5): a run's session, from its run folder to its summary.

``train`` opens the run folder (``run_dir.py``: start, resume, or nothing left to do), resolves
once what the run trains with (``runtime.py``), builds the model and the optimizer step on it
(``step.Trainer``) and hands them to a ``TrainingSession``,
whose loop reads as the recipe: an optimizer step, and at their intervals a log line, a dev
score and a checkpoint, until the run's steps are done; then the summary. The loop reads the
device once per log interval and before each checkpoint (``step.py`` says why). A checkpoint
holds everything the run needs to continue exactly: weights, optimizer, schedule, step, every
rank's RNG states and the data position, so a killed run that is resumed ends with the same
weights as one that never stopped (bit-identical on CPU).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from transformer_core.data.dataset import ParallelDataset, training_sets
from transformer_core.device import cpu_threads, precision_name
from transformer_core.errors import UserError
from transformer_core.evaluation.perplexity import exp_mean_nll
from transformer_core.model.config import ModelConfig, model_config
from transformer_core.model.transformer import count_parameters
from transformer_core.settings import TrainSettings
from transformer_core.training import distributed, micro_batch
from transformer_core.training import path as training_path
from transformer_core.training.distributed import DistContext
from transformer_core.training.divergence import DivergenceWatch, dev_diverged
from transformer_core.training.flops import paper_method_cost, training_flops
from transformer_core.training.host_memory import keep_freed_memory
from transformer_core.training.run_dir import RunDir, RunFolder, Start, written_by
from transformer_core.training.run_lock import run_lock
from transformer_core.training.runtime import resolve_runtime
from transformer_core.training.step import IntervalStats, StepResult, Trainer, TrainingDiverged
from transformer_core.training.tensorboard import TrainingCurves, tensorboard_available


def train(
    train_prefix: str | Path,
    run: str | Path | RunFolder,
    experiment: str,
    cfg: TrainSettings,
    model_overrides: dict[str, Any] | None = None,
    *,
    dev_prefix: str | Path | None = None,
) -> dict[str, Any]:
    """Train one model into the folder ``run`` (a path: a new run); returns the summary (also
    written to its ``summary.json`` by rank 0).

    With ``RunFolder.resume`` the run continues from its newest checkpoint, rewriting
    ``metrics.jsonl`` from it (``metrics_log.MetricsLog.restore``); a finished run made
    with the same settings is left as it is, or, when its summary.json, last.pt or
    metrics.jsonl is missing, has all three written again from its last checkpoint
    (no step trained, the same weights and metrics). A run made with
    other settings (model, data, trajectory) is an error, or, with
    ``RunFolder.restart_if_changed``, is moved aside (``run_dir.supersede``) and training
    starts over: the workflow's mode, so that editing the configuration retrains.
    Run it as one process, or under torchrun for several (``distributed.setup``).
    One session at a time holds the folder (``run_lock``); a run that diverges
    (``divergence.py``) stops with ``TrainingDiverged``, keeping its checkpoints.
    """
    run = run if isinstance(run, RunFolder) else RunFolder(Path(run))
    with run_lock(Path(run.out_dir), enabled=int(os.environ.get("RANK", "0")) == 0):
        folder = RunDir(run.out_dir, run.resume, run.restart_if_changed)
        if cfg.num_threads is not None:
            torch.set_num_threads(cfg.num_threads)
        overrides = dict(model_overrides or {})
        if "vocab_size" in overrides:
            raise UserError("model.vocab_size comes from the dataset; do not --set it")
        train_set, dev_set = training_sets(train_prefix, dev_prefix)
        spm_sha256 = train_set.header.get("spm_sha256")
        model_cfg = model_config(experiment, vocab_size=train_set.vocab_size, **overrides)
        _check_fits(model_cfg, {"training": train_set, **({"dev": dev_set} if dev_set else {})})
        world_size, device = distributed.planned_ranks(cfg.device)
        # The micro-batch and path auto picks for this run, and what a resumed run recorded.
        fresh, resumed = resolve_runtime(
            cfg, model_cfg, device, world_size,
            training_path.widths_met(train_set.src_lens, train_set.tgt_lens),
            folder.previous.payload,
        )  # fmt: skip
        kept, fixed_shapes = resumed.settings, resumed.path.fixed_shapes
        cut = None  # what these ranks cut, asked where the checkpoint's were another number
        if written_by(folder.previous.payload) not in (None, world_size):
            cut = micro_batch.planned_cut(kept, train_set, world_size, fixed_shapes)
        start = folder.decide(model_cfg, kept, spm_sha256, fixed_shapes, (world_size, cut))
        runtime = resumed if start.kind in ("resume", "finished") else fresh
        tokens, chosen = runtime.settings.max_tokens, fresh.settings.max_tokens
        if tokens != chosen and int(os.environ.get("RANK", "0")) == 0:
            print(
                f"max_tokens auto: keeping the run's micro-batch of {tokens:,} "
                f"tokens (auto would take {chosen:,} on {world_size} device(s))",
                file=sys.stderr,
            )
        if start.kind == "finished":
            print(
                f"{folder.paths.summary}: the run already finished {start.summary['steps']} "
                "steps; nothing to do",
                file=sys.stderr,
            )
            return start.summary
        # A resumed run keeps its identity; a fresh one, or a restart after a change, a new one.
        provenance = {
            "spm_sha256": spm_sha256,
            "spm_model": train_set.header.get("spm_model"),
            "run_id": (start.payload or {}).get("run_id") or uuid.uuid4().hex,
        }
        ctx = distributed.setup(cfg.device)
        if ctx.device.type == "cpu":
            keep_freed_memory()  # no page faults for the next step's same-size blocks
        try:
            trainer = Trainer(model_cfg, runtime, ctx, train_set)
            try:
                session = TrainingSession(
                    trainer, folder, start, experiment=experiment, dev_set=dev_set,
                    provenance=provenance,
                )  # fmt: skip
                return session.run()
            finally:
                trainer.close()
        finally:
            distributed.teardown(ctx)


class TrainingSession:
    """One session of a run: the loop from the run's step (0, or a checkpoint's) to its last,
    with the log interval's statistics, divergence watch and the metrics the run records."""

    def __init__(
        self,
        trainer: Trainer,
        folder: RunDir,
        start: Start,
        *,
        experiment: str,
        dev_set: ParallelDataset | None,
        provenance: dict[str, Any],
    ):
        self.trainer, self.folder, self.start = trainer, folder, start
        self.experiment, self.dev_set, self.provenance = experiment, dev_set, provenance
        self.cfg: TrainSettings = trainer.cfg
        self.model_cfg: ModelConfig = trainer.model_cfg
        self.ctx: DistContext = trainer.ctx
        self.watch = DivergenceWatch(self.model_cfg.vocab_size)
        self.interval = IntervalStats()
        self.last_metrics: dict[str, Any] = {}
        self.started = time.perf_counter()

    def run(self) -> dict[str, Any]:
        """Train to the run's steps (paper section 5.1-5.4), then write its summary."""
        cfg, trainer = self.cfg, self.trainer
        self.begin()
        try:
            while trainer.step < cfg.steps:
                result, sums = self.step()  # one optimizer step over tokens_per_step targets
                if self.ctx.is_main:
                    self.folder.check_present(trainer.step)  # before anything is written
                if sums is not None:
                    self.log_interval(result, *sums)  # loss, perplexity, learning rate, speed
                if self.dev_set is not None and self.due(cfg.dev_every):
                    self.dev_score()  # dev loss and perplexity, and with shuffled sources
                if self.due(cfg.checkpoint_interval):
                    self.checkpoint()  # everything an exact resume needs
            return self.finish()
        except OSError:
            if self.ctx.is_main:  # one line where the run folder went while it was written
                self.folder.check_present(trainer.step)
            raise
        finally:
            self.curves.close()

    # --- the phases, in the loop's order ----------------------------------------------------

    def begin(self) -> None:
        """metrics.jsonl as it was at the resumed checkpoint (empty when starting fresh):
        without the lines of a killed session after it, and whole again if it was deleted;
        the trainer at the checkpoint's state; the session's first log line."""
        start, trainer, cfg, ctx = self.start, self.trainer, self.cfg, self.ctx
        self.metrics_log = self.folder.begin(start, ctx)
        if start.kind == "resume":
            trainer.load_state(start.payload, self.log)
            self.last_metrics = dict(start.payload.get("metrics", {}))
            self.log(f"resuming from {start.checkpoint} (step {trainer.step})")
        self.watch.replay(self.metrics_log.records)
        # TensorBoard drops what a killed session wrote after the resumed checkpoint.
        self.curves = TrainingCurves(
            self.folder.paths.tensorboard, cfg.tensorboard and ctx.is_main, trainer.step + 1
        )
        # The newest checkpoint written before the loss rose (divergence.py); pruning spares it.
        self.last_good = start.checkpoint if not self.watch.rising else None
        self.precision = run_precision(start.payload, precision_name(trainer.autocast))
        self.params = count_parameters(trainer.model)
        compile_why = trainer.path.why
        self.log(
            f"training {self.experiment}: {self.params:,} parameters, vocabulary "
            f"{self.model_cfg.vocab_size}, {ctx.world_size} x {device_name(ctx.device)} "
            f"({cpu_threads()} each), precision {precision_name(trainer.autocast)}"
            f"{', bf16 compute weights' if trainer.master else ''}"
            f", {'compiled' if trainer.compiled else 'eager'} ({compile_why})"
            f"{', fixed batch shapes' if trainer.fixed_shapes else ''}, "
            f"{cfg.batch_tokens(ctx.world_size)} "
            f"tokens per micro-batch x {trainer.accumulation} accumulation x {ctx.world_size} "
            f"device(s) for {cfg.tokens_per_step} target tokens per step; {cfg.steps} steps"
            f"{f', the last {cfg.cooldown} cooled down' if cfg.cooldown else ''}"
        )
        if cfg.tensorboard and not tensorboard_available():
            self.log(
                "TensorBoard: not installed (pip install -e '.[monitor]'); curves in metrics.jsonl"
            )
        elif self.curves.active:
            self.log(f"TensorBoard: tensorboard --logdir {self.folder.paths.tensorboard}")
        self.started = time.perf_counter()
        # The interval a checkpoint cut, continued (its seconds too, for the tokens per second).
        kept = start.payload.get("interval", {}) if trainer.interval_resumed else {}
        self.interval = IntervalStats(
            kept.get("tgt_tokens", 0),
            kept.get("src_tokens", 0),
            kept.get("steps", 0),
            self.started - kept.get("seconds", 0.0),
        )

    def step(self) -> tuple[StepResult, tuple[float, float] | None]:
        """One optimizer step; at a log interval also the interval's loss and NLL sums (its one
        device read), before a checkpoint the divergence flag. A diverged or out-of-memory step
        ends the run in one line."""
        trainer, cfg = self.trainer, self.cfg
        sums = None
        try:
            result = trainer.train_step()
            if self.due(cfg.log_interval):
                sums = trainer.interval_sums()
            elif self.due(cfg.checkpoint_interval):
                trainer.raise_if_diverged()
        except TrainingDiverged as err:
            raise self.diverged(str(err)) from None
        except (MemoryError, RuntimeError) as err:
            if not _out_of_memory(err):
                raise
            raise UserError(
                f"out of memory at step {trainer.step + 1} with --max-tokens {cfg.max_tokens} "
                f"per micro-batch on {device_name(self.ctx.device)}: lower --max-tokens "
                f"(gradient accumulation keeps {cfg.tokens_per_step} target tokens per step)"
            ) from None
        self.interval.add(result)
        return result, sums

    def log_interval(self, result: StepResult, loss_sum: float, nll_sum: float) -> None:
        """The interval's record in metrics.jsonl and its log line; a rising loss ends the run."""
        step, interval = self.trainer.step, self.interval
        seconds = time.perf_counter() - interval.started
        why = self.watch.observe(step, loss_sum / interval.tgt_tokens)
        if why is not None:
            raise self.diverged(why)
        record = {
            "event": "train",
            "step": step,
            "loss": loss_sum / interval.tgt_tokens,
            "ppl": exp_mean_nll(nll_sum, interval.tgt_tokens),
            "lr": result.lr,
            "tgt_tokens_per_s": interval.tgt_tokens / seconds,
            "src_tokens_per_s": interval.src_tokens / seconds,
            "tgt_tokens_per_step": interval.tgt_tokens / interval.steps,
            "epoch": self.trainer.stream.epoch,
            "elapsed_s": self.wall(),
        }
        self.metrics_log.write(record)
        self.curves.train(step, record, self.ctx.device)
        self.log(
            f"step {step}/{self.cfg.steps} | loss {record['loss']:.4f} | ppl {record['ppl']:.2f} | "
            f"lr {result.lr:.3e} | {record['tgt_tokens_per_s']:,.0f} tgt tok/s | "
            f"epoch {record['epoch']} | elapsed {_elapsed(record['elapsed_s'])}"
        )
        self.last_metrics.update(train_loss=record["loss"], train_ppl=record["ppl"])
        self.interval = IntervalStats()

    def dev_score(self) -> None:
        """Dev loss and perplexity (and with wrong sources), recorded; a diverged dev score ends
        the run before the step's checkpoint, which is then never written."""
        step = self.trainer.step
        dev = self.trainer.evaluate(self.dev_set)
        why = dev_diverged(step, dev)
        if why is not None:
            raise self.diverged(why)
        self.last_metrics.update(dev, dev_step=step)
        self.metrics_log.write({"event": "dev", "step": step, **dev, "elapsed_s": self.wall()})
        self.curves.dev(step, dev)
        self.log(
            f"step {step} | dev loss {dev['dev_loss']:.4f} | dev ppl {dev['dev_ppl']:.2f} | "
            f"dev loss with wrong sources {dev['dev_loss_wrong_src']:.4f}"
        )

    def checkpoint(self) -> None:
        """Every rank's state gathered, rank 0 writes it (pruning the oldest beyond keep_last,
        but never while the loss is rising)."""
        state = self.trainer.state(self.wall(), self.last_metrics)  # every rank: RNG states
        if not self.ctx.is_main:
            return
        rising = self.watch.rising
        path = self.folder.save(
            self.cfg.keep_last,
            self.model_cfg,
            self.trainer.model.state_dict(),
            prune=not rising,
            experiment=self.experiment,
            precision=self.precision,
            **self.provenance,
            **state,
            metrics_log=self.metrics_log.records,
            interval={
                **{k: getattr(self.interval, k) for k in ("tgt_tokens", "src_tokens", "steps")},
                "seconds": time.perf_counter() - self.interval.started,
            },
        )
        self.log(f"step {self.trainer.step} | saved {path}")
        if not rising:
            self.last_good = path

    def finish(self) -> dict[str, Any]:
        """The run's summary (training cost, tokens, time, last metrics), written by rank 0."""
        trainer, ctx = self.trainer, self.ctx
        summary = self.summary()
        if ctx.is_main:
            self.metrics_log.sync()
            self.folder.finish(summary)
            self.log(
                f"done: {trainer.step} steps, {_elapsed(summary['wall_seconds'])}, "
                f"{summary['tokens_tgt']:,} target tokens; summary in {self.folder.paths.summary}"
            )
        distributed.barrier(ctx)
        return summary

    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json``: what the tables, the FLOPs and the reports read of
        the run. The metrics are the last logged (``train_loss``, ``train_ppl``, ``dev_loss``,
        ``dev_ppl``); the device is named as ``torch.cuda.get_device_name`` spells it, or cpu."""
        trainer, counts, metrics = self.trainer, self.trainer.counts, self.last_metrics
        wall_seconds, device = self.wall(), device_name(self.ctx.device)
        cost = paper_method_cost(wall_seconds / 3600.0, self.ctx.world_size, device)
        return {
            "experiment": self.experiment,
            "steps": trainer.step,
            "tokens_src": counts.src_tokens,
            "tokens_tgt": counts.tgt_tokens,
            "token_counts": asdict(counts),
            "wall_seconds": wall_seconds,
            "device": device,
            "devices": self.ctx.world_size,
            "accumulation": trainer.accumulation,
            "precision": self.precision,
            "final_train_loss": metrics.get("train_loss"),
            "final_train_ppl": metrics.get("train_ppl"),
            "dev_loss": metrics.get("dev_loss"),
            "dev_ppl": metrics.get("dev_ppl"),
            "params": self.params,
            "flops_paper_method": cost["flops"],
            "flops_paper_method_note": cost["note"],
            "flops_analytic": training_flops(self.model_cfg, counts),
            "model_config": self.model_cfg.to_dict(),
            "train_config": self.cfg.to_dict(),
        }

    # --- helpers ------------------------------------------------------------------------------

    def due(self, every: int) -> bool:
        """Whether the step just taken is at an interval of ``every`` steps, or the last."""
        step = self.trainer.step
        return step % every == 0 or step == self.cfg.steps

    def wall(self) -> float:
        """Training seconds of the run: earlier sessions' and this one's."""
        return self.trainer.wall_before + time.perf_counter() - self.started

    def log(self, message: str) -> None:
        """A line on stderr and in the run's ``train.log`` (rank 0)."""
        if self.ctx.is_main:
            print(message, file=sys.stderr, flush=True)
            with open(self.folder.paths.log, "a", encoding="utf-8") as handle:
                handle.write(message + "\n")

    def diverged(self, why: str) -> TrainingDiverged:
        """The run's one-line error, and its record in metrics.jsonl."""
        self.metrics_log.write({"event": "diverged", "step": self.trainer.step, "why": why})
        where = (
            f"the last checkpoint before the loss rose is {self.last_good}"
            if self.last_good is not None
            else "no checkpoint was written before the loss rose"
        )
        return TrainingDiverged(
            f"the run diverged: {why}; stopped there, {where}. Lower --lr-scale (or raise "
            "--warmup), or check the data"
        )


def run_precision(payload: dict | None, session: str) -> str:
    """The precision a run was trained in: this session's, or, after a resume in another
    precision (``auto`` on a CPU without native bf16), each in order: ``bf16+fp32``."""
    earlier = (payload or {}).get("precision")
    if not earlier or earlier.split("+")[-1] == session:
        return earlier or session
    return f"{earlier}+{session}"


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


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
