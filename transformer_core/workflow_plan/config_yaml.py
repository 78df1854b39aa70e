"""The configuration as YAML gave it: the checks that come before any other, since they are
about what YAML made of the files (``workflow/rules/common.smk`` calls them first).

- ``check_unique_keys``: a key written twice in one section of a file (YAML keeps the last,
  silently);
- ``check_values``: a value that cannot be walked (an alias bomb), a number that is not finite,
  and a number YAML 1.1 read as a string (``1e9``: an exponent counts only after a dot);
- ``type_nested_overrides``: the numbers and booleans of a nested ``--config`` value, which
  Snakemake reads as strings.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from transformer_core.errors import ConfigError

# More values than any configuration of this project holds (the paper's: a few hundred).
CONFIG_VALUES_LIMIT = 100_000


def check_values(config: dict[str, Any], limit: int = CONFIG_VALUES_LIMIT) -> None:
    """ConfigError, naming the key, for a number that is not finite (YAML's ``.nan`` and
    ``.inf`` pass a schema's ranges, since NaN compares false with every bound) or a
    top-level key that expands to more than ``limit`` values: YAML aliases (``&a`` ...
    ``*a``) nested in each other load as shared references in no time, but every walk over
    them (the schema check, its error message) visits each copy, and a few lines can stand
    for 10^9 values. Counts at most ``limit`` per top-level key."""
    for key, value in config.items():
        count, stack = 0, [(str(key), value)]
        while stack:
            where, item = stack.pop()
            count += 1
            if count > limit:
                raise ConfigError(
                    f"{key}: expands to more than {limit:,} values "
                    "(YAML aliases, & and *, nested in each other?)"
                )
            if isinstance(item, float) and not math.isfinite(item):
                raise ConfigError(f"{where}: {item} is not a finite number")
            if isinstance(item, str) and YAML11_EXPONENT.fullmatch(item):
                raise ConfigError(
                    f"{where}: {item!r} is a string to YAML, which reads an exponent as a "
                    f"number only after a dot: write {_with_dot(item)}"
                )
            if isinstance(item, dict):
                stack.extend((f"{where}.{k}", v) for k, v in item.items())
            elif isinstance(item, (list, tuple)):
                stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))


# A number in exponent notation without a dot (1e9): YAML 1.1, which Snakemake reads
# configurations with, takes it for a string.
YAML11_EXPONENT = re.compile(r"[+-]?[0-9]+[eE][+-]?[0-9]+")


def _with_dot(text: str) -> str:
    mantissa, _, exponent = text.lower().partition("e")
    return f"{mantissa}.0e{exponent}"


class _UniqueKeys(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (``check_unique_keys``)."""


def _mapping_once(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict:
    lines: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in lines and key != "<<":
            raise ConfigError(f"key {key!r} is given twice, on lines {lines[key]} and {line}")
        lines[key] = line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_once)


def check_unique_keys(paths: list[str]) -> None:
    """ConfigError, naming the file and both lines, for a key written twice in one section of
    a configuration file: YAML keeps the last silently, whichever the user meant."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            continue  # Snakemake has said what is wrong with the file
        try:
            yaml.load(text, Loader=_UniqueKeys)  # noqa: S506 - a SafeLoader
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}") from None
        except yaml.YAMLError:
            continue  # Snakemake's own reading reports it


def _typed(text: str) -> Any:
    """``text`` as Snakemake types a top-level ``--config`` value: an integer, a float or a
    boolean where it is one, else the string."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def type_nested_overrides(config: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Give the nested values of ``--config`` (``overrides``) in ``config`` the types Snakemake
    gives a top-level one: it reads ``--config 'decode={alpha: 0.6}'`` with YAML's BaseLoader,
    so ``alpha`` arrives as the string '0.6' (and the check said "'0.6' is neither a number nor
    dev")."""

    def walk(given: Any, merged: Any) -> Any:
        if isinstance(given, dict) and isinstance(merged, dict):
            for key, value in given.items():
                if key in merged:
                    merged[key] = walk(value, merged[key])
            return merged
        if isinstance(given, list) and given == merged:
            return [walk(value, value) for value in given]
        return _typed(given) if isinstance(given, str) and given == merged else merged

    for key, value in overrides.items():
        if isinstance(value, (dict, list)) and key in config:
            config[key] = walk(value, config[key])
