"""Checks of the workflow configuration that a JSON schema cannot express.

The schema (workflow/schemas/config.schema.yaml) checks types and ranges; this
module checks that names refer to things that exist (Table 3 rows, pairs,
datasets, a local mirror directory, Table 4's treebank and corpus) and that the
scale rule fits every experiment. Each error names the config key. ``config_load.load``
runs these checks as Snakemake reads the workflow, before any job runs; they are plain Python
so they are unit-tested here. What a configuration implies for the rules (its experiments,
Table 4's parsing runs, threads) is in ``config_facts``.
"""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path
from typing import Any

from transformer_core.errors import ConfigError, UserError
from transformer_core.model.config import TABLE3_ROWS, ModelConfig
from transformer_core.parsing.corpora import nltk_files, wsj_section_files
from transformer_core.settings import CHOSEN_FIELDS, DEV, DecodeSettings
from transformer_core.settings.fields import bounds_broken
from transformer_core.workflow_plan.config_facts import PARSING_PAIRS, experiments, lookup
from transformer_core.workflow_plan.scaling import scaled_model_overrides, scaled_steps
from transformer_core.workflow_plan.schema import committed_schema, stated_keys

MIRROR_SCHEMES = ("http", "https", "ftp", "file")


def _grid_values(grid: Any, name: str) -> None:
    """decode.grid.<name>: a non-empty list of distinct values, each within the declared
    bounds of the search's field ``name`` (``settings.DecodeSettings``)."""
    where, values = f"decode.grid.{name}", grid.get(name)
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: give a non-empty list of values to try, got {values!r}")
    field = {f.name: f for f in dataclasses.fields(DecodeSettings)}[name]
    for i, value in enumerate(values):
        if broken := bounds_broken(field, value):
            raise ConfigError(f"{where}[{i}]: {broken}, got {value!r}")
    if len({float(v) for v in values}) < len(values):
        raise ConfigError(f"{where}: {values} holds a value twice")


def check_decoding(config: dict[str, Any]) -> None:
    """decode.beam and decode.alpha (a number, or ``dev``) and the grid ``dev`` chooses from,
    each mistake one line naming the key, before the schema's longer messages: run before
    ``validate``, on the configuration as written. Table 4 decodes with numbers (its search is
    the paper's parsing search: there is no BLEU to choose it by)."""
    decode = config.get("decode")
    if not isinstance(decode, dict):
        return  # the schema names it
    for key in ("beam", "alpha"):
        value = decode.get(key)
        if isinstance(value, str) and value != DEV:
            raise ConfigError(f"decode.{key}: {value!r} is neither a number nor {DEV}")
    grid = decode.get("grid", {})
    if not isinstance(grid, dict):
        raise ConfigError(f"decode.grid: give a mapping of beam and alpha lists, got {grid!r}")
    unknown = sorted(set(grid) - set(CHOSEN_FIELDS))
    if unknown:
        raise ConfigError(
            f"decode.grid: unknown key(s) {', '.join(map(str, unknown))} "
            f"({', '.join(CHOSEN_FIELDS)})"
        )
    for key in CHOSEN_FIELDS:
        if key in grid:
            _grid_values(grid, key)
    table4_decode = (config.get("table4") or {}).get("decode") or {}
    for key in ("beam", "alpha"):
        if isinstance(table4_decode, dict) and table4_decode.get(key) == DEV:
            raise ConfigError(
                f"table4.decode.{key}: {DEV} is for translation (chosen by BLEU); give the "
                "parsing search a number (the paper: beam 21, alpha 0.3)"
            )


def check_dev_splits(config: dict[str, Any], datasets: dict[str, Any]) -> None:
    """Where decode chooses a setting on dev, every translation pair's dataset (``datasets``:
    the registry's, by name) has a dev split to choose on."""
    decode = config["decode"]
    if DEV not in (decode["beam"], decode["alpha"]):
        return
    key = "decode.alpha" if decode["alpha"] == DEV else "decode.beam"
    for name, pair in config["pairs"].items():
        dataset = datasets.get(pair["dataset"])
        if dataset is not None and not has_dev_split(dataset):
            raise ConfigError(
                f"{key}: {DEV} chooses on each pair's dev split, and pairs.{name} "
                f"(dataset {pair['dataset']}) has none; give {key} a number"
            )


