"""ModelConfig validation, presets, Table 3 rows, parameter counts, and the paper's numbers as data."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from transformer_core import paper
from transformer_core.data.settings import SentencePieceSettings, TreebankSettings
from transformer_core.decoding.dev_choice import CHOSEN_FIELDS
from transformer_core.errors import ConfigError
from transformer_core.model.config import (
    BASE,
    BIG,
    TABLE3_ROWS,
    ModelConfig,
    experiment,
    model_config,
)
from transformer_core.parsing.trees import LINEARIZATIONS
from transformer_core.settings import (
    AUTO,
    COMPILE_MODES,
    DEV,
    PARSING_SEARCH,
    PRECISIONS,
    InferenceSettings,
    TrainConfig,
    command_flags,
    config_fields,
    config_key,
    decode_fields,
    decode_flags,
    flagged_fields,
    inference_flags,
    train_flags,
)
from transformer_core.tables.params import parameter_table


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("d_model", 0),
        ("h", -1),
        ("d_k", 2.5),
        ("encoder_layers", True),
        ("dropout", 1.0),
        ("label_smoothing", -0.1),
        ("positional", "rotary"),
        ("pad_id", 37000),
        ("bos_id", "2"),
        ("init", "kaiming"),
        ("init_std", 0.0),
    ],
)
def test_invalid_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"model.{field}"):
        BASE.replace(**{field: value})


def test_special_ids_must_differ():
    with pytest.raises(ConfigError, match="must differ"):
        ModelConfig(pad_id=2)


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="d_modle"):
        ModelConfig.from_dict({"d_modle": 512}, where="experiments.base.model")


def test_round_trip_through_dict():
    assert ModelConfig.from_dict(BIG.to_dict()) == BIG


def test_presets_follow_the_paper():
    assert (BASE.encoder_layers, BASE.d_model, BASE.d_ff, BASE.h, BASE.d_k, BASE.dropout) == (
        6,
        512,
        2048,
        8,
        64,
        0.1,
    )
    assert (BIG.d_model, BIG.d_ff, BIG.h, BIG.dropout) == (1024, 4096, 16, 0.3)
    assert experiment("big").train_steps == 300_000 and experiment("base").train_steps == 100_000


def test_every_table3_row_is_a_valid_override_of_base():
    assert list(TABLE3_ROWS) == list(paper.TABLE3)
    assert model_config("B1").d_k == 16 and model_config("B1").d_v == 64
    assert model_config("C4").d_model == 256 and model_config("C4").d_k == 32
    assert model_config("E").positional == "learned"
    assert model_config("D3").label_smoothing == 0.0
    with pytest.raises(ConfigError, match="unknown experiment 'F9'"):
        model_config("F9")


def test_parameter_counts_near_the_papers_column():
    rows = {r["row"]: r for r in parameter_table(37000)}
    assert rows["base"]["params"] == 63_082_496  # = HF Marian of the same shape
    assert 213e6 < rows["big"]["params"] < 215e6
    for row in rows.values():
        if row["paper_params_m"] is not None:
            assert abs(row["gap_pct"]) <= 7.0, row


def test_params_command_json():
    out = subprocess.run(
        [sys.executable, "-m", "transformer_core", "params", "--vocab-size", "37000", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = {r["row"]: r for r in json.loads(out)}
    assert round(rows["base"]["params_m"]) == 63 and round(rows["big"]["params_m"]) == 214


def test_params_command_rejects_bad_vocab():
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_core", "params", "--vocab-size", "2"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--vocab-size" in proc.stderr and "Traceback" not in proc.stderr


def test_paper_cost_check_and_tables():
    for run, expected in (("base", 3.3e18), ("big", 2.3e19)):
        r = paper.PAPER_TRAINING_RUNS[run]
        assert r["hours"] * 3600 * r["devices"] * 9.5e12 == pytest.approx(expected, rel=0.02)
    ours = {r.model: r for r in paper.TABLE2 if r.ours}
    assert ours["Transformer (big)"].en_fr_bleu == 41.8
    assert any("41.0" in note for note in paper.TABLE2_NOTES)
    assert len(paper.TABLE2) == 10 and len(paper.TABLE4) == 12
    assert paper.TABLE3["C5"].params_m == 168 and paper.TABLE3["big"].ppl == 4.33


def test_parsing_preset_is_table4s_model():
    cfg = model_config("parsing")
    assert (
        cfg.encoder_layers,
        cfg.decoder_layers,
        cfg.d_model,
        cfg.d_ff,
        cfg.h,
        cfg.d_k,
        cfg.d_v,
    ) == (4, 4, 1024, 2048, 8, 128, 128)
    assert (cfg.dropout, cfg.label_smoothing, cfg.positional) == (
        BASE.dropout,
        BASE.label_smoothing,
        "sinusoidal",
    )
    assert experiment("parsing").train_steps == experiment("base").train_steps == 100_000
    assert "parsing" not in TABLE3_ROWS
    with pytest.raises(ConfigError, match="known: base, .*, big, parsing"):
        experiment("parse")


def test_paper_configuration_agrees_with_the_library_defaults():
    """config/config.yaml spells out the paper's recipe; TrainConfig and DecodeOptions hold the same
    values as their defaults (the CLI's). Each is read by its own caller, so this keeps them equal."""
    import yaml

    from transformer_core.settings import DecodeOptions, TrainConfig

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    paper, big, decode = TrainConfig(), TrainConfig.for_experiment("big"), DecodeOptions()
    for key in (
        "tokens_per_step",
        "max_tokens",
        "warmup",
        "lr_scale",
        "seed",
        "log_interval",
        "precision",
    ):
        assert config["train"][key] == getattr(paper, key), key
    for preset, cfg in (("base", paper), ("big", big)):
        assert config["models"][preset]["checkpoint_interval"] == cfg.checkpoint_interval
        assert config["models"][preset]["average_last"] == cfg.keep_last
    for f in decode_fields():
        if f.name != "tree_constraint":  # a parsing setting: Table 4's section has it
            assert config["decode"][config_key(f)] == getattr(decode, f.name), f.name


def test_decode_options_and_the_schema_agree_field_by_field():
    """Each flagged DecodeOptions field is a key of the schema's `decode` sections, of its
    type; the workflow turns those sections into the same flags (decode_flags)."""
    import yaml

    root = ROOT
    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    translation = schema["properties"]["decode"]["properties"]
    table4 = schema["properties"]["table4"]["properties"]
    json_type = {int: "integer", float: "number"}
    for f in decode_fields():
        key = config_key(f)
        if f.name == "tree_constraint":
            assert key not in translation
            assert table4["decode"]["properties"][key]["type"] == "boolean"
            assert f.metadata["choices"] == LINEARIZATIONS == tuple(table4["linearization"]["enum"])
            continue
        for section in (translation, table4["decode"]["properties"]):
            spec = section[key]
            if section is translation and f.name in CHOSEN_FIELDS:  # a number, or dev
                assert spec["oneOf"][1] == {"const": DEV}, key
                spec = spec["oneOf"][0]
            assert spec["type"] == json_type[type(f.default)], key
        # table4.decode's defaults are the paper's parsing search, the table4 command's too.
        assert table4["decode"]["properties"][key]["default"] == getattr(PARSING_SEARCH, f.name)
    for f in config_fields(InferenceSettings):  # the runtime of decoding: the same sections
        for section in (translation, table4["decode"]["properties"]):
            assert section[config_key(f)].get("default", f.default) == f.default, f.name
    assert inference_flags({"max_tokens": 9, "compile": True, "precision": "fp32"}) == [
        "--precision", "fp32", "--compile", "on", "--max-tokens", "9",
    ]  # fmt: skip
    assert decode_flags({"beam": 21, "alpha": 0.3, "max_len_b": 300, "max_tokens": 9}) == [
        "--beam", "21", "--alpha", "0.3", "--max-len-b", "300",
    ]  # fmt: skip
    assert decode_flags({"tree_constraint": "words"}) == ["--tree-constraint", "words"]
    assert decode_flags({"tree_constraint": None}) == []


def test_train_config_and_the_schema_agree_field_by_field():
    """Each flagged TrainConfig field is a key of the schema, of its type, with TrainConfig's
    default where the schema gives one: in a preset's checkpointing (models.base, models.big)
    where the experiment decides it, in `train` otherwise, and in table4.train where the
    parsing runs may replace it. The workflow's arguments (train_flags) parse back, through
    `transformer-core train`'s own parser, to the TrainConfig of the same values."""
    import yaml

    from transformer_core.cli import build_parser
    from transformer_core.commands.train import train_config

    root = ROOT
    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    train = schema["properties"]["train"]["properties"]
    checkpointing = schema["$defs"]["checkpointing"]["properties"]
    table4 = schema["properties"]["table4"]["properties"]["train"]["properties"]
    json_type = {int: "integer", float: "number", bool: "boolean"}
    for f in config_fields(TrainConfig):
        key = config_key(f)
        section = checkpointing if f.metadata.get("by_experiment") else train
        if "choices" in f.metadata:  # words: the schema allows each (and YAML's on/off)
            assert set(f.metadata["choices"]) <= set(section[key]["enum"]), key
        elif f.default == "auto":  # a positive integer or the word auto (max_tokens)
            assert section[key]["type"] == ["integer", "string"], key
            assert (section[key]["minimum"], section[key]["pattern"]) == (1, "^auto$"), key
        else:
            kind = int if f.default is None else type(f.default)  # None: an optional integer
            assert section[key]["type"] == json_type[kind], key
        assert section[key].get("default", f.default) == f.default, key
        if key in table4:
            assert table4[key]["type"] == section[key]["type"], key
    settings = {"steps": 7, "max_tokens": 11, "tokens_per_step": 13, "warmup": 17,
                "lr_scale": 0.5, "checkpoint_interval": 3, "average_last": 2, "seed": 5,
                "log_interval": 9, "dev_interval": 19, "dropout": 0.3, "cooldown": 5}  # fmt: skip
    args = build_parser().parse_args(
        ["train", "--train", "t", "--out-dir", "r", "--experiment", "big", *train_flags(settings)]
    )
    cfg = train_config(args)
    assert (cfg.steps, cfg.max_tokens, cfg.tokens_per_step, cfg.warmup) == (7, 11, 13, 17)
    assert (cfg.lr_scale, cfg.checkpoint_interval, cfg.keep_last) == (0.5, 3, 2)
    assert (cfg.seed, cfg.log_interval, cfg.dev_interval, cfg.cooldown) == (5, 9, 19, 5)
    left_out = train_config(build_parser().parse_args(["train", "--train", "t", "--out-dir", "r",
                                                       "--experiment", "big"]))  # fmt: skip
    assert left_out == TrainConfig.for_experiment("big")
    assert (left_out.steps, left_out.keep_last) == (300_000, 20)


def test_the_schemas_device_settings_are_the_commands():
    """The schema's precision and compile keys (train, decode, table4.decode) allow the
    commands' choices, with AUTO, TrainConfig's default, as their default (YAML's on/off
    booleans are the compile words, settings.command_flags)."""
    import yaml

    root = ROOT
    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    props = schema["properties"]
    sections = [props["train"], props["decode"], props["table4"]["properties"]["decode"]]
    for section in sections:
        precision, compile_ = section["properties"]["precision"], section["properties"]["compile"]
        assert tuple(precision["enum"]) == PRECISIONS and precision["default"] == AUTO
        assert tuple(compile_["enum"]) == (*COMPILE_MODES, True, False)
        assert compile_["default"] == AUTO
    assert TrainConfig().precision == TrainConfig().compile == TrainConfig().device == AUTO
    assert {setting["default"] for setting in props["threads"]["properties"].values()} == {AUTO}


def test_sentencepiece_settings_and_the_schema_agree():
    """The SentencePieceSettings fields the configuration sets (pairs.<pair>.spm_sample_size,
    table4.split_by_unicode_script) are schema keys of the field's type, with its default
    where the schema gives one; the workflow's spm options (command_flags) parse back,
    through `spm train`'s own parser, to the settings of the same values."""
    import yaml

    from transformer_core.cli import build_parser

    root = ROOT
    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    pair = schema["properties"]["pairs"]["additionalProperties"]["properties"]
    table4 = schema["properties"]["table4"]["properties"]
    fields = {config_key(f): f for f in flagged_fields(SentencePieceSettings)}
    assert pair["spm_sample_size"]["type"] == "integer"
    assert table4["split_by_unicode_script"] == {
        **table4["split_by_unicode_script"], "type": "boolean",
        "default": fields["split_by_unicode_script"].default,
    }  # fmt: skip
    for settings in ({"spm_sample_size": 5000, "split_by_unicode_script": False}, {}):
        args = build_parser().parse_args(
            ["spm", "train", "--input", "a", "--vocab-size", "8", "--model-prefix", "m",
             *command_flags(SentencePieceSettings, settings)]
        )  # fmt: skip
        parsed = SentencePieceSettings(**{f.name: getattr(args, f.name) for f in fields.values()})
        expected = {fields[key].name: value for key, value in settings.items()}
        assert parsed == SentencePieceSettings(**expected)


def test_the_treebank_settings_are_the_schemas_linearization():
    """table4.linearization is TreebankSettings' field: its choices and default, and the
    workflow's treebank flag (command_flags) parses back through `treebank`'s parser."""
    import yaml

    from transformer_core.cli import build_parser

    root = ROOT
    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    key = schema["properties"]["table4"]["properties"]["linearization"]
    (field,) = flagged_fields(TreebankSettings)
    assert (tuple(key["enum"]), key["default"]) == (field.metadata["choices"], field.default)
    for value in LINEARIZATIONS:
        flags = command_flags(TreebankSettings, {"linearization": value})
        args = build_parser().parse_args(["treebank", "smoke", "--out", "o", *flags])
        assert args.linearization == value


@pytest.mark.parametrize(
    ("cooldown", "why"),
    [
        (11, r"train.cooldown must be from 0 to train.steps \(10\), got 11"),
        (-1, r"train.cooldown must be from 0 to train.steps \(10\), got -1"),
        (True, "train.cooldown must be an integer, got True"),
        (2.5, "train.cooldown must be an integer, got 2.5"),
    ],
)
def test_train_config_refuses_a_cooldown_outside_the_run(cooldown, why):
    from transformer_core.settings import TrainConfig

    with pytest.raises(ConfigError, match=why):
        TrainConfig(steps=10, cooldown=cooldown)
    assert TrainConfig(steps=10, cooldown=10).cooldown == 10
