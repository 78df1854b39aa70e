"""The settings dataclasses whose fields declare their own command-line flags.

One declaration per setting: each field of ``RuntimeSettings`` (where and how a model runs:
device, precision, compilation, threads), ``InferenceSettings`` (those, and the tokens of a
decoding batch), ``TrainConfig`` (the training recipe, and its runtime), ``DecodeOptions``
(the search), and of the data stage's settings (``data.settings``), carries its default, its
flag, its help and, where it has them, its type and choices (``option``). The commands make
their flags from these fields (``commands.add_options``), the workflow its arguments
(``command_flags``), and the tests hold the workflow's JSON schema to them key by key
(``tests/unit/test_config.py``). Here, apart from torch, so that ``transformer-core --help``
stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformer_core.errors import ConfigError, UserError
from transformer_core.model.config import experiment, require_choice, require_positive_integers
from transformer_core.parsing.trees import LINEARIZATIONS

# "Let the hardware decide": the default of the device, precision and compile settings, and
# of the workflow's thread counts; each setting's module says what it decides.
AUTO = "auto"
# "Choose it on the development set": a value of the workflow's decode.beam and decode.alpha
# (decoding.dev_choice says how).
DEV = "dev"
DEVICES = (AUTO, "cpu", "cuda")  # device.resolve_device says what each means
PRECISIONS = (AUTO, "fp32", "bf16")  # device.autocast_dtype says what each means
COMPILE_MODES = (AUTO, "on", "off")  # device.use_compile says what each means
BATCH_SHAPES = (AUTO, "fixed", "exact")  # device.use_fixed_shapes says what each means
COMPUTE_WEIGHTS = ("fp32", "bf16")  # training.master_weights says what bf16 means
QUANTIZE_MODES = ("off", "int8")  # translate --quantize: quantize.int8_model
# export: the engines, and CTranslate2's CPU weight types (int8, int16: quantized matrices)
EXPORT_FORMATS = ("ctranslate2", "transformers")
EXPORT_QUANTIZATIONS = ("float32", "int8", "int16")
INFERENCE_MAX_TOKENS = 4096  # tokens per batch of decoding and of `ppl`: speed and memory only
SPM_SAMPLE_SIZE = 10_000_000  # lines sentencepiece trains on at most (bounds its memory)
SEEDS = 2**32  # a seed is an integer from 0 to 2^32-1: numpy's and sacreBLEU's range


def parse_seed(text: str) -> int:
    """argparse type of every --seed: refused at parse time with the option's name rather
    than after the work."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < SEEDS:
        raise argparse.ArgumentTypeError(f"{value} is outside 0 to 2^32-1")
    return value


def word_or_number(word: str, kind: type, minimum: float) -> Callable[[str], Any]:
    """An argparse type: ``word``, or a finite number of ``kind`` (int or float) of at least
    ``minimum``."""

    def parse(text: str) -> Any:
        if text == word:
            return word
        try:
            value = kind(text)
        except ValueError:
            number = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"not {number} or {word}: {text!r}") from None
        if not minimum <= value < math.inf:
            raise argparse.ArgumentTypeError(
                f"must be finite and at least {minimum:g} (or {word}), got {value}"
            )
        return value

    return parse


# argparse type of train's --max-tokens: ``auto`` or a positive integer.
parse_max_tokens = word_or_number(AUTO, int, 1)


def option(default: Any, flag: str | None, help: str, **extra: Any) -> Any:
    """A field of a settings dataclass (this module's): its default and, where it has one,
    its command-line flag and help. The commands make their flags from these fields
    (``commands.add_options``; a boolean is ``--flag`` / ``--no-flag``) and the workflow its
    arguments (``command_flags``); the config key is the flag's name in snake case unless
    ``config`` names another, or is False: a flag the workflow sets from elsewhere (a job's
    threads and GPUs). ``extra``: argparse's ``type``, ``choices``, ``metavar``, and
    ``unset``, the help's words for a default of None."""
    return field(default=default, metadata={"flag": flag, "help": help, **extra})


def flagged_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of settings dataclass ``cls`` that have a command-line flag, in order."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("flag")]


