"""Typed model configuration, the paper's presets and the Table 3 rows as data.

``ModelConfig`` is validated on construction: a bad value raises ``ConfigError``
(a ``ValueError``) naming the field. A checkpoint stores ``ModelConfig.to_dict()``
so that any later stage rebuilds the model from the file alone.

Table 3 rows are *named overrides of base* (SPEC.md section 1): one row is one
entry of ``TABLE3_ROWS``, and the workflow takes its wildcards from that table.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from transformer_core.errors import ConfigError, UserError

# "Let the hardware decide": the default of the device, precision and compile settings, and
# of the workflow's thread counts; each setting's module says what it decides.
AUTO = "auto"
DEVICES = (AUTO, "cpu", "cuda")  # device.resolve_device says what each means
PRECISIONS = (AUTO, "fp32", "bf16")  # device.autocast_dtype says what each means
QUANTIZE_MODES = ("off", "int8")  # translate --quantize: quantize.int8_model
# transformer-core export: the engines, and the CPU weight types of CTranslate2's converter
# (int8 and int16 quantize the matrices, activations are quantized at run time).
EXPORT_FORMATS = ("ctranslate2",)
EXPORT_QUANTIZATIONS = ("float32", "int8", "int16")
COMPILE_MODES = (AUTO, "on", "off")  # device.use_compile says what each means
INFERENCE_MAX_TOKENS = 4096  # tokens per batch of decoding and of `ppl`: speed and memory only
SPM_SAMPLE_SIZE = 10_000_000  # lines sentencepiece trains on at most (bounds its memory)

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
INITIALIZATIONS = ("xavier", "normal")

# Special token ids; sentencepiece models are trained with the same ids.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@dataclass(frozen=True)
class ModelConfig:
    """Shape and regularization of the post-norm encoder-decoder (paper section 3).

    ``d_k`` and ``d_v`` are independent of ``d_model / h``: Table 3 row B shrinks
    ``d_k`` alone, so ``h * d_k`` need not equal ``d_model``.
    """

    vocab_size: int = 37000
    encoder_layers: int = 6
    decoder_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    h: int = 8
    d_k: int = 64
    d_v: int = 64
    dropout: float = 0.1  # P_drop: embedding+position sums and every sub-layer output
    label_smoothing: float = 0.1  # eps_ls; used by the training loss, stored with the model
    positional: str = "sinusoidal"  # "sinusoidal" or "learned" (Table 3 row E)
    max_positions: int = 1024  # longest sequence the (learned) position table holds
    # Weight initialization (the paper names none). "xavier": tensor2tensor's and fairseq's,
    # Xavier-uniform projections and the shared embedding from N(0, d_model^-0.5); "normal":
    # every weight matrix, the embedding included, from N(0, init_std) (BERT, Marian).
    init: str = "xavier"
    init_std: float = 0.02
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "encoder_layers",
            "decoder_layers",
            "d_model",
            "d_ff",
            "h",
            "d_k",
            "d_v",
            "max_positions",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")
        for name in ("dropout", "label_smoothing"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0.0 <= value < 1.0
            ):
                raise ConfigError(f"model.{name} must be a number in [0, 1), got {value!r}")
        if self.positional not in POSITIONAL_ENCODINGS:
            raise ConfigError(
                f"model.positional must be one of {', '.join(POSITIONAL_ENCODINGS)}, got {self.positional!r}"
            )
        if self.init not in INITIALIZATIONS:
            raise ConfigError(
                f"model.init must be one of {', '.join(INITIALIZATIONS)}, got {self.init!r}"
            )
        if (
            isinstance(self.init_std, bool)
            or not isinstance(self.init_std, (int, float))
            or not self.init_std > 0
        ):
            raise ConfigError(f"model.init_std must be a positive number, got {self.init_std!r}")
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in ids.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value < self.vocab_size
            ):
                raise ConfigError(
                    f"model.{name} must be an integer in [0, vocab_size={self.vocab_size}), got {value!r}"
                )
        if len(set(ids.values())) != len(ids):
            raise ConfigError(f"model.pad_id, bos_id and eos_id must differ, got {ids}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], where: str = "model") -> ModelConfig:
        """Build from a mapping; an unknown key is an error naming it (a typo never passes silently)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"unknown key(s) in {where}: {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return cls(**values)

    def replace(self, **overrides: Any) -> ModelConfig:
        return self.from_dict({**self.to_dict(), **overrides})


