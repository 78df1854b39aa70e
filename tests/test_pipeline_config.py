"""Configuration checks: every mistake is named by its key, before any job runs."""

import copy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from transformer_core.errors import ConfigError
from transformer_core.pipeline_config import check, experiments

ROOT = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_paper_config_passes_and_lists_experiments():
    check(PAPER)
    names = experiments(PAPER)
    assert names[:2] == ["base", "big"] and len(names) == 20


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda c: c["table3"]["rows"].__setitem__(1, "Z9"), "table3.rows[1]"),
        (lambda c: c["table2"]["pairs"].append("en_xx"), "table2.pairs[2]"),
        (lambda c: c["table3"].__setitem__("pair", "de_en"), "table3.pair"),
        (lambda c: c.__setitem__("mirror", "/nonexistent/mirror"), "mirror"),
        (lambda c: c["scale_rule"].__setitem__("width_divisor", 3), "scale_rule.width_divisor"),
        (lambda c: c.__setitem__("model", {"init": "uniform"}), "model.init"),
        (lambda c: c.__setitem__("model", {"inti": "normal"}), "inti"),
    ],
)
def test_semantic_errors_name_the_key(edit, key):
    config = copy.deepcopy(PAPER)
    edit(config)
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        check(config)


def test_unknown_dataset_is_named():
    config = copy.deepcopy(PAPER)
    config["pairs"]["en_de"]["dataset"] = "wmt99"
    with pytest.raises(ConfigError, match="pairs.en_de.dataset"):
        check(config, known_datasets=("wmt14_en_de", "wmt14_en_fr"))


def snakemake_dry_run(tmp_path, config):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    exe = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
    return subprocess.run(
        [
            exe,
            "-n",
            "--cores",
            "1",
            "--configfile",
            str(path),
            "-d",
            str(tmp_path / "work"),
            "-s",
            str(ROOT / "Snakefile"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_paper_dry_run_lists_the_whole_dag(tmp_path):
    proc = snakemake_dry_run(tmp_path, PAPER)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout + proc.stderr
    for rule, count in (
        ("download", 2),
        ("train", 22),
        ("average", 4),
        ("table3_row", 20),
        ("table2", 1),
    ):
        assert any(line.split() == [rule, str(count)] for line in out.splitlines()), (rule, out)
    assert not (tmp_path / "work" / "results").exists()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c["table3"]["rows"].append("Q1"), "table3.rows[20]"),
        (lambda c: c["models"]["base"].__setitem__("steps", -5), "steps"),
        (lambda c: c.__setitem__("mirror", "/no/such/dir"), "mirror"),
        (lambda c: c["train"].__setitem__("warmpu", 10), "warmpu"),
    ],
)
def test_bad_config_stops_snakemake_before_any_job(tmp_path, edit, expected):
    config = copy.deepcopy(PAPER)
    edit(config)
    proc = snakemake_dry_run(tmp_path, config)
    assert proc.returncode != 0
    assert expected in proc.stderr + proc.stdout
    assert not (tmp_path / "work" / "data").exists()