def config_key(f: dataclasses.Field) -> str | None:
    """The workflow's config key of a flagged field: ``--max-len-a`` is ``max_len_a``; None for
    a flag without one (``option(config=False)``)."""
    if f.metadata.get("config") is False:
        return None
    return f.metadata.get("config") or f.metadata["flag"].removeprefix("--").replace("-", "_")


def config_fields(cls: type) -> list[dataclasses.Field]:
    """The flagged fields of ``cls`` that the workflow's configuration sets, in order."""
    return [f for f in flagged_fields(cls) if config_key(f) is not None]


def command_flags(cls: type, settings: dict[str, Any]) -> list[str]:
    """``settings`` (config keys -> values) as the flags of ``cls``'s command: each key that
    names a flagged field of ``cls`` and is not None, as ``--flag value`` (a boolean as
    ``--flag`` or ``--no-flag``, or as ``on`` / ``off`` for a field of words: YAML reads an
    unquoted ``compile: on`` as true), in field order."""
    flags: list[str] = []
    for f in config_fields(cls):
        value = settings.get(config_key(f))
        if isinstance(value, bool) and isinstance(f.default, bool):
            flags.append(("--" if value else "--no-") + f.metadata["flag"].removeprefix("--"))
        elif isinstance(value, bool):
            flags += [f.metadata["flag"], "on" if value else "off"]
        elif value is not None:
            flags += [f.metadata["flag"], str(value)]
    return flags


def require_flag_positive(settings: Any, name: str, optional: bool = False) -> None:
    """A ConfigError naming the flag of field ``name`` of ``settings`` when it is not a positive
    integer (None passes where ``optional``): these fields come from the command line."""
    value = getattr(settings, name)
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value!r}")


PRECISION_HELP = (
    "auto: bf16 autocast where the device computes bf16 natively (CUDA GPUs with bf16, CPUs "
    "with AVX512-BF16 or AMX), fp32 elsewhere; fp32: exact fp32; bf16: bf16 autocast, an error "
    "where it is not native. Master weights, the loss, the optimizer and search scores stay fp32"
)


@dataclass(frozen=True)
class RuntimeSettings:
    """Where and how a command runs its model: device, numeric precision, compilation and CPU
    threads. Hardware choices, not the recipe: each leaves what is computed the same up to
    rounding (docs/bf16.md, docs/gpu.md). ``section`` names the configuration's section in
    errors."""

    device: str = option(
        AUTO, "--device", "auto (CUDA if present), cpu or cuda", choices=DEVICES, config=False
    )
    precision: str = option(AUTO, "--precision", PRECISION_HELP, choices=PRECISIONS)
    compile: str = option(
        AUTO,
        "--compile",
        "torch.compile the model (training: the encoder and decoder stacks, and on GPUs the "
        "loss's softmax and gradient; decoding: the whole step of a decoder of few shapes, "
        "CUDA graphs on GPUs): on, off, or auto, where it was measured faster (docs/gpu.md, "
        "'Compilation'); the first batches of new shapes pay the compilation",
        choices=COMPILE_MODES,
    )
    num_threads: int | None = option(
        None, "--num-threads", "CPU threads for torch", type=int, unset="torch's choice",
        config=False,
    )  # fmt: skip

    section = "runtime"

    def __post_init__(self) -> None:
        require_flag_positive(self, "num_threads", optional=True)
        require_choice(self, self.section, "precision", PRECISIONS)
        require_choice(self, self.section, "compile", COMPILE_MODES)
        require_choice(self, self.section, "device", DEVICES)


@dataclass(frozen=True)
class InferenceSettings(RuntimeSettings):
    """A decoding or scoring command's runtime: ``RuntimeSettings`` and the tokens of a batch
    (speed and memory only: batches never change a result beyond rounding)."""

    max_tokens: int = option(
        INFERENCE_MAX_TOKENS, "--max-tokens", "source tokens per batch, padding included"
    )

    section = "decode"

    def __post_init__(self) -> None:
        super().__post_init__()
        require_flag_positive(self, "max_tokens")