def check_beams(config: dict[str, Any]) -> None:
    """decode.beam and its grid's beams within every pair's vocabulary: a beam of more
    hypotheses than pieces cannot decode (beam 100000 grew to 18 GB before failing)."""
    decode = config["decode"]
    beams = [decode["beam"]] if decode["beam"] != DEV else decode.get("grid", {}).get("beam", [])
    for name, pair in config["pairs"].items():
        for beam in beams:
            if isinstance(beam, int) and beam > pair["vocab_size"]:
                raise ConfigError(
                    f"decode.beam: {beam} is more than pairs.{name}.vocab_size "
                    f"({pair['vocab_size']}): a beam holds at most as many hypotheses as pieces"
                )


def has_dev_split(dataset: Any) -> bool:
    """Whether a registry dataset (``data.registry.Dataset``) has dev sentences: parts to
    download (a downloaded dataset may list none), or a generated dev section (the registry
    requires at least one pair of it)."""
    return dataset.generate is not None or bool(dataset.splits.get("dev"))


def defaulted_keys(config: dict[str, Any], schema: dict[str, Any] | None = None) -> list[str]:
    """The keys the rules read that ``config`` (as written, before schema defaults) leaves out:
    those the rendered ``schema`` (left out: the committed one) has it state
    (``schema.stated_keys``). Each shipped configuration states all of them
    (tests/workflow/test_hostile_configurations.py): a file given with --configfile replaces
    config/config.yaml instead of extending it, and a key left out takes the schema's
    default, which the workflow then names."""
    keys = stated_keys(config, committed_schema() if schema is None else schema)
    return [key for key in keys if not lookup(config, key)[0]]


def check_cores(cores: int | None) -> None:
    """A ConfigError for ``--cores`` below 1 (None: the run has no core count): with 0 no job
    ever starts and Snakemake waits for ever; with -1 jobs would ask for -1 threads."""
    if cores is not None and cores < 1:
        raise ConfigError(f"--cores {cores}: give at least 1 core (or `all`)")


def check(config: dict[str, Any], known_datasets: tuple[str, ...] | None = None) -> None:
    """Raise ConfigError naming the key of the first inconsistency found."""
    pairs = config["pairs"]
    for i, pair in enumerate(config["table2"]["pairs"]):
        if pair not in pairs:
            raise ConfigError(
                f"table2.pairs[{i}]: {pair!r} is not a key of pairs ({', '.join(pairs)})"
            )
    if config["table3"]["pair"] not in pairs:
        raise ConfigError(
            f"table3.pair: {config['table3']['pair']!r} is not a key of pairs ({', '.join(pairs)})"
        )
    for i, row in enumerate(config["table3"]["rows"]):
        if row not in TABLE3_ROWS:
            raise ConfigError(
                f"table3.rows[{i}]: unknown row {row!r}; known: {', '.join(TABLE3_ROWS)}"
            )
    if known_datasets is not None:
        for name, pair in pairs.items():
            if pair["dataset"] not in known_datasets:
                raise ConfigError(
                    f"pairs.{name}.dataset: unknown dataset {pair['dataset']!r}; known: {', '.join(known_datasets)}"
                )
    mirror = config.get("mirror", "")
    if mirror and "://" in mirror and mirror.split("://", 1)[0] not in MIRROR_SCHEMES:
        raise ConfigError(
            f"mirror: {mirror!r} is not a URL prefix of {', '.join(MIRROR_SCHEMES)} "
            "(or give a directory)"
        )
    if mirror and "://" not in mirror and not Path(mirror).is_dir():
        what = "is a file, not a directory" if Path(mirror).exists() else "does not exist"
        raise ConfigError(f"mirror: {mirror!r} {what} (give a directory or a URL prefix)")
    ModelConfig.from_dict(config.get("model", {}))  # an unknown key or a bad value names model.KEY
    check_model_shape(config)
    check_beams(config)
    train = config["train"]
    if train.get("compute_weights") == "bf16" and train.get("precision") == "fp32":
        raise ConfigError(
            "train.compute_weights: bf16 computes with a bf16 copy of the weights, and "
            "train.precision is fp32; set precision to bf16 (or auto) or compute_weights to fp32"
        )
    sections = [("decode", config["decode"])]
    if config.get("table4"):
        sections.append(("table4.decode", config["table4"].get("decode", {})))
    for section, decode in sections:  # the search's own rules (an output length of 0 words)
        search = {k: v for k, v in decode.items() if k in ("max_len_a", "max_len_b")}
        try:
            DecodeSettings(**search)
        except UserError as error:
            raise ConfigError(f"{section}: {error}") from None
    rule = config["scale_rule"]
    for name in experiments(config):
        scaled_model_overrides(name, rule["width_divisor"], rule.get("layer_divisor", 1))
        scaled_steps(name, rule["step_divisor"])
    if config.get("table4"):
        check_table4(config)


