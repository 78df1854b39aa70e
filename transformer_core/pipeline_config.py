"""Checks of the workflow configuration that a JSON schema cannot express.

The schema (workflow/schemas/config.schema.yaml) checks types and ranges; this
module checks that names refer to things that exist (Table 3 rows, pairs,
datasets, a local mirror directory) and that the scale rule fits every
experiment. Each error names the config key. Snakemake calls ``check`` before
any job runs; it is plain Python so it is unit-tested here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformer_core.config import TABLE3_ROWS
from transformer_core.errors import ConfigError
from transformer_core.scaling import scaled_model_overrides, scaled_steps


def experiments(config: dict[str, Any]) -> list[str]:
    """Every experiment the configuration trains, Table 2 presets first, without repeats."""
    names = list(config["table2"]["models"]) + list(config["table3"]["rows"])
    return list(dict.fromkeys(names))


def check(config: dict[str, Any], known_datasets: tuple[str, ...] | None = None) -> None:
    """Raise ConfigError naming the key of the first inconsistency found."""
    pairs = config["pairs"]
    for i, pair in enumerate(config["table2"]["pairs"]):
        if pair not in pairs:
            raise ConfigError(f"table2.pairs[{i}]: {pair!r} is not a key of pairs ({', '.join(pairs)})")
    if config["table3"]["pair"] not in pairs:
        raise ConfigError(f"table3.pair: {config['table3']['pair']!r} is not a key of pairs ({', '.join(pairs)})")
    for i, row in enumerate(config["table3"]["rows"]):
        if row not in TABLE3_ROWS:
            raise ConfigError(f"table3.rows[{i}]: unknown row {row!r}; known: {', '.join(TABLE3_ROWS)}")
    if known_datasets is not None:
        for name, pair in pairs.items():
            if pair["dataset"] not in known_datasets:
                raise ConfigError(
                    f"pairs.{name}.dataset: unknown dataset {pair['dataset']!r}; known: {', '.join(known_datasets)}"
                )
    mirror = config.get("mirror", "")
    if mirror and "://" not in mirror and not Path(mirror).is_dir():
        raise ConfigError(f"mirror: directory {mirror!r} does not exist (give a directory or a URL prefix)")
    rule = config["scale_rule"]
    for name in experiments(config):
        scaled_model_overrides(name, rule["width_divisor"], rule.get("layer_divisor", 1))
        scaled_steps(name, rule["step_divisor"])
