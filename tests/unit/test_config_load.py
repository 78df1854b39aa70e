"""transformer_core.workflow_plan.config_load: the configuration as workflow/rules/common.smk
reads it, every check in order, called as common.smk calls it (Snakemake's ``validate`` with
the schema's path). tests/workflow/test_configuration_checks.py runs the same through
Snakemake."""

import copy

import pytest
import yaml
from conftest import ROOT, SMOKE
from snakemake.utils import validate

from transformer_core.errors import ConfigError
from transformer_core.workflow_plan.config_facts import run_options
from transformer_core.workflow_plan.config_load import RUN_OPTIONS, load

SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")
DEFAULTED = "config: not set in the configuration, the schema's defaults are used: "


def smoke(tmp_path, edit=lambda config: None, text=None):
    """config/smoke.yaml after ``edit`` (or ``text``), written to a file as --configfile
    gives it: (the config Snakemake holds, the file)."""
    config = yaml.safe_load(SMOKE.read_text())
    edit(config)
    path = tmp_path / "config.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(config))
    return config, path


def load_as_snakemake(config, path, overrides=None, cores=1):
    """``load`` with what common.smk passes for `snakemake --configfile PATH --config ...`."""
    load(
        config,
        configfiles=[str(path)],
        command_configfiles=[str(path)],
        overrides=overrides or {},
        cores=cores,
        validate=lambda data: validate(data, SCHEMA),
    )


def test_a_good_configuration_loads_with_its_defaults_and_run_options(tmp_path):
    config, path = smoke(tmp_path)
    load_as_snakemake(config, path)
    assert config["decode"]["alpha"] == "dev" and config["seeds"] == [1]
    assert "resamples" in config["bootstrap"]  # a schema default filled in
    assert config[RUN_OPTIONS] == run_options([str(path)], {})


def test_no_core_count_passes(tmp_path):  # --lint, --report
    config, path = smoke(tmp_path)
    load_as_snakemake(config, path, cores=None)


def test_nested_config_overrides_are_typed_before_the_checks(tmp_path):
    config, path = smoke(tmp_path)
    config["decode"]["alpha"] = "0.6"  # as Snakemake gives --config 'decode={alpha: 0.6}'
    overrides = {"decode": {"alpha": "0.6"}}
    load_as_snakemake(config, path, overrides)
    assert config["decode"]["alpha"] == 0.6
    assert config[RUN_OPTIONS] == run_options([str(path)], overrides)


@pytest.mark.parametrize(
    ("edit", "cores", "message"),
    [
        (lambda c: c["table3"]["rows"].__setitem__(1, "Z9"), 1, r"^table3\.rows\[1\]: unknown row"),
        (lambda c: c["decode"].__setitem__("beam", "wide"), 1, r"^decode\.beam: 'wide' is neither"),
        (
            lambda c: c["pairs"]["en_de"].__setitem__("dataset", "nope"),
            1,
            r"^pairs\.en_de\.dataset",
        ),
        (lambda c: c["train"].__setitem__("lr_scale", float("nan")), 1, r"^train\.lr_scale"),
        (lambda c: None, 0, r"^--cores 0: give at least 1 core"),
    ],
)
def test_a_bad_configuration_stops_with_one_line_naming_the_key(tmp_path, edit, cores, message):
    config, path = smoke(tmp_path, edit)
    with pytest.raises(ConfigError, match=message) as error:
        load_as_snakemake(config, path, cores=cores)
    assert "\n" not in str(error.value)


def test_a_key_written_twice_stops_before_the_schema(tmp_path):
    text = SMOKE.read_text() + "\nseeds: [2]\n"
    config, path = smoke(tmp_path, text=text)
    with pytest.raises(ConfigError, match="seeds"):
        load_as_snakemake(config, path)


def test_the_checks_run_before_the_schema_fills_in_defaults(tmp_path):
    """A bad grid is named in one line by the check, not by the schema's longer message."""
    config, path = smoke(tmp_path, lambda c: c["decode"]["grid"].__setitem__("beam", []))
    validated = []
    with pytest.raises(ConfigError, match=r"^decode\.grid\.beam: give a non-empty list"):
        load(
            config,
            configfiles=[str(path)],
            command_configfiles=[],
            overrides={},
            cores=1,
            validate=validated.append,
        )
    assert not validated


def test_keys_left_out_are_named_with_their_defaults(tmp_path, capsys):
    config, path = smoke(tmp_path)
    load_as_snakemake(copy.deepcopy(config), path)
    stated = capsys.readouterr().err
    del config["threads"]["train"]
    load_as_snakemake(config, path)
    lines = capsys.readouterr().err.splitlines()
    assert "threads.train=" not in stated  # a key the file sets is not named
    [line] = [line for line in lines if line.startswith(DEFAULTED)]
    assert f"threads.train={config['threads']['train']}" in line.removeprefix(DEFAULTED).split(", ")
