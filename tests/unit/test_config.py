"""ModelConfig validation, presets, Table 3 rows, parameter counts, and the paper's numbers as data."""

import json
import subprocess
import sys

import pytest

from transformer_core import paper
from transformer_core.errors import ConfigError
from transformer_core.model.config import (
    BASE,
    PRESETS,
    TABLE3_ROWS,
    ModelConfig,
    experiment,
    model_config,
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
    big = model_config("big")
    assert ModelConfig.from_dict(big.to_dict()) == big


def test_none_is_no_value_of_the_model():
    """A field whose default is a value refuses None (require_declared lets None pass only
    where it is the field's default, "not set")."""
    with pytest.raises(ConfigError, match="model.d_model must be an integer, got None"):
        BASE.replace(d_model=None)


def test_presets_follow_the_paper():
    """The presets the workflow trains (``model_config``), against Table 3's base and big rows
    and section 6.3's parser."""
    shape = ("encoder_layers", "d_model", "d_ff", "h", "d_k", "d_v", "dropout", "label_smoothing")
    of = {name: tuple(getattr(model_config(name), key) for key in shape) for name in PRESETS}
    assert of["base"] == (6, 512, 2048, 8, 64, 64, 0.1, 0.1)
    assert of["big"] == (6, 1024, 4096, 16, 64, 64, 0.3, 0.1)
    assert of["parsing"] == (4, 1024, 2048, 8, 128, 128, 0.1, 0.1)
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