@dataclass(frozen=True)
class Experiment:
    """A named model variant with the paper's training length and reported values."""

    name: str
    model: dict[str, Any] = field(default_factory=dict)  # overrides of the base preset
    train_steps: int = 100_000
    description: str = ""


BASE = ModelConfig()
BIG = BASE.replace(d_model=1024, d_ff=4096, h=16, dropout=0.3)

PRESETS: dict[str, Experiment] = {
    "base": Experiment("base", {}, 100_000, "Transformer (base model)"),
    "big": Experiment(
        "big",
        {"d_model": 1024, "d_ff": 4096, "h": 16, "dropout": 0.3},
        300_000,
        "Transformer (big)",
    ),
    # Table 4 (paper section 6.3): 4 layers, d_model 1024, the base recipe otherwise (d_ff 2048,
    # h 8, so d_k = d_v = 1024 / 8). The paper leaves the training length unsaid and keeps "all
    # other parameters unchanged from the English-to-German base translation model": base's 100K.
    "parsing": Experiment(
        "parsing",
        {"encoder_layers": 4, "decoder_layers": 4, "d_model": 1024, "d_k": 128, "d_v": 128},
        100_000,
        "Transformer (4 layers)",
    ),
}

# Table 3 of the paper; row names are ours (SPEC.md). Unlisted values equal base.
TABLE3_ROWS: dict[str, Experiment] = {
    e.name: e
    for e in [
        PRESETS["base"],
        Experiment("A1", {"h": 1, "d_k": 512, "d_v": 512}, description="(A) 1 head"),
        Experiment("A2", {"h": 4, "d_k": 128, "d_v": 128}, description="(A) 4 heads"),
        Experiment("A3", {"h": 16, "d_k": 32, "d_v": 32}, description="(A) 16 heads"),
        Experiment("A4", {"h": 32, "d_k": 16, "d_v": 16}, description="(A) 32 heads"),
        Experiment("B1", {"d_k": 16}, description="(B) d_k = 16"),
        Experiment("B2", {"d_k": 32}, description="(B) d_k = 32"),
        Experiment("C1", {"encoder_layers": 2, "decoder_layers": 2}, description="(C) N = 2"),
        Experiment("C2", {"encoder_layers": 4, "decoder_layers": 4}, description="(C) N = 4"),
        Experiment("C3", {"encoder_layers": 8, "decoder_layers": 8}, description="(C) N = 8"),
        Experiment("C4", {"d_model": 256, "d_k": 32, "d_v": 32}, description="(C) d_model = 256"),
        Experiment(
            "C5", {"d_model": 1024, "d_k": 128, "d_v": 128}, description="(C) d_model = 1024"
        ),
        Experiment("C6", {"d_ff": 1024}, description="(C) d_ff = 1024"),
        Experiment("C7", {"d_ff": 4096}, description="(C) d_ff = 4096"),
        Experiment("D1", {"dropout": 0.0}, description="(D) P_drop = 0.0"),
        Experiment("D2", {"dropout": 0.2}, description="(D) P_drop = 0.2"),
        Experiment("D3", {"label_smoothing": 0.0}, description="(D) eps_ls = 0.0"),
        Experiment("D4", {"label_smoothing": 0.2}, description="(D) eps_ls = 0.2"),
        Experiment("E", {"positional": "learned"}, description="(E) learned positional embedding"),
        PRESETS["big"],
    ]
}


# Every experiment by name: the Table 3 rows (base and big among them), then the other presets.
EXPERIMENTS: dict[str, Experiment] = {**TABLE3_ROWS, **PRESETS}


def experiment(name: str) -> Experiment:
    """A preset or Table 3 row by name; an unknown name lists the known ones."""
    if name in EXPERIMENTS:
        return EXPERIMENTS[name]
    raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")


def model_config(name: str, **overrides: Any) -> ModelConfig:
    """The ModelConfig of a preset or Table 3 row, with further overrides (e.g. vocab_size)."""
    return BASE.replace(**{**experiment(name).model, **overrides})


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


