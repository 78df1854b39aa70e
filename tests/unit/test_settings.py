"""The settings dataclasses: each field's one declaration as a command's flag, as the
workflow's argument, and as the configuration schema's key (generated: the committed schema is
current, and it refuses what the dataclass refuses); the paper's configuration is the defaults."""

import dataclasses

import pytest
import yaml
from conftest import ROOT
from jsonschema import Draft202012Validator

from transformer_core.cli import build_parser, main
from transformer_core.commands.train import train_config
from transformer_core.errors import ConfigError
from transformer_core.model.config import ModelConfig, experiment
from transformer_core.parsing.trees import LINEARIZATIONS
from transformer_core.settings import (
    BootstrapSettings,
    CurveSettings,
    DecodeSettings,
    InferenceSettings,
    SentencePieceSettings,
    TrainSettings,
    TreebankSettings,
    command_flags,
    config_key,
    decode_fields,
    decode_flags,
    flagged_fields,
    inference_flags,
    train_flags,
)
from transformer_core.workflow_plan import schema

SCHEMA = yaml.safe_load((ROOT / schema.SCHEMA).read_text(encoding="utf-8"))
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text(encoding="utf-8"))


def test_the_committed_schema_and_key_table_are_the_ones_the_settings_give(tmp_path, capsys):
    assert main(["schema", "--check", "--root", str(ROOT)]) == 0
    for path in (schema.TEMPLATE, schema.README):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["schema", "--check", "--root", str(tmp_path)]) == 1  # no schema written yet
    assert "config.schema.yaml is stale" in capsys.readouterr().err
    assert main(["schema", "--root", str(tmp_path)]) == 0
    assert main(["schema", "--check", "--root", str(tmp_path)]) == 0
    readme = tmp_path / schema.README
    readme.write_text(readme.read_text(encoding="utf-8").replace("| `mirror` |", "| `mirrors` |"))
    assert main(["schema", "--check", "--root", str(tmp_path)]) == 1  # a row edited by hand
    assert "README.md is stale" in capsys.readouterr().err
    assert main(["schema", "--root", str(tmp_path)]) == 0
    assert "| `mirror` |" in readme.read_text(encoding="utf-8")
    readme.write_text("# Configuration\n", encoding="utf-8")  # no place for the table
    assert main(["schema", "--root", str(tmp_path)]) == 2
    assert "README.md: no generated key table" in capsys.readouterr().err
    assert main(["schema", "--root", str(tmp_path / "elsewhere")]) == 2
    assert "workflow.schema.yaml: no such file" in capsys.readouterr().err


def test_every_settings_key_of_the_schema_is_a_field():
    """Each key of the train, decode and checkpointing sections is a flagged field's config
    key (decode.grid aside): nothing the schema allows is dropped on the way to a command."""
    props = SCHEMA["properties"]
    train = {config_key(f) for f in flagged_fields(TrainSettings)} - {None}
    decode = {config_key(f) for f in [*decode_fields(), *flagged_fields(InferenceSettings)]}
    assert (
        set(props["train"]["properties"]) | set(props["models"]["properties"]["base"]["properties"])
        == train
    )
    assert set(props["decode"]["properties"]) == decode - {"tree_constraint", None} | {"grid"}
    assert set(props["table4"]["properties"]["decode"]["properties"]) == decode - {None}


SECTIONS = (
    (TrainSettings, ("train",)), (InferenceSettings, ("decode",)),
    (BootstrapSettings, ("bootstrap",)), (CurveSettings, ("curves",)),
    (ModelConfig, ("model",)), (ModelConfig, ("table4", "train")),
)  # fmt: skip


def _section(path):
    node = SCHEMA
    for name in path:
        node = node["properties"][name]
    return node["properties"]


def _bounded_fields():
    for cls, path in SECTIONS:
        for f in dataclasses.fields(cls):
            key = config_key(f) if f.metadata.get("flag") else f.name
            for bound in ("minimum", "above", "maximum", "below"):
                if bound in f.metadata and key in _section(path):
                    where = ".".join(path)
                    yield pytest.param(cls, path, f, bound, id=f"{where}.{f.name}.{bound}")


@pytest.mark.parametrize(("cls", "path", "f", "bound"), list(_bounded_fields()))
def test_the_schema_and_the_dataclass_refuse_the_same_values(cls, path, f, bound):
    """A value beyond a declared bound is refused by the dataclass and by the schema; the
    bound itself (for ``above`` a little more, for ``below`` a little less) is accepted by
    both."""
    edge = f.metadata[bound]
    outside = {"minimum": edge - 1, "maximum": edge + 1}.get(bound, edge)
    inside = {"above": edge + 0.5, "below": edge - 0.5}.get(bound, edge)
    key = config_key(f) if f.metadata.get("flag") else f.name
    validator = Draft202012Validator(_section(path)[key])
    for value, refused in ((outside, True), (inside, False)):
        assert (not validator.is_valid(value)) == refused, (key, value)
        settings = {"steps": 10**6} if cls is TrainSettings else {}
        if refused:
            with pytest.raises(ConfigError, match=f"{f.name}|{f.metadata['flag']}"):
                cls(**{**settings, f.name: value})
        else:
            cls(**{**settings, f.name: value})


