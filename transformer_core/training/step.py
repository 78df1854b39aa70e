"""The optimizer step of training (paper section 5): the ``Trainer`` (of ``loss.LossModel``).

One optimizer step takes ``accumulation`` micro-batches on each of
``world_size`` devices (``TrainSettings.accumulation``). Its loss is the sum of
label-smoothed token losses over all of them divided by the global number of
target tokens, so the gradient equals that of one big batch however the tokens
are split: each rank all-reduces the token count before the forward pass and
scales its loss by ``world_size / global_tokens`` (DDP averages gradients over
ranks). All but the last micro-batch run under ``no_sync``. Adam(0.9, 0.98,
1e-9) follows the paper's learning-rate schedule (``schedule.py``).

On a GPU the host only queues work, and a step is as fast as the GPU only if the
host never waits for it. So a step reads nothing back from the device: batches
are collated ahead by a background thread (``data.batching.Prefetcher``) and
carry their token counts and non-pad positions from the host; the loss sums and
a divergence flag stay on the device, and fused Adam skips its update from the
first step whose loss is not finite on (``found_inf``, as under a gradient
scaler) without the host looking. The training session (``session.py``) reads the sums
once per log interval (``Trainer.interval_sums``), and the flag before each
checkpoint, and ``TrainingDiverged`` is raised there, with the weights as they were
before the first bad step. One bf16 autocast context spans the step's micro-batches,
so each weight is cast to bf16 once per step, not once per micro-batch; with
``compute_weights: bf16`` the step runs a bf16 copy of the weights instead, without autocast
(``master_weights.py``).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from transformer_core.data.batching import BatchStream, Prefetcher, TokenBucketSampler
from transformer_core.data.dataset import ParallelDataset
from transformer_core.data.token_counts import TokenCounts
from transformer_core.device import length_multiple
from transformer_core.errors import UserError
from transformer_core.evaluation.perplexity import Perplexity, dataset_batches, summed_nll
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer
from transformer_core.settings import TrainSettings
from transformer_core.training import distributed, micro_batch
from transformer_core.training.distributed import DistContext
from transformer_core.training.loss import LossModel
from transformer_core.training.master_weights import MasterWeights, compute_dtype
from transformer_core.training.path import widths_met
from transformer_core.training.random_state import rng_state, seed_everything, set_rng_state
from transformer_core.training.runtime import TrainingRuntime, resolve_runtime
from transformer_core.training.schedule import learning_rate


class TrainingDiverged(UserError):
    """The run diverged (``divergence.py``): it stops, and its checkpoints stay as they were."""


@dataclass
class StepResult:
    """What the host knows of one optimizer step without reading the device: global
    (all-rank) token counts and the learning rate. The loss is read per log interval."""

    tgt_tokens: int
    src_tokens: int
    lr: float


@dataclass
class IntervalStats:
    """Token counts since the last log line."""

    tgt_tokens: int = 0
    src_tokens: int = 0
    steps: int = 0
    started: float = field(default_factory=time.perf_counter)

    def add(self, r: StepResult) -> None:
        self.tgt_tokens += r.tgt_tokens
        self.src_tokens += r.src_tokens
        self.steps += 1


def _no_buffer_sync() -> dict:
    """DDP need not broadcast buffers before each forward: the only one is the constant sinusoid table."""
    params = inspect.signature(DistributedDataParallel.__init__).parameters
    key = "forward_sync_buffers" if "forward_sync_buffers" in params else "broadcast_buffers"
    return {key: False}


def _adam_kwargs(device: torch.device) -> dict:
    """Fused Adam where torch has it for the device (CPU and CUDA in recent torch): fewer passes."""
    try:
        torch.optim.Adam([torch.zeros(1, device=device, requires_grad=True)], fused=True)
    except (RuntimeError, TypeError):
        return {}
    return {"fused": True}


class Trainer:
    """Model, optimizer, data stream and counters of one rank; ``train_step`` is one optimizer step."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        runtime: TrainingRuntime,
        ctx: DistContext,
        train_set: ParallelDataset,
    ):
        """``runtime``: the run's settings as training resolved them on ``ctx.device``
        (``runtime.TrainingRuntime``: the micro-batch, autocast, compiled or not, the batch
        shapes and compute weights); ``fresh`` resolves them for a run that starts."""
        cfg = runtime.settings  # max_tokens a number
        self.model_cfg, self.cfg, self.ctx = model_cfg, cfg, ctx
        self.autocast, self.path = runtime.autocast, runtime.path
        seed_everything(cfg.seed)  # the same initial weights on every rank
        self.model = Transformer(model_cfg).to(ctx.device)  # fp32: what Adam updates and saves
        low = compute_dtype(self.path.compute_weights, self.autocast)
        # compute_weights bf16: the step runs a bf16 copy, without autocast (master_weights.py).
        self.master = MasterWeights(self.model, low) if low else None
        compiled, self.fixed_shapes = self.path.compiled, self.path.fixed_shapes
        self.loss_model: nn.Module = LossModel(
            self.master.compute if self.master else self.model, compiled, static=self.fixed_shapes
        )
        self.cuda_graphs = self.loss_model.cuda_graphs
        # Dev scoring runs the fp32 weights (eagerly with a bf16 copy), outside DDP.
        self.scorer = LossModel(self.model) if self.master else self.loss_model
        if ctx.distributed:
            self.loss_model = DistributedDataParallel(
                self.loss_model,
                device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
                gradient_as_bucket_view=True,
                **_no_buffer_sync(),
            )
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=0.0,
            betas=(cfg.adam_beta1, cfg.adam_beta2),
            eps=cfg.adam_eps,
            **_adam_kwargs(ctx.device),
        )
        # Fused Adam takes found_inf: it skips the update on the device when the flag is set.
        self.skips_on_device = bool(self.optimizer.defaults.get("fused"))
        seed_everything(cfg.seed + ctx.rank)  # dropout masks differ between ranks
        self.sampler = TokenBucketSampler(
            train_set.src_lens,
            train_set.tgt_lens,
            cfg.max_tokens,
            seed=cfg.seed,
            rank=ctx.rank,
            world_size=ctx.world_size,
            batch_tokens=cfg.batch_tokens(ctx.world_size),
        )
        self.shapes = self.sampler.fixed_shapes() if self.fixed_shapes else None
        self.accumulation = cfg.accumulation(ctx.world_size)
        micro_batch.check_step_size(cfg, train_set, ctx.world_size)  # after the sampler's checks
        self.compiled = compiled
        # A CUDA graph's gradients live in inductor's pool, which the next micro-batch's replay
        # overwrites: summed instead into gradients of our own, zeroed after each step.
        self.owns_gradients = self.cuda_graphs and self.accumulation > 1 and not self.master
        if self.owns_gradients:
            for p in self.model.parameters():
                p.grad = torch.zeros_like(p)
        self.stream = self._batches(train_set)
        self.step = 0
        self.counts = TokenCounts()  # global, over all ranks
        self.wall_before = 0.0  # training seconds of earlier sessions of this run
        # On the device: this rank's loss sums since the last read, and the first step whose
        # loss was not finite (0: none).
        self._loss_sum = torch.zeros((), device=ctx.device)
        self._nll_sum = torch.zeros((), device=ctx.device)
        self.interval_resumed = False  # whether load_state continued a log interval's sums
        self._bad_step = torch.zeros((), dtype=torch.long, device=ctx.device)

    @classmethod
    def fresh(
        cls,
        model_cfg: ModelConfig,
        settings: TrainSettings,
        ctx: DistContext,
        train_set: ParallelDataset,
    ) -> Trainer:
        """The trainer of a fresh run of ``settings``, resolved on ``ctx.device`` as the session
        resolves a run that starts (``runtime.resolve_runtime``): how benchmarks and tests
        build one."""
        widths = widths_met(train_set.src_lens, train_set.tgt_lens)
        runtime = resolve_runtime(settings, model_cfg, ctx.device, ctx.world_size, widths)[0]
        return cls(model_cfg, runtime, ctx, train_set)

    def _batches(self, dataset: ParallelDataset, epoch: int = 0, index: int = 0) -> Prefetcher:
        """This rank's micro-batches from (epoch, index), collated ahead (and pinned for a GPU)."""
        device = self.ctx.device
        multiple = length_multiple(device)
        stream = BatchStream(
            dataset, self.sampler, self.model_cfg, epoch, index, multiple, self.shapes
        )
        return Prefetcher(stream, depth=2 * self.accumulation, pin_memory=device.type == "cuda")

    def close(self) -> None:
        """Stop the batch prefetch thread."""
        self.stream.close()

    def _autocast(self, enabled: bool = True) -> contextlib.AbstractContextManager:
        if self.autocast is None or self.master:  # a bf16 copy computes without autocast
            return contextlib.nullcontext()
        return torch.autocast(self.ctx.device.type, dtype=self.autocast, enabled=enabled)

    def train_step(self) -> StepResult:
        """One optimizer step, queued without reading anything back from the device.

        A step whose loss is not finite, and every step after it, leaves the weights and
        the optimizer as they were (on the device, through fused Adam's ``found_inf``);
        the next ``interval_sums`` or ``raise_if_diverged`` raises TrainingDiverged. Where
        Adam is not fused, the step reads its loss and raises at once.
        """
        device = self.ctx.device
        batches = [self.stream.next() for _ in range(self.accumulation)]
        counts = TokenCounts()
        for batch in batches:
            counts.merge(batch.counts)
        global_counts = TokenCounts(
            *map(round, distributed.all_reduce_sum(list(asdict(counts).values()), self.ctx))
        )
        scale = self.ctx.world_size / global_counts.tgt_tokens
        lr = learning_rate(
            self.step + 1,
            self.model_cfg.d_model,
            self.cfg.warmup,
            self.cfg.lr_scale,
            self.cfg.cooldown,
            self.cfg.steps,
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss_sum = torch.zeros((), device=device)
        nll_sum = torch.zeros((), device=device)
        self.loss_model.train()
        # One autocast context for the whole step: autocast caches its bf16 copy of each
        # weight until its outermost context exits, here after the last micro-batch (and
        # before the optimizer changes the weights). Backward runs with autocast off.
        with self._autocast():
            for i, batch in enumerate(batches):
                last = i == len(batches) - 1
                sync = (
                    contextlib.nullcontext()
                    if last or not self.ctx.distributed
                    else self.loss_model.no_sync()
                )
                src, tgt_in, tgt_out, target_index = (
                    t.to(device, non_blocking=True)
                    for t in (batch.src, batch.tgt_in, batch.tgt_out, batch.target_index)
                )
                with sync:
                    loss, nll = self.loss_model(
                        src, tgt_in, tgt_out, self.model_cfg.label_smoothing, target_index
                    )
                    with self._autocast(enabled=False):
                        (loss * scale).backward()
                if self.master:
                    self.master.accumulate(first=i == 0)  # into the fp32 gradients
                loss_sum += loss.detach()
                nll_sum += nll
        bad = (~(torch.isfinite(loss_sum) & torch.isfinite(nll_sum))).to(torch.float32)
        distributed.all_reduce_(bad, self.ctx, op="max")  # every rank skips the same steps
        self._bad_step = torch.where(
            (self._bad_step == 0) & (bad > 0), self.step + 1, self._bad_step
        )
        if self.skips_on_device:
            self.optimizer.found_inf = (self._bad_step > 0).to(torch.float32)
        else:
            self.raise_if_diverged()
        self.optimizer.step()
        if self.master:
            self.master.refresh()  # the next micro-batch's gradients overwrite the fp32 ones
        else:
            self.optimizer.zero_grad(set_to_none=not self.owns_gradients)
        self._loss_sum += loss_sum
        self._nll_sum += nll_sum
        self.step += 1
        self.counts.merge(global_counts)
        return StepResult(global_counts.tgt_tokens, global_counts.src_tokens, lr)

    def interval_sums(self) -> tuple[float, float]:
        """The label-smoothed loss and NLL summed over all ranks and the steps since the last
        call: the loop's one read of the device per log interval. Raises TrainingDiverged
        if a step's loss was not finite."""
        sums = distributed.all_reduce_(torch.stack([self._loss_sum, self._nll_sum]), self.ctx)
        loss, nll, bad_step = torch.cat([sums.double(), self._bad_step.double()[None]]).tolist()
        self._loss_sum.zero_()
        self._nll_sum.zero_()
        self._check(int(bad_step))
        return loss, nll

    def raise_if_diverged(self) -> None:
        """Raise TrainingDiverged if a step's loss was not finite (one read of the device)."""
        self._check(int(self._bad_step.item()))

    def _check(self, bad_step: int) -> None:
        if bad_step:
            raise TrainingDiverged(
                f"loss is not finite at step {bad_step}; the weights are as they were before it"
            )

    @torch.no_grad()
    def evaluate(self, dataset: ParallelDataset) -> dict[str, float]:
        """Dev loss (NLL per target token, no label smoothing) and perplexity, over all ranks.

        ``dev_loss_wrong_src`` is the same loss with each batch's sources rotated by one
        sentence, so every target is scored against another sentence's source. While it
        stays as low as ``dev_loss`` the model ignores its source (a collapse into a
        language model that BLEU shows only after decoding); a learning model opens a gap.
        (A batch of one sentence keeps its own source: batches hold sentences of like length,
        so this happens only for the longest few.)
        """
        cfg, ctx = self.model_cfg, self.ctx
        scorer = self.scorer  # never DDP's wrapper: each rank scores its share of the batches

        # fp32 whatever the training precision: dev PPL is a reported number (Table 3), and
        # `transformer-core ppl` (fp32 by default) must give the same one.
        def nll(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
            return scorer(src, tgt_in, tgt_out, 0.0)[1]

        def nll_of_wrong_sources(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
            return scorer(src.roll(1, dims=0), tgt_in, tgt_out, 0.0)[1]

        def batches() -> Iterator[tuple[Tensor, Tensor, Tensor]]:
            return dataset_batches(
                dataset,
                self.cfg.max_tokens,
                cfg.pad_id,
                cfg.bos_id,
                cfg.eos_id,
                rank=ctx.rank,
                world_size=ctx.world_size,
            )

        scorer.eval()
        right = summed_nll(nll, batches(), cfg.pad_id, ctx.device)
        wrong = summed_nll(nll_of_wrong_sources, batches(), cfg.pad_id, ctx.device)
        scorer.train()
        nll_sum, wrong_sum, tokens, sentences = distributed.all_reduce_sum(
            [right.nll_sum, wrong.nll_sum, right.tokens, right.sentences], ctx
        )
        dev, wrong = (
            Perplexity(total, int(tokens), int(sentences)) for total in (nll_sum, wrong_sum)
        )
        return {
            "dev_loss": dev.nll_per_token,
            "dev_ppl": dev.perplexity,
            "dev_loss_wrong_src": wrong.nll_per_token,
        }

    # -- checkpoint state --------------------------------------------------------------------
    def state(self, wall_seconds: float, metrics: dict[str, Any]) -> dict[str, Any]:
        """Everything but model_config/model for ``save_checkpoint``; collective (gathers RNG states)."""
        return {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "schedule": {
                "d_model": self.model_cfg.d_model,
                "warmup": self.cfg.warmup,
                "lr_scale": self.cfg.lr_scale,
                "cooldown": self.cfg.cooldown,
                "steps": self.cfg.steps,
            },
            "rng": distributed.gather_objects(rng_state(), self.ctx),
            # This rank's loss and NLL since the last log line: the resumed interval's record
            # then averages the same steps as an uninterrupted run's.
            "interval_sums": distributed.gather_objects(
                torch.stack([self._loss_sum, self._nll_sum]).cpu(), self.ctx
            ),
            # The micro-batches the ranks cut and how a step groups them: a resume on another
            # number of ranks continues the same data order only where its ranks cut the same.
            "data": {
                **self.stream.position,
                "world_size": self.ctx.world_size,
                **self.micro_batches(),
            },
            "train_config": self.cfg.to_dict(),
            "training_path": self.path.record(),
            "token_counts": asdict(self.counts),
            "wall_seconds": wall_seconds,
            "metrics": metrics,
        }

    def micro_batches(self) -> dict[str, int]:
        """The micro-batches of this run's ranks (``micro_batch.cut``)."""
        return micro_batch.cut(
            self.sampler, self.fixed_shapes, self.ctx.world_size * self.accumulation
        )

    def _regroup(self, data: dict[str, Any], log: Callable[[str], None]) -> int:
        """This rank's index into the checkpoint's epoch when the checkpoint was written by
        another number of ranks (another node count), which cut the micro-batches these ranks
        cut (``run_dir.ranks_mismatch`` refused the session otherwise): the run continues the
        same trajectory (the same micro-batches in the same order, as many per step, by
        accumulation). Each rank's dropout generator cannot be split or merged: they are
        reseeded from the step, so only a run without dropout continues bit for bit."""
        ranks = int(data["world_size"])
        index = -(-int(data["index"]) * ranks // self.ctx.world_size)
        seed_everything(self.cfg.seed + self.ctx.rank + 1_000_003 * self.step)
        log(
            f"note: the checkpoint was written by {ranks} rank(s), this run has "
            f"{self.ctx.world_size}: the same micro-batches in the same order, "
            f"{self.ctx.world_size * self.accumulation} a step; dropout masks from generators "
            f"reseeded at step {self.step}"
        )
        return index

    def load_state(self, payload: dict[str, Any], log: Callable[[str], None]) -> None:
        """Continue from a checkpoint ``payload`` (loaded on the CPU)."""
        self.model.load_state_dict(payload["model"])
        if self.master:
            self.master.refresh()
        self.optimizer.load_state_dict(payload["optimizer"])
        self.step = int(payload["step"])
        self.counts = TokenCounts(**payload["token_counts"])
        self.wall_before = float(payload["wall_seconds"])
        # Exact before fixed shapes existed (run_dir.settings_mismatch refuses a change).
        data = {"fixed_shapes": False, **payload["data"]}
        epoch, index = int(data["epoch"]), int(data["index"])
        same_ranks = (
            int(data["world_size"]) == self.ctx.world_size
            and len(payload["rng"]) == self.ctx.world_size
        )
        if same_ranks:
            set_rng_state(payload["rng"][self.ctx.rank])
        else:
            index = self._regroup(data, log)
        if "interval_sums" in payload:
            # The log interval the checkpoint cut: each rank its own sums, or on other ranks
            # their total on rank 0 (the interval's all-reduce adds them up either way).
            sums = payload["interval_sums"]
            mine = sums[self.ctx.rank] if same_ranks else torch.stack(sums).sum(0)
            if same_ranks or self.ctx.is_main:
                self._loss_sum.copy_(mine[0])
                self._nll_sum.copy_(mine[1])
            self.interval_resumed = True
        dataset = self.stream.stream.dataset
        self.stream.close()
        self.stream = self._batches(dataset, epoch, index)