def option(default: Any, flag: str | None, help: str, **extra: Any) -> Any:
    """A field of a settings dataclass (``TrainConfig``, ``DecodeOptions``): its default and,
    where it has one, its command-line flag and help. The commands make their flags from
    these fields (``commands.add_option_arguments``) and the workflow its arguments
    (``command_flags``); the config key is the flag's name in snake case unless ``config``
    names another. ``extra``: argparse's ``type``, ``choices``, ``metavar``."""
    return field(default=default, metadata={"flag": flag, "help": help, **extra})


def flagged_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of settings dataclass ``cls`` that have a command-line flag, in order."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("flag")]


def config_key(f: dataclasses.Field) -> str:
    """The workflow's config key of a flagged field: ``--max-len-a`` is ``max_len_a``."""
    return f.metadata.get("config") or f.metadata["flag"].removeprefix("--").replace("-", "_")


def command_flags(cls: type, settings: dict[str, Any]) -> list[str]:
    """``settings`` (config keys -> values) as the flags of ``cls``'s command: each key that
    names a flagged field of ``cls`` and is not None, as ``--flag value``, in field order."""
    flags: list[str] = []
    for f in flagged_fields(cls):
        value = settings.get(config_key(f))
        if value is not None:
            flags += [f.metadata["flag"], str(value)]
    return flags


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe (paper section 5) and the run's bookkeeping.

    ``tokens_per_step`` is the number of *target* tokens per optimizer step,
    summed over all devices (the paper: about 25000, with as many source
    tokens). ``max_tokens`` bounds one micro-batch on one device (padded tokens
    per side). Gradients are accumulated over
    ``ceil(tokens_per_step / (max_tokens * world_size))`` micro-batches, so a
    step holds about the same tokens on 1 GPU as on 8 and steps stay comparable.
    """

    # The flagged fields are `transformer-core train`'s options (commands.add_train_arguments);
    # ``by_experiment``: the preset decides when the option is left out (``for_experiment``).
    steps: int = option(100_000, "--steps", "optimizer steps", by_experiment=True)
    # The paper's 25000 over 8 GPUs: one micro-batch each, no accumulation.
    max_tokens: int = option(
        3125, "--max-tokens", "tokens per micro-batch per device, per side, padding included"
    )
    tokens_per_step: int = option(
        25_000,
        "--tokens-per-step",
        "target tokens per optimizer step over all devices; gradients are accumulated over "
        "ceil(this / (max-tokens x devices)) micro-batches",
    )
    warmup: int = option(4000, "--warmup", "warmup steps of the schedule")
    lr_scale: float = option(
        1.0,
        "--lr-scale",
        "multiplies the paper's learning rate d_model^-0.5 min(step^-0.5, step warmup^-1.5); "
        "1.0 is the paper, short smoke runs of tiny models may use another",
    )
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    # SPEC.md: ~10 minutes of the paper's base run; 600 for big.
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
    seed: int = option(
        1, "--seed", "random seed (rank r uses seed + r for dropout)", type=parse_seed
    )
    log_interval: int = option(100, "--log-interval", "log every L steps", metavar="L")
    precision: str = AUTO  # auto | fp32 | bf16
    device: str = AUTO  # auto | cpu | cuda
    num_threads: int | None = None  # torch CPU threads; None leaves torch's default
    compile: str = AUTO  # auto | on | off: torch.compile of the model (device.use_compile)

    # Settings that change the trajectory: a resumed run must use the same values.
    TRAJECTORY = (
        "max_tokens",
        "tokens_per_step",
        "warmup",
        "lr_scale",
        "adam_beta1",
        "adam_beta2",
        "adam_eps",
        "seed",
    )

    def __post_init__(self) -> None:
        for name in (
            "steps",
            "max_tokens",
            "tokens_per_step",
            "warmup",
            "checkpoint_interval",
            "keep_last",
            "log_interval",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"train.{name} must be a positive integer, got {value!r}")
        if self.num_threads is not None and (
            isinstance(self.num_threads, bool)
            or not isinstance(self.num_threads, int)
            or self.num_threads <= 0
        ):
            raise ConfigError(
                f"train.num_threads must be a positive integer, got {self.num_threads!r}"
            )
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not 0 <= self.seed < SEEDS
        ):
            raise ConfigError(f"train.seed must be an integer from 0 to 2^32-1, got {self.seed!r}")
        if not self.lr_scale > 0:
            raise ConfigError(f"train.lr_scale must be positive, got {self.lr_scale!r}")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"train.{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not self.adam_eps > 0:
            raise ConfigError(f"train.adam_eps must be positive, got {self.adam_eps!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"train.precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.compile not in COMPILE_MODES:
            raise ConfigError(
                f"train.compile must be one of {', '.join(COMPILE_MODES)}, got {self.compile!r}"
            )
        if self.device not in DEVICES:
            raise ConfigError(
                f"train.device must be one of {', '.join(DEVICES)}, got {self.device!r}"
            )

    def accumulation(self, world_size: int) -> int:
        """Micro-batches per device per optimizer step."""
        return -(-self.tokens_per_step // (self.max_tokens * world_size))

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


def parse_overrides(
    items: list[str], cls: type = ModelConfig, where: str = "--set"
) -> dict[str, Any]:
    """``["d_model=256", "dropout=0.3"]`` -> typed values for ``cls``'s fields.

    An unknown key or a value of the wrong type is a ConfigError naming it.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{where} {item!r}: expected KEY=VALUE")
        if key not in fields:
            raise ConfigError(
                f"{where} {item!r}: unknown key {key!r} (known: {', '.join(sorted(fields))})"
            )
        kind = type(fields[key].default)
        try:
            value = float(text) if kind is float else int(text) if kind is int else text
        except ValueError:
            raise ConfigError(
                f"{where} {item!r}: {key} takes a {kind.__name__}, got {text!r}"
            ) from None
        overrides[key] = value
    return overrides