@dataclass(frozen=True)
class TrainConfig(RuntimeSettings):
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
    steps: int = option(100_000, "--steps", "optimizer steps", by_experiment=True)
    # auto: training.micro_batch decides from the device (its share of the step on a GPU,
    # the paper's 3,125 on a CPU) and the run records the number.
    max_tokens: int | str = option(
        AUTO,
        "--max-tokens",
        "padded tokens per micro-batch per device, side; auto: on a GPU its share of the step "
        "(tokens-per-step / devices), halved until it fits the GPU's memory, down to 3125; on "
        "a CPU 3125 (the paper's 25000 over 8 GPUs)",
        type=parse_max_tokens,
    )
    tokens_per_step: int = option(
        25_000,
        "--tokens-per-step",
        "target tokens per optimizer step over all devices; gradients are accumulated over "
        "ceil(this / (max-tokens x devices)) micro-batches, or micro-batches are packed to "
        "ceil(this / devices) where that is less than max-tokens",
    )
    warmup: int = option(4000, "--warmup", "warmup steps of the schedule")
    lr_scale: float = option(
        1.0,
        "--lr-scale",
        "multiplies the paper's learning rate d_model^-0.5 min(step^-0.5, step warmup^-1.5); "
        "1.0 is the paper, short smoke runs of tiny models may use another",
    )
    cooldown: int = option(
        0,
        "--cooldown",
        "multiply the schedule of the last K steps by a line falling from 1 to 1/K (0: "
        "none, the paper); not the paper's recipe: a run of fixed length ends in smaller steps",
        metavar="K",
    )
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    # About 10 minutes of the paper's base run; 600 for big (docs/recipe.md, checkpoints).
    checkpoint_interval: int = option(
        1500,
        "--checkpoint-interval",
        "checkpoint every K steps, and always at the end",
        metavar="K",
        by_experiment=True,
    )
    # Enough to average the paper's last 5 (base); 20 for big. The workflow keeps what it averages.
    keep_last: int = option(
        5,
        "--keep-last",
        "keep the newest M checkpoints",
        metavar="M",
        config="average_last",
        by_experiment=True,
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
    )
    seed: int = option(
        1, "--seed", "random seed (rank r uses seed + r for dropout)", type=parse_seed
    )
    log_interval: int = option(100, "--log-interval", "log every L steps", metavar="L")
    batch_shapes: str = option(
        AUTO, "--batch-shapes", "fixed: the exact batches, each collated to one shape per width "
        "of a ladder (rows: the most pairs an exact batch of the width holds), few for a "
        "compiled step; exact: the least padding; auto: fixed where compiled",
        choices=BATCH_SHAPES,
    )  # fmt: skip
    compute_weights: str = option(
        "fp32", "--compute-weights", "fp32: the step computes with the fp32 weights (bf16 autocast "
        "casts them once a step); bf16: with a bf16 copy of them, refreshed after each optimizer "
        "step, without autocast (activations bf16 throughout; Adam updates the fp32 weights); "
        "needs bf16 precision",
        choices=COMPUTE_WEIGHTS,
    )  # fmt: skip
    tensorboard: bool = option(
        True,
        "--tensorboard",
        "write the logged values as TensorBoard scalars into RUN_DIR/tensorboard, where the "
        "tensorboard package is installed (the monitor extra)",
    )

    # Settings that change the trajectory: a resumed run must use the same values.
    TRAJECTORY = (
        "max_tokens", "tokens_per_step", "warmup", "lr_scale", "cooldown", "adam_beta1",
        "adam_beta2", "adam_eps", "seed",
    )  # fmt: skip

    section = "train"

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_integers(
            self, "train", ("steps", "tokens_per_step", "warmup", "checkpoint_interval",
                            "keep_last", "log_interval"),
        )  # fmt: skip
        value = self.max_tokens
        if value != AUTO and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"train.max_tokens must be a positive integer or auto, got {value!r}")
        if self.dev_interval is not None:
            require_positive_integers(self, "train", ("dev_interval",))
        require_choice(self, "train", "batch_shapes", BATCH_SHAPES)
        require_choice(self, "train", "compute_weights", COMPUTE_WEIGHTS)
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not 0 <= self.seed < SEEDS
        ):
            raise ConfigError(f"train.seed must be an integer from 0 to 2^32-1, got {self.seed!r}")
        if isinstance(self.cooldown, bool) or not isinstance(self.cooldown, int):
            raise ConfigError(f"train.cooldown must be an integer, got {self.cooldown!r}")
        if not 0 <= self.cooldown <= self.steps:
            raise ConfigError(
                f"train.cooldown must be from 0 to train.steps ({self.steps}), got {self.cooldown}"
            )
        if not self.lr_scale > 0:
            raise ConfigError(f"train.lr_scale must be positive, got {self.lr_scale!r}")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"train.{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not self.adam_eps > 0:
            raise ConfigError(f"train.adam_eps must be positive, got {self.adam_eps!r}")

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
    def for_experiment(cls, name: str, **overrides: Any) -> TrainConfig:
        """Defaults of a preset or Table 3 row (its steps; big: checkpoints every 600 steps, keep 20)."""
        exp = experiment(name)
        defaults: dict[str, Any] = {"steps": exp.train_steps}
        if name == "big":
            defaults.update(checkpoint_interval=600, keep_last=20)
        return cls(**{**defaults, **{k: v for k, v in overrides.items() if v is not None}})


