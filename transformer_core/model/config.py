"""Typed model configuration, the paper's presets and the Table 3 rows as data.

``ModelConfig`` is validated on construction: a bad value raises ``ConfigError``
(a ``ValueError``) naming the field. A checkpoint stores ``ModelConfig.to_dict()``
so that any later stage rebuilds the model from the file alone.

Table 3 rows are *named overrides of base* (docs/recipe.md, Targets): one row is one
entry of ``TABLE3_ROWS``, and the workflow takes its wildcards from that table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from transformer_core.errors import ConfigError
from transformer_core.settings.fields import option, require_declared

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
INITIALIZATIONS = ("xavier", "normal")

# Special token ids; sentencepiece models are trained with the same ids.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


# The configuration sections a ModelConfig field may be set in (``option``'s ``sections``):
# ``model`` (every model of the scale) and Table 4's ``table4.train`` (the parsing runs').
MODEL, PARSING_TRAIN = "model", "table4.train"


def model_option(default: Any, help: str, sections: tuple[str, ...] = (), **bounds: Any) -> Any:
    """A ModelConfig field: no command-line flag (a model's shape comes from its experiment),
    its bounds, and the configuration sections that may set it. ``shape``: a published
    model's shape or P_drop, which replaces the scaled preset's value, so the schema gives it
    no default (``workflow_plan.schema``, ``config_checks.check_model_shape``)."""
    return option(default, None, help, sections=sections, **bounds)


@dataclass(frozen=True)
class ModelConfig:
    """Shape and regularization of the post-norm encoder-decoder (paper section 3).

    ``d_k`` and ``d_v`` are independent of ``d_model / h``: Table 3 row B shrinks
    ``d_k`` alone, so ``h * d_k`` need not equal ``d_model``. Each field declares its bounds
    once (``settings.fields.option``): construction checks them, and the configuration
    schema's ``model`` and ``table4.train`` keys are generated from them.
    """

    vocab_size: int = model_option(37000, "Joint vocabulary size", minimum=1)
    encoder_layers: int = model_option(6, "Encoder layers N", (MODEL,), minimum=1, shape=True)
    decoder_layers: int = model_option(6, "Decoder layers N", (MODEL,), minimum=1, shape=True)
    d_model: int = model_option(512, "d_model", (MODEL, PARSING_TRAIN), minimum=1, shape=True)
    d_ff: int = model_option(2048, "d_ff", (MODEL, PARSING_TRAIN), minimum=1, shape=True)
    h: int = model_option(8, "Attention heads h", (MODEL,), minimum=1, shape=True)
    d_k: int = model_option(64, "d_k", (MODEL, PARSING_TRAIN), minimum=1, shape=True)
    d_v: int = model_option(64, "d_v", (MODEL, PARSING_TRAIN), minimum=1, shape=True)
    # P_drop: embedding+position sums and every sub-layer output
    dropout: float = model_option(
        0.1, "P_drop", (MODEL, PARSING_TRAIN), minimum=0, below=1, shape=True
    )
    # eps_ls: used by the training loss, stored with the model
    label_smoothing: float = model_option(0.1, "eps_ls", (PARSING_TRAIN,), minimum=0, below=1)
    positional: str = model_option(
        "sinusoidal", "Positional encoding (Table 3 row E: learned)", choices=POSITIONAL_ENCODINGS
    )
    # longest sequence the (learned) position table holds
    max_positions: int = model_option(1024, "Positions the position table holds", minimum=1)
    init: str = model_option(
        "xavier",
        "Weight initialization, which the paper does not name. xavier - tensor2tensor's and "
        "fairseq's (Xavier-uniform projections, shared embedding N(0, d_model^-0.5)); normal - "
        "every weight matrix N(0, init_std) (BERT, Marian), which learns much faster at small "
        "scale (docs/multi30k.md; multi30k.yaml uses it)",
        (MODEL,),
        choices=INITIALIZATIONS,
    )
    init_std: float = model_option(0.02, "Standard deviation of init normal", (MODEL,), above=0)
    pad_id: int = model_option(PAD_ID, "Padding id", minimum=0)
    bos_id: int = model_option(BOS_ID, "Begin-of-sentence id", minimum=0)
    eos_id: int = model_option(EOS_ID, "End-of-sentence id", minimum=0)

    def __post_init__(self) -> None:
        require_declared(self, lambda f: f"model.{f.name}")
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in ids.items():
            if value >= self.vocab_size:
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

# Table 3 of the paper; row names are ours (docs/recipe.md). Unlisted values equal base.
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
