"""Checks of the workflow configuration that a JSON schema cannot express.

The schema (workflow/schemas/config.schema.yaml) checks types and ranges; this
module checks that names refer to things that exist (Table 3 rows, pairs,
datasets, a local mirror directory, Table 4's treebank and corpus) and that the
scale rule fits every experiment. Each error names the config key. Snakemake
calls ``check`` before any job runs; it is plain Python so it is unit-tested here.

Table 4's runs reuse the translation rules: each trains on a data folder with a
pair-like name (``PARSING_PAIRS``), so ``data/parse_treebank/...`` and
``runs/parse_treebank/parsing/...`` sit beside ``data/en_de/...``.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import zipfile
from pathlib import Path
from typing import Any

import yaml

from transformer_core.errors import ConfigError, UserError
from transformer_core.model.config import TABLE3_ROWS, ModelConfig
from transformer_core.parsing.corpora import nltk_files, wsj_section_files
from transformer_core.settings import AUTO, DEV, DecodeSettings
from transformer_core.settings.fields import bounds_broken
from transformer_core.workflow_plan.scaling import scaled_model_overrides, scaled_steps

MIRROR_SCHEMES = ("http", "https", "ftp", "file")
PARSING_EXPERIMENT = "parsing"
# Table 4's training settings (paper rows "WSJ only" and "semi-supervised") -> data folder.
PARSING_PAIRS = {"wsj_only": "parse_treebank", "semi_supervised": "parse_semi"}
_WSJ_NEEDED = (
    "table4.treebank_dir: give the folder of the LDC WSJ treebank (treebank_3/parsed/mrg, LDC99T42; "
    "it cannot be downloaded)"
)


# Every key the workflow's rules read. Each shipped configuration sets all of them itself
# (tests/workflow/test_hostile_configurations.py): a file given with --configfile replaces
# config/config.yaml instead of extending it, and a key left out takes the schema's default,
# which Snakemake then names (``defaulted_keys``). These are the workflow's own keys; the
# settings sections' are those their schema requires or gives a default (``schema.stated_keys``).
RULE_KEYS = (
    "scale",
    "mirror",
    "scale_rule.width_divisor",
    "scale_rule.layer_divisor",
    "scale_rule.step_divisor",
    "table2.models",
    "table2.pairs",
    "table3.pair",
    "table3.rows",
    "table3.decoding",
    "threads.train",
    "threads.translate",
    "threads.bleu_curve",
    "threads.attention_figures",
)
TABLE4_KEYS = (
    "table4.treebank",
    "table4.linearization",
    "table4.split_by_unicode_script",
    "table4.vocab_size",
    "table4.semi_supervised_dir",
)
TABLE4_KIND_KEYS = {
    "wsj": ("table4.treebank_dir",),
    "nltk": ("table4.treebank_zip", "table4.held_out_files"),
    "smoke": ("table4.smoke.train", "table4.smoke.dev", "table4.smoke.test", "table4.smoke.seed"),
}


def lookup(config: Any, key: str) -> tuple[bool, Any]:
    for part in key.split("."):
        if not isinstance(config, dict) or part not in config:
            return False, None
        config = config[part]
    return True, config


def _grid_values(grid: Any, name: str, integer: bool) -> None:
    """decode.grid.<name>: a non-empty list of distinct numbers of its kind."""
    where, values = f"decode.grid.{name}", grid.get(name)
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: give a non-empty list of values to try, got {values!r}")
    field = {f.name: f for f in dataclasses.fields(DecodeSettings)}[name]
    for i, value in enumerate(values):
        number = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
        if not number or not math.isfinite(value) or value < (1 if integer else 0):
            kind = "an integer of at least 1" if integer else "a finite number >= 0"
            raise ConfigError(f"{where}[{i}]: must be {kind}, got {value!r}")
        if broken := bounds_broken(field, value):  # the search's own bounds (alpha at most 10)
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
    unknown = sorted(set(grid) - {"beam", "alpha"})
    if unknown:
        raise ConfigError(
            f"decode.grid: unknown key(s) {', '.join(map(str, unknown))} (beam, alpha)"
        )
    for key, integer in (("beam", True), ("alpha", False)):
        if key in grid:
            _grid_values(grid, key, integer)
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


def defaulted_keys(config: dict[str, Any]) -> list[str]:
    """The keys the rules read that ``config`` (as written, before schema defaults) leaves out."""
    # Imported here: `python -m transformer_core.workflow_plan.schema` runs that module as
    # __main__, which must not find it imported already by this package.
    from transformer_core.workflow_plan.schema import stated_keys

    stated = stated_keys()
    keys = list(RULE_KEYS) + [
        f"{section}.{key}"
        for section in ("train", "models.base", "models.big", "decode")
        for key in stated[section]
    ]
    keys += [
        f"pairs.{name}.{field}"
        for name in config.get("pairs") or {}
        for field in ("dataset", "vocab_size")
    ]
    if config.get("table4"):
        table4 = config["table4"]
        keys += TABLE4_KEYS + TABLE4_KIND_KEYS.get(table4.get("treebank", "wsj"), ())
        keys += [f"table4.decode.{key}" for key in stated["table4.decode"]]
        if table4.get("semi_supervised_dir"):
            keys.append("table4.semi_supervised_vocab_size")
    return [key for key in keys if not lookup(config, key)[0]]


def check_cores(cores: int | None) -> None:
    """A ConfigError for ``--cores`` below 1 (None: the run has no core count): with 0 no job
    ever starts and Snakemake waits for ever; with -1 jobs would ask for -1 threads."""
    if cores is not None and cores < 1:
        raise ConfigError(f"--cores {cores}: give at least 1 core (or `all`)")


def job_threads(setting: int | str, cores: int | None) -> int:
    """The threads a job asks Snakemake for: ``threads.<rule>`` as a number, or for ``auto``
    every core Snakemake has (``workflow.cores``: --cores, or the CPUs of a cluster job's
    allocation), which it then lowers to what it gives the job."""
    if setting == AUTO:
        return max(1, cores or 1)
    return int(setting)


def rank_threads(threads: int, gpus: int) -> int:
    """torch threads of each rank of a training job: a job on G GPUs runs G processes
    (torchrun), which share the job's threads rather than each taking them all."""
    return max(1, threads // max(1, gpus))


def _from_here(path: str | Path) -> str:
    """``path`` relative to the working directory when it lies below it (Snakemake records
    configuration files as absolute paths), else as it is."""
    path, here = Path(path), Path.cwd()
    if path.is_absolute() and path.is_relative_to(here):
        return str(path.relative_to(here))
    return str(path)


def run_options(configfiles: list[str], overrides: dict[str, Any]) -> str:
    """This run's ``--configfile`` and ``--config`` options, shell-quoted, for the hints that
    print a snakemake command (the report's "builds it"): copied as printed, the command then
    runs the configuration that made the hint, not config/config.yaml. Values are written as
    Snakemake's --config parser reads them back (``snakemake.cli.parse_config``): a mapping or
    list in YAML flow style, a scalar as Python prints it (``True``, ``0.5``), empty for None.
    ``overrides`` are the ``--config`` values alone, not the configuration files' contents."""
    words = []
    if configfiles:
        words += ["--configfile", *map(_from_here, configfiles)]
    if overrides:
        words.append("--config")
        for key, value in overrides.items():
            if isinstance(value, (dict, list)):
                text = yaml.safe_dump(
                    value, default_flow_style=True, sort_keys=False, width=math.inf
                ).strip()
            else:
                text = "" if value is None else str(value)
            words.append(f"{key}={text}")
    return shlex.join(words)


def experiments(config: dict[str, Any]) -> list[str]:
    """Every experiment the configuration trains, Table 2 presets first, without repeats."""
    names = list(config["table2"]["models"]) + list(config["table3"]["rows"])
    if table4_unavailable(config) is None:
        names.append(PARSING_EXPERIMENT)
    return list(dict.fromkeys(names))


def table4_unavailable(config: dict[str, Any]) -> str | None:
    """Why Table 4 cannot be built, naming the key; None when it can.

    ``treebank: wsj`` with an empty ``treebank_dir`` is config/config.yaml's
    placeholder for the licensed treebank: Table 4 is then left out of the default
    target, and asking for it is an error that says which key to set.
    """
    table4 = config.get("table4")
    if not table4:
        return "Table 4 needs a table4 section in the configuration (config/README.md)"
    if table4.get("treebank", "wsj") == "wsj" and not table4.get("treebank_dir"):
        return f"{_WSJ_NEEDED} to build Table 4"
    return None


def parsing_runs(config: dict[str, Any]) -> dict[str, str]:
    """Table 4 setting -> data folder of every parsing run the configuration trains.

    The treebank-only run whenever Table 4 can be built; the semi-supervised one
    only when ``table4.semi_supervised_dir`` names a corpus.
    """
    if table4_unavailable(config) is not None:
        return {}
    settings = ["wsj_only"] + (
        ["semi_supervised"] if config["table4"].get("semi_supervised_dir") else []
    )
    return {setting: PARSING_PAIRS[setting] for setting in settings}


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


# The `model` keys that replace the scaled preset's shape (a published model's): every
# Table 3 row but base changes one of them, so they go with base as the one experiment.
SHAPE_KEYS = ("encoder_layers", "decoder_layers", "d_model", "d_ff", "h", "d_k", "d_v", "dropout")


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
