"""RunPlan: run names and seeds, each run's train options and each pair's search, as the
workflow's params functions get them (workflow/rules/common.smk calls it)."""

import copy

import pytest
import yaml
from conftest import ROOT, SMOKE
from snakemake.utils import validate

from transformer_core.errors import ConfigError
from transformer_core.workflow_plan import RunPlan, on_off

SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")


def configuration(path=SMOKE, **changes):
    """A shipped configuration with the schema's defaults filled in, as the workflow sees it."""
    config = yaml.safe_load(path.read_text())
    config.update(copy.deepcopy(changes))
    validate(config, SCHEMA)
    return config


def test_seeds_name_the_runs():
    plan = RunPlan(configuration(seeds=[3, 1, 2]))
    assert plan.seeds == [1, 3, 2]  # train.seed first
    assert plan.run_name("base", 1) == "base" and plan.run_name("C3", 2) == "C3-seed2"
    assert plan.split_run("C3-seed2") == ("C3", 2) and plan.split_run("base") == ("base", 1)
    with pytest.raises(ConfigError, match=r"seeds: \[2\] lacks train.seed \(1\)"):
        RunPlan(configuration(seeds=[2]))


def test_parsing_runs_take_table4_train_and_translation_runs_train():
    config = configuration()
    config["table4"]["train"].update(dropout=0.2, label_smoothing=0.0)
    plan = RunPlan(config)
    own, train = config["table4"]["train"], config["train"]
    parsing = plan.train_args("parse_treebank", "parsing-seed2")
    translation = plan.train_args("en_de", "base")
    assert parsing[:2] == ["--experiment", "parsing"] and "dropout=0.2" in parsing
    assert "label_smoothing=0.0" in parsing and "dropout=0.2" not in translation
    for args, recipe, steps in (
        (parsing, own, config["table4"]["steps"]),
        (translation, train, plan.steps("en_de", "base")),
    ):
        flags = dict(zip(args[::2], args[1::2], strict=True))
        assert flags["--tokens-per-step"] == recipe["tokens_per_step"]
        assert flags["--warmup"] == recipe["warmup"] and flags["--steps"] == steps
    assert dict(zip(parsing[::2], parsing[1::2], strict=True))["--seed"] == 2
    assert plan.checkpointing("parse_treebank", "parsing")["average_last"] == own["average_last"]
    base = config["models"]["base"]
    assert plan.checkpointing("en_de", "base")["average_last"] == base["average_last"]


def test_search_flags_follow_the_pairs_decode_section():
    config = configuration()
    plan = RunPlan(config)
    search = "--beam 4 --alpha 0.6 --max-len-a 1.0 --max-len-b 10"  # smoke.yaml's
    assert plan.search_flags("en_de") == search.split()
    assert plan.search_flags("parse_treebank")[:4] == ["--beam", "21", "--alpha", "0.3"]
    assert "--tree-constraint" not in plan.search_flags("parse_treebank")
    config["table4"]["decode"]["tree_constraint"] = True
    config["table4"]["linearization"] = "words"
    assert plan.search_flags("parse_treebank")[-2:] == ["--tree-constraint", "words"]
    assert plan.decode_setting("parse_treebank", "max_tokens") == 4096
    config["decode"]["compile"] = True  # YAML's unquoted `on`
    assert plan.decode_setting("en_de", "compile") == "on"
    assert on_off(False) == "off" and on_off(1.0) == 1.0 and on_off("auto") == "auto"