@dataclass(frozen=True)
class DecodeOptions:
    """Search settings (``search.py``); the defaults are the paper's translation setup, and the CLI's.

    Here, beside the other configuration dataclasses, so that ``transformer-core --help``
    reads the defaults without importing torch. Each field with a flag is declared once
    here: ``commands.add_decode_arguments`` makes the flags of ``translate`` and
    ``bleu_curve`` from these fields, and the workflow passes its ``decode`` settings (Table
    4's for the parsing runs) through ``decode_flags``; the schema's ``decode`` section is
    tested against them (``tests/test_config.py``).

    The maximum output length is ``max_len_a * source length + max_len_b``
    (``max_output_lengths``); ``min_len`` forbids EOS before that many real tokens
    (0 for the paper's decoding; benchmarks use it to force equal output lengths).
    """

    beam_size: int = option(4, "--beam", "beam size; 1 is greedy")
    alpha: float = option(0.6, "--alpha", "length penalty ((5+|Y|)/6)^alpha")
    max_len_a: float = option(
        1.0, "--max-len-a", "maximum output length = a * source length + b: a"
    )
    max_len_b: int = option(50, "--max-len-b", "b of the maximum output length")
    tree_constraint: str | None = option(
        None,
        "--tree-constraint",
        "parsing: extend hypotheses only into well-formed trees of this linearization, with one "
        "leaf per source word (transformer_core/parsing/constraint.py; the paper decodes "
        "without it)",
        type=str,
        choices=("xx", "tags", "words"),  # parsing.trees.LINEARIZATIONS (tested equal)
        config="tree_constraint",
    )
    min_len: int = option(0, None, "")

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise UserError(f"--beam must be at least 1, got {self.beam_size}")


# The paper's parsing search (section 6.3): beam 21, alpha 0.3, maximum output length input + 300.
PARSING_SEARCH = DecodeOptions(beam_size=21, alpha=0.3, max_len_b=300)


def decode_fields() -> list[dataclasses.Field]:
    """The ``DecodeOptions`` fields that have a command-line flag, in declaration order."""
    return flagged_fields(DecodeOptions)


def decode_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (a config's ``decode`` section) as the search flags of ``translate``."""
    return command_flags(DecodeOptions, settings)


def train_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (config keys: ``train``'s, ``steps``, ``checkpoint_interval``,
    ``average_last``) as the recipe flags of ``transformer-core train``."""
    return command_flags(TrainConfig, settings)
