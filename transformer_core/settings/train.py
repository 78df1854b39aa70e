"""The training recipe (paper section 5), the run's bookkeeping, and where it runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer_core.errors import ConfigError
from transformer_core.settings.fields import (
    AUTO,
    BATCH_SHAPES,
    COMPUTE_WEIGHTS,
    SEEDS,
    option,
    parse_max_tokens,
    parse_seed,
)
from transformer_core.settings.flags import command_flags
from transformer_core.settings.runtime import RuntimeSettings


@dataclass(frozen=True)
class TrainSettings(RuntimeSettings):
    """The training recipe (paper section 5), the run's bookkeeping, and where it runs
    (``RuntimeSettings``).

    ``tokens_per_step`` is the number of *target* tokens per optimizer step,
    summed over all devices (the paper: about 25000, with as many source
    tokens). ``max_tokens`` bounds one micro-batch on one device (padded tokens
    per side). Gradients are accumulated over
    ``ceil(tokens_per_step / (max_tokens * world_size))`` micro-batches, so a
    step holds about the same tokens on 1 GPU as on 8 and steps stay comparable;
    where one micro-batch per device would hold more than ``tokens_per_step``,
    micro-batches are packed smaller (``batch_tokens``).
    """

    # The flagged fields are `transformer-core train`'s options (commands.add_train_arguments);
    # ``by_experiment``: the preset decides when the option is left out (``for_experiment``).
    steps: int = option(100_000, "--steps", "optimizer steps", minimum=1, by_experiment=True)
    # auto: training.micro_batch decides from the device (its share of the step on a GPU,
    # the paper's 3,125 on a CPU) and the run records the number.
    max_tokens: int | str = option(
        AUTO,
        "--max-tokens",
        "padded tokens per micro-batch per device, side; auto: on a GPU its share of the step "
        "(tokens-per-step / devices), halved until it fits the GPU's memory, down to 3125; on "
        "a CPU 3125 (the paper's 25000 over 8 GPUs)",
        type=parse_max_tokens,
        minimum=1,
        doc="it must hold the longest sentence pair; the run records the number chosen. Paper: "
        "3125 on each of 8 GPUs",
        required=True,
        trajectory=True,
    )
    tokens_per_step: int = option(
        25_000,
        "--tokens-per-step",
        "target tokens per optimizer step over all devices; gradients are accumulated over "
        "ceil(this / (max-tokens x devices)) micro-batches, or micro-batches are packed to "
        "ceil(this / devices) where that is less than max-tokens",
        minimum=1,
        doc="the same whatever the device count. Paper: about 25000",
        required=True,
        trajectory=True,
    )
    warmup: int = option(
        4000, "--warmup", "warmup steps of the schedule", minimum=1, required=True,
        trajectory=True, doc="lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * "
        "warmup^-1.5). Paper: 4000",
    )  # fmt: skip
    lr_scale: float = option(
        1.0,
        "--lr-scale",
        "multiplies the paper's learning rate d_model^-0.5 min(step^-0.5, step warmup^-1.5); "
        "1.0 is the paper, short smoke runs of tiny models may use another",
        above=0,
        doc="Paper: 1.0",
        trajectory=True,
    )
    cooldown: int = option(
        0,
        "--cooldown",
        "multiply the schedule of the last K steps by a line falling from 1 to 1/K (0: "
        "none, the paper); not the paper's recipe: a run of fixed length ends in smaller steps",
        metavar="K",
        minimum=0,
        schema_default=False,
        trajectory=True,
        doc="K at most the run's steps; a cooled run resumes only to its own steps. Left out: "
        "none, as the paper",
    )
    # Adam (paper section 5.3); no flag: the paper's values, which no experiment changes.
    adam_beta1: float = option(0.9, None, "Adam's beta1", minimum=0, below=1, trajectory=True)
    adam_beta2: float = option(0.98, None, "Adam's beta2", minimum=0, below=1, trajectory=True)
    adam_eps: float = option(1e-9, None, "Adam's epsilon", above=0, trajectory=True)
    # About 10 minutes of the paper's base run; 600 for big (docs/recipe.md, checkpoints).
    checkpoint_interval: int = option(
        1500,
        "--checkpoint-interval",
        "checkpoint every K steps, and always at the end",
        doc="models.base's is every Table 3 row's but big's. Paper: every 10 minutes (1500 "
        "steps of base, 600 of big on its P100s)",
        metavar="K",
        minimum=1,
        by_experiment=True,
        required=True,
    )
    # Enough to average the paper's last 5 (base); 20 for big. The workflow keeps what it averages.
    keep_last: int = option(
        5,
        "--keep-last",
        "keep the newest M checkpoints",
        doc="the checkpoints averaged for Table 2. Paper: the last 5 (base), 20 (big)",
        metavar="M",
        minimum=1,
        config="average_last",
        by_experiment=True,
        required=True,
    )
    # Scoring dev twice (right and wrong sources, in fp32) costs a small model about a tenth
    # of its training at a checkpoint every 100 steps (docs/table4.md).
    dev_interval: int | None = option(
        None,
        "--dev-interval",
        "score the dev split (--dev) every K steps and at the end",
        metavar="K",
        type=int,
        unset="every checkpoint",
        minimum=1,
        doc="its loss, and its loss with wrong sources, in fp32; left out, at every checkpoint. "
        "Scoring twice costs a small model at a checkpoint every 100 steps a tenth of its "
        "training",
    )
    seed: int = option(
        1, "--seed", "random seed (rank r uses seed + r for dropout)", type=parse_seed,
        minimum=0, maximum=SEEDS - 1, trajectory=True, doc="the seed of the runs at "
        "runs/<pair>/<exp>, one of seeds",
    )  # fmt: skip
    log_interval: int = option(100, "--log-interval", "log every L steps", metavar="L", minimum=1)
    batch_shapes: str = option(
        AUTO, "--batch-shapes", "fixed: the exact batches, each collated to one shape per width "
        "of a ladder (rows: the most pairs an exact batch of the width holds), few for a "
        "compiled step; exact: the least padding; auto: fixed where compiled",
        choices=BATCH_SHAPES, doc="a hardware choice: the same sentences share a step either "
        "way and padding changes no loss or gradient, only the work (docs/gpu.md, 'Fixed batch "
        "shapes'); on WMT-like lengths 27.6% of fixed shapes' slots are padding, 11.8% of "
        "exact ones'",
    )  # fmt: skip
    compute_weights: str = option(
        AUTO, "--compute-weights", "fp32: the step computes with the fp32 weights (bf16 autocast "
        "casts them once a step); bf16: with a bf16 copy of them, refreshed after each optimizer "
        "step, without autocast (activations bf16 throughout; Adam updates the fp32 weights); "
        "needs bf16 precision; auto: bf16 where the step is compiled on a GPU under bf16, fp32 "
        "elsewhere (a resumed run keeps what it recorded)",
        choices=COMPUTE_WEIGHTS, doc="checkpoints hold the fp32 weights, so a run resumes with "
        "either value. A hardware choice: its loss and gradients are tested as close to fp32 as "
        "autocast's (docs/gpu.md, 'bf16 compute weights')",
    )  # fmt: skip
    tensorboard: bool = option(
        True,
        "--tensorboard",
        "write the logged values as TensorBoard scalars into RUN_DIR/tensorboard, where the "
        "tensorboard package is installed (the monitor extra)",
        doc='pip install -e ".[monitor]"; false writes none',
    )

    section = "train"

    def __post_init__(self) -> None:
        value = self.max_tokens
        if value != AUTO and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"train.max_tokens must be a positive integer or auto, got {value!r}")
        super().__post_init__()
        if self.cooldown > self.steps:
            raise ConfigError(
                f"train.cooldown must be from 0 to train.steps ({self.steps}), got {self.cooldown}"
            )

    @classmethod
    def trajectory(cls) -> tuple[str, ...]:
        """The settings that change the trajectory (``option(trajectory=True)``): a resumed
        run must use the same values."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("trajectory"))

    @property
    def dev_every(self) -> int:
        """Steps between two scorings of the dev split."""
        return self.dev_interval or self.checkpoint_interval

    def accumulation(self, world_size: int) -> int:
        """Micro-batches per device per optimizer step (``max_tokens`` a number:
        ``training.micro_batch.resolved``)."""
        return -(-self.tokens_per_step // (self.max_tokens * world_size))

    def batch_tokens(self, world_size: int) -> int:
        """Tokens per side a micro-batch is packed to: ``max_tokens``, or less where one
        micro-batch per device would hold more than ``tokens_per_step`` (then a pair longer
        than it, up to ``max_tokens``, is a micro-batch of its own)."""
        return min(self.max_tokens, -(-self.tokens_per_step // world_size))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def for_experiment(cls, exp: Any, **overrides: Any) -> TrainSettings:
        """Defaults of experiment ``exp`` (``model.config.experiment``: a preset or Table 3
        row): its steps; big checkpoints every 600 steps and keeps 20."""
        defaults: dict[str, Any] = {"steps": exp.train_steps}
        if exp.name == "big":
            defaults.update(checkpoint_interval=600, keep_last=20)
        return cls(**{**defaults, **{k: v for k, v in overrides.items() if v is not None}})


def train_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (config keys: ``train``'s, ``steps``, ``checkpoint_interval``,
    ``average_last``) as the recipe flags of ``transformer-core train``."""
    return command_flags(TrainSettings, settings)