@dataclass(frozen=True)
class DecodeOptions:
    """Search settings (``decoding/search.py``); the defaults are the paper's translation setup,
    and the CLI's (``translate``, ``bleu_curve``; the workflow's ``decode`` sections, through
    ``decode_flags``). The maximum output length is ``max_len_a * source length + max_len_b``;
    ``min_len`` forbids EOS before that many real tokens (0 for the paper's decoding;
    benchmarks use it to force equal output lengths)."""

    beam: int = option(4, "--beam", "beam size; 1 is greedy")
    alpha: float = option(0.6, "--alpha", "length penalty ((5+|Y|)/6)^alpha")
    max_len_a: float = option(
        1.0, "--max-len-a", "maximum output length = a * source length + b: a"
    )
    max_len_b: int = option(50, "--max-len-b", "b of the maximum output length")
    tree_constraint: str | None = option(
        None,
        "--tree-constraint",
        "parsing: extend hypotheses only into well-formed trees of this linearization, with one "
        "leaf per source word; under words each leaf is the source's next word, copied "
        "(transformer_core/parsing/constraint.py; the paper decodes without it)",
        type=str,
        choices=LINEARIZATIONS,
        config="tree_constraint",
    )
    min_len: int = option(0, None, "")

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise UserError(f"--beam must be at least 1, got {self.beam}")
        for name in ("alpha", "max_len_a"):  # NaN or infinity makes every output one word
            if not 0 <= (value := getattr(self, name)) < math.inf:
                raise UserError(f"--{name.replace('_', '-')} must be finite and >= 0, got {value}")
        if 2 * self.max_len_a + self.max_len_b < 1:  # a one-word source: its piece and EOS
            raise UserError(f"--max-len-a {self.max_len_a} --max-len-b {self.max_len_b}: a "
                            "one-word source (2 tokens) would get no output token")  # fmt: skip


# The paper's parsing search (section 6.3): beam 21, alpha 0.3, maximum output length input + 300.
PARSING_SEARCH = DecodeOptions(beam=21, alpha=0.3, max_len_b=300)


def decode_fields() -> list[dataclasses.Field]:
    """The ``DecodeOptions`` fields that have a command-line flag, in declaration order."""
    return flagged_fields(DecodeOptions)


def decode_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (a config's ``decode`` section) as the search flags of ``translate``."""
    return command_flags(DecodeOptions, settings)


def inference_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (a config's ``decode`` section) as the runtime flags of ``translate``."""
    return command_flags(InferenceSettings, settings)


def train_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (config keys: ``train``'s, ``steps``, ``checkpoint_interval``,
    ``average_last``) as the recipe flags of ``transformer-core train``."""
    return command_flags(TrainConfig, settings)
