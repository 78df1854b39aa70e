"""The field of a settings dataclass, and the checks of its value.

``option`` declares a setting once: its default, its command-line flag and help, and where it
has them its type, choices and bounds. The commands make their flags from these fields
(``settings.flags``), the workflow its arguments (``settings.flags.command_flags``) and its
configuration schema (``settings.schema``), and the dataclasses check their values against the
same bounds (``require_declared``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from dataclasses import field
from typing import Any

from transformer_core.errors import ConfigError

# "Let the hardware decide": the default of the device, precision and compile settings, and
# of the workflow's thread counts; each setting's module says what it decides.
AUTO = "auto"
# "Choose it on the development set": a value of the workflow's decode.beam and decode.alpha
# (decoding.dev_choice says how).
DEV = "dev"
DEVICES = (AUTO, "cpu", "cuda")  # device.resolve_device says what each means
PRECISIONS = (AUTO, "fp32", "bf16")  # device.autocast_dtype says what each means
COMPILE_MODES = (AUTO, "on", "off")  # device.compile_choice says what each means
BATCH_SHAPES = (AUTO, "fixed", "exact")  # device.use_fixed_shapes says what each means
COMPUTE_WEIGHTS = (AUTO, "fp32", "bf16")  # training.path says what auto picks, master_weights bf16
QUANTIZE_MODES = ("off", "int8")  # translate --quantize: quantize.int8_model
# export: the engines, and CTranslate2's CPU weight types (int8, int16: quantized matrices)
EXPORT_FORMATS = ("ctranslate2", "transformers")
EXPORT_QUANTIZATIONS = ("float32", "int8", "int16")
INFERENCE_MAX_TOKENS = 4096  # tokens per batch of decoding and of `ppl`: speed and memory only
SPM_SAMPLE_SIZE = 10_000_000  # lines sentencepiece trains on at most (bounds its memory)
# The declared bounds of a number (``option``) as JSON Schema's keywords (``settings.schema``).
BOUNDS = {"minimum": "minimum", "maximum": "maximum", "above": "exclusiveMinimum",
          "below": "exclusiveMaximum"}  # fmt: skip
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
    """A field of a settings dataclass: its default and, where it has one, its command-line
    flag and help (a boolean is ``--flag`` / ``--no-flag``). ``extra``:

    - argparse's ``type``, ``choices`` and ``metavar``; ``unset``, the help's words for a
      default of None;
    - ``minimum``, ``maximum`` (inclusive), ``above`` and ``below`` (exclusive): the value's
      bounds, which the dataclass checks (``require_declared``) and the schema states;
    - ``config``: the workflow's config key where it is not the flag's name in snake case,
      or False for a flag the workflow sets from elsewhere (a job's threads and GPUs);
    - ``by_experiment``: the preset decides the value when the option is left out; the
      workflow sets it per preset (``models.base``, ``models.big``);
    - ``schema``: the configuration's own form of the key where it differs from the flag's
      (``settings.schema``); ``schema_default`` False: the schema gives no default, so a
      configuration that leaves the key out passes no flag (an optional change of the recipe);
    - ``off``: a value beside the bounds that turns the setting off (on the command line
      only: the schema states the bounds alone);
    - ``doc``: what the configuration's reference says beyond the help (the schema's
      description and config/README.md's key table, both generated: ``transformer-core
      schema``), such as the paper's value;
    - ``required`` (a configuration gives the key itself), ``dev`` (the workflow may choose it
      on the dev split, by default from these values), ``trajectory`` (a resumed run must keep
      it): what the workflow and the run folder read from the declaration instead of a list of
      names."""
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


def require_positive_integers(settings: Any, section: str, names: tuple[str, ...]) -> None:
    """A ConfigError naming ``section.name`` for the first of ``names`` that is not a positive
    integer (a bool is not one) in the dataclass ``settings``."""
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{section}.{name} must be a positive integer, got {value!r}")


def require_choice(settings: Any, section: str, name: str, choices: tuple[str, ...]) -> None:
    """A ConfigError naming ``section.name`` and its choices when the field is not one of them."""
    value = getattr(settings, name)
    if value not in choices:
        raise ConfigError(f"{section}.{name} must be one of {', '.join(choices)}, got {value!r}")


def require_flag_positive(settings: Any, name: str, optional: bool = False) -> None:
    """A ConfigError naming the flag of field ``name`` of ``settings`` when it is not a positive
    integer (None passes where ``optional``): these fields come from the command line."""
    value = getattr(settings, name)
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value!r}")


def bounds_broken(f: dataclasses.Field, value: Any) -> str | None:
    """What ``value`` breaks of field ``f``'s declared kind and bounds (``option``'s
    ``minimum``, ``maximum``, ``above``, ``below``; an integer where the default is one, a word of
    ``choices`` where it has them), as words after its name; None where it keeps them, is
    the field's own default (None, or a word such as auto beside a number) or its ``off``."""
    meta = f.metadata
    if value == f.default and type(value) is type(f.default):
        return None
    if "off" in meta and value == meta["off"] and type(value) is type(meta["off"]):
        return None
    if "choices" in meta:
        return None if value in meta["choices"] else f"must be one of {', '.join(meta['choices'])}"
    integer = meta.get("type") is int or type(f.default) is int
    if integer:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
    elif isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return "must be a number"
    elif math.isinf(value):  # no bound of a setting is infinite: the configuration refuses it too
        return "must be a finite number"
    if "minimum" in meta and value < meta["minimum"]:
        return f"must be at least {meta['minimum']}"
    if "above" in meta and not value > meta["above"]:
        return f"must be more than {meta['above']}"
    if "maximum" in meta and value > meta["maximum"]:
        return f"must be at most {meta['maximum']}"
    if "below" in meta and not value < meta["below"]:
        return f"must be less than {meta['below']}"
    return None


def require_declared(settings: Any, label: Callable[[dataclasses.Field], str]) -> None:
    """A ConfigError for the first field of dataclass ``settings`` whose value breaks its
    declared bounds (``bounds_broken``), named by ``label(field)``; None passes only where it
    is the field's default ("not set")."""
    for f in dataclasses.fields(settings):
        if any(key in f.metadata for key in (*BOUNDS, "choices")):  # "off" goes with a bound
            value = getattr(settings, f.name)
            if (value is not None or f.default is not None) and (broken := bounds_broken(f, value)):
                raise ConfigError(f"{label(f)} {broken}, got {value!r}")
