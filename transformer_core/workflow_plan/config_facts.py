"""What a configuration says to the workflow beyond its keys, read by the plans and by
workflow/rules/common.smk: the experiments it trains, whether Table 4 can be built and its
parsing runs, the threads a job asks for and each training rank takes, this run's
``--configfile`` and ``--config`` options as a snakemake command would repeat them, and the
value of a dotted key. The checks that refuse a configuration are in ``config_checks``.

Table 4's runs reuse the translation rules: each trains on a data folder with a
pair-like name (``PARSING_PAIRS``), so ``data/parse_treebank/...`` and
``runs/parse_treebank/parsing/...`` sit beside ``data/en_de/...``.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

import yaml

from transformer_core.settings import AUTO

PARSING_EXPERIMENT = "parsing"
# Table 4's training settings (paper rows "WSJ only" and "semi-supervised") -> data folder.
PARSING_PAIRS = {"wsj_only": "parse_treebank", "semi_supervised": "parse_semi"}
_WSJ_NEEDED = (
    "table4.treebank_dir: give the folder of the LDC WSJ treebank (treebank_3/parsed/mrg, LDC99T42; "
    "it cannot be downloaded)"
)


def lookup(config: Any, key: str) -> tuple[bool, Any]:
    """(whether ``config`` holds the dotted ``key``, its value or None)."""
    for part in key.split("."):
        if not isinstance(config, dict) or part not in config:
            return False, None
        config = config[part]
    return True, config


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