def test_the_paper_configuration_is_the_library_defaults():
    """config/config.yaml spells out the paper's recipe: each settings key it sets holds the
    default of its field (the CLI's), big's checkpointing the big experiment's."""
    paper, big = TrainSettings(), TrainSettings.for_experiment(experiment("big"))
    for f in flagged_fields(TrainSettings):
        key = config_key(f)
        if key in CONFIG["train"]:
            assert CONFIG["train"][key] == getattr(paper, f.name), key
    for preset, cfg in (("base", paper), ("big", big)):
        assert CONFIG["models"][preset]["checkpoint_interval"] == cfg.checkpoint_interval
        assert CONFIG["models"][preset]["average_last"] == cfg.keep_last
    for f in [*decode_fields(), *flagged_fields(InferenceSettings)]:
        if config_key(f) in CONFIG["decode"] and f.name != "max_tokens":  # a GPU's batches
            assert CONFIG["decode"][config_key(f)] == getattr(DecodeSettings(), f.name, f.default)


def test_the_workflows_train_arguments_parse_back_to_the_same_settings():
    """The workflow's arguments (train_flags) parse, through `transformer-core train`'s own
    parser, to the TrainSettings of the same values; flags left out give the experiment's."""
    settings = {"steps": 7, "max_tokens": 11, "tokens_per_step": 13, "warmup": 17,
                "lr_scale": 0.5, "checkpoint_interval": 3, "average_last": 2, "seed": 5,
                "log_interval": 9, "dev_interval": 19, "dropout": 0.3, "cooldown": 5,
                "compile": False, "tensorboard": False}  # fmt: skip
    args = build_parser().parse_args(
        ["train", "--train", "t", "--out-dir", "r", "--experiment", "big", *train_flags(settings)]
    )
    cfg = train_config(args)
    assert (cfg.steps, cfg.max_tokens, cfg.tokens_per_step, cfg.warmup) == (7, 11, 13, 17)
    assert (cfg.lr_scale, cfg.checkpoint_interval, cfg.keep_last) == (0.5, 3, 2)
    assert (cfg.seed, cfg.log_interval, cfg.dev_interval, cfg.cooldown) == (5, 9, 19, 5)
    assert (cfg.compile, cfg.tensorboard) == ("off", False)
    left_out = train_config(build_parser().parse_args(["train", "--train", "t", "--out-dir", "r",
                                                       "--experiment", "big"]))  # fmt: skip
    assert left_out == TrainSettings.for_experiment(experiment("big"))
    assert (left_out.steps, left_out.keep_last) == (300_000, 20)


def test_the_workflows_decode_arguments_are_the_commands_flags():
    assert inference_flags({"max_tokens": 9, "compile": True, "precision": "fp32"}) == [
        "--precision", "fp32", "--compile", "on", "--max-tokens", "9",
    ]  # fmt: skip
    assert decode_flags({"beam": 21, "alpha": 0.3, "max_len_b": 300, "max_tokens": 9}) == [
        "--beam", "21", "--alpha", "0.3", "--max-len-b", "300",
    ]  # fmt: skip
    assert decode_flags({"tree_constraint": "words"}) == ["--tree-constraint", "words"]
    assert decode_flags({"tree_constraint": None}) == []


def test_the_workflows_data_arguments_parse_back():
    """The workflow's spm and treebank options (command_flags) parse back, through the
    commands' own parsers, to the settings of the same values."""
    fields = {config_key(f): f for f in flagged_fields(SentencePieceSettings)}
    for settings in ({"spm_sample_size": 5000, "split_by_unicode_script": False}, {}):
        args = build_parser().parse_args(
            ["spm", "train", "--input", "a", "--vocab-size", "8", "--model-prefix", "m",
             *command_flags(SentencePieceSettings, settings)]
        )  # fmt: skip
        parsed = SentencePieceSettings(**{f.name: getattr(args, f.name) for f in fields.values()})
        expected = {fields[key].name: value for key, value in settings.items()}
        assert parsed == SentencePieceSettings(**expected)
    for value in LINEARIZATIONS:
        flags = command_flags(TreebankSettings, {"linearization": value})
        args = build_parser().parse_args(["treebank", "smoke", "--out", "o", *flags])
        assert args.linearization == value


@pytest.mark.parametrize(
    ("cooldown", "why"),
    [
        (11, r"train.cooldown must be from 0 to train.steps \(10\), got 11"),
        (-1, r"train.cooldown must be at least 0, got -1"),
        (True, "train.cooldown must be an integer, got True"),
        (2.5, "train.cooldown must be an integer, got 2.5"),
    ],
)
def test_train_settings_refuse_a_cooldown_outside_the_run(cooldown, why):
    with pytest.raises(ConfigError, match=why):
        TrainSettings(steps=10, cooldown=cooldown)
    assert TrainSettings(steps=10, cooldown=10).cooldown == 10


def test_a_settings_field_declares_what_the_schema_says_of_it():
    """The schema's key is the field's declaration: choices as the enum (YAML's on/off as
    booleans too), bounds, default, help."""
    (linearization,) = flagged_fields(TreebankSettings)
    key = SCHEMA["properties"]["table4"]["properties"]["linearization"]
    assert key["enum"] == list(linearization.metadata["choices"])
    assert key["default"] == linearization.default
    assert key["description"] == linearization.metadata["help"]
    compile_ = SCHEMA["properties"]["train"]["properties"]["compile"]
    assert compile_["enum"] == ["auto", "on", "off", True, False]
    fields = {f.name: f for f in dataclasses.fields(TrainSettings)}
    seed = SCHEMA["properties"]["train"]["properties"]["seed"]
    assert (seed["minimum"], seed["maximum"]) == (0, fields["seed"].metadata["maximum"])


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_an_infinite_setting_is_refused_as_the_configuration_refuses_it(value, capsys):
    with pytest.raises(ConfigError, match="train.lr_scale must be a finite number"):
        TrainSettings(lr_scale=value)
    assert main(["train", "--train", "x", "--out-dir", "y", f"--lr-scale={value}"]) == 2
    assert "train.lr_scale must be a finite number" in capsys.readouterr().err