# The `model` keys that replace the scaled preset's shape (a published model's; declared
# ``model_option(shape=True)``): every Table 3 row but base changes one of them, so they go
# with base as the one experiment.
SHAPE_KEYS = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.metadata.get("shape"))


def check_model_shape(config: dict[str, Any]) -> None:
    """A shape in `model` goes with base alone: refused, naming the key, where the
    configuration trains another experiment, whose change from base it would undo."""
    shape = [key for key in SHAPE_KEYS if key in config.get("model", {})]
    others = [name for name in experiments(config) if name != "base"]
    if shape and others:
        raise ConfigError(
            f"model.{shape[0]}: a model shape replaces every experiment's, so it goes with base "
            f"alone (table2.models and table3.rows [base], no table4); this configuration also "
            f"trains {', '.join(others)}"
        )


def check_table4(config: dict[str, Any]) -> None:
    """Table 4's inputs exist: the treebank of its kind, the semi-supervised corpus if named.

    An empty ``treebank_dir`` for ``treebank: wsj`` passes: it is the placeholder
    of config/config.yaml (see ``table4_unavailable``).
    """
    table4 = config["table4"]
    for name in PARSING_PAIRS.values():
        if name in config["pairs"]:
            raise ConfigError(
                f"pairs.{name}: the name is Table 4's parsing data folder; rename the pair"
            )
    kind = table4.get("treebank", "wsj")
    if kind == "wsj" and table4.get("treebank_dir"):
        try:
            wsj_section_files(table4["treebank_dir"])
        except UserError as err:
            raise ConfigError(f"table4.treebank_dir: {err}") from None
    elif kind == "nltk":
        archive = table4.get("treebank_zip", "")
        if not archive or not Path(archive).is_file():
            raise ConfigError(
                f"table4.treebank_zip: {archive!r} is not a file; give NLTK's treebank.zip "
                "(nltk_data/corpora/treebank.zip) for table4.treebank: nltk"
            )
        if not zipfile.is_zipfile(archive):
            raise ConfigError(f"table4.treebank_zip: {archive} is not a zip file")
        try:
            nltk_files(archive, table4["held_out_files"])
        except UserError as err:
            raise ConfigError(f"table4.held_out_files: {err}") from None
    corpus = table4.get("semi_supervised_dir", "")
    if corpus:
        missing = [
            name for name in ("train.words", "train.tree") if not (Path(corpus) / name).is_file()
        ]
        if missing:
            raise ConfigError(
                f"table4.semi_supervised_dir: {corpus} lacks {' and '.join(missing)} (a parsed corpus "
                "in the format of `transformer-core treebank`: one sentence per line in train.words, "
                "its linearized tree in train.tree)"
            )
