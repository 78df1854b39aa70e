"""Hostile and mistaken configurations, through Snakemake: nothing from the configuration runs
in a shell (every rule's command quoted, in dry runs and a real run of the data rules), a bad
key is refused when the configuration loads, naming it, and every shipped configuration
stands alone."""

import copy
import os
import subprocess
import zipfile

import pytest
import yaml
from conftest import ROOT, snakemake_on

from transformer_core.data.registry import load_registry
from transformer_core.errors import ConfigError
from transformer_core.workflow_plan.config_checks import check, defaulted_keys

SMOKE = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())

# Each payload, if a shell ever evaluates it, creates a file named PWNED* in the shell's folder.
MARK = "$(touch PWNED1)`touch PWNED2`;touch PWNED3;'\"$(touch PWNED4)\"'"


def pwned(*folders):
    return [str(p) for folder in folders if folder.exists() for p in folder.rglob("PWNED*")]


def run_printed_commands(tmp_path, out):
    """Run every shell command a dry run printed, in bash, with the programs replaced by stubs:
    only the shell's own expansion can then create a PWNED file. Returns the commands run."""
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("transformer-core", "python", "torchrun"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
        (stubs / name).chmod(0o755)
    shell = tmp_path / "shell"
    shell.mkdir(exist_ok=True)
    commands = [
        line.split("Shell command: ", 1)[1]
        for line in out.splitlines()
        if "Shell command: " in line
    ]
    for command in commands:
        subprocess.run(
            ["bash", "-c", command],
            cwd=shell,
            capture_output=True,
            timeout=30,
            env={**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"},
        )
    return commands


def test_dataset_payload_is_refused_at_config_load(tmp_path):
    config = copy.deepcopy(SMOKE)
    config["pairs"]["en_de"]["dataset"] = "$(touch PWNED1)smoke_en_de"
    proc = snakemake_on(tmp_path, config, "data/en_de/raw/manifest.json")
    assert proc.returncode != 0
    assert "pairs.en_de.dataset" in proc.stdout + proc.stderr
    assert not pwned(tmp_path, ROOT) and not (tmp_path / "work" / "data").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dataset", "smoke_en_de; touch PWNED1"),
        ("mirror", "$(touch PWNED1)://example.invalid/"),
    ],
)
def test_config_check_refuses_unknown_datasets_and_mirror_schemes(key, value):
    config = copy.deepcopy(SMOKE)
    if key == "dataset":
        config["pairs"]["en_de"]["dataset"] = value
    else:
        config["mirror"] = value
    with pytest.raises(ConfigError, match="pairs.en_de.dataset" if key == "dataset" else "mirror"):
        check(config, known_datasets=tuple(load_registry().datasets))


def test_payloads_in_every_rule_are_quoted_in_a_dry_run(tmp_path):
    """Every string of the configuration that reaches a shell command carries a payload; the
    dry run's printed commands, run by bash with stub programs, create nothing."""
    semi = tmp_path / f"corpus{MARK}"
    semi.mkdir()
    for name in ("train.words", "train.tree"):
        (semi / name).write_text("a b\n(S (X a) (X b))\n")
    config = copy.deepcopy(SMOKE)
    config["mirror"] = f"http://example.invalid/{MARK}"
    # scale takes no payload: the schema allows only a name (issue 29, tests/workflow/test_configuration_checks.py)
    config["table4"]["semi_supervised_dir"] = str(semi)
    proc = snakemake_on(tmp_path, config, "-n", "-p")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    commands = run_printed_commands(tmp_path, proc.stdout + proc.stderr)
    rules = {
        line.split()[1].rstrip(":")
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.startswith("rule ")
    }
    assert rules >= {
        "download",
        "prepare",
        "spm_train",
        "binarize",
        "train",
        "average",
        "translate",
        "score",
        "treebank",
        "treebank_merge",
        "delinearize",
        "evalb",
        "table3_row",
        "table3",
        "table2",
        "table4",
        "report",
    }, rules
    assert any(MARK in command or "PWNED1" in command for command in commands)
    assert not pwned(tmp_path, ROOT), [c for c in commands if "PWNED" in c][:3]


def test_treebank_archive_payload_is_quoted(tmp_path):
    archive = tmp_path / f"treebank{MARK}.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(1, 6):  # 2 dev and 2 test files leave one to train on
            zf.writestr(f"treebank/combined/wsj_000{i}.mrg", "")
    config = copy.deepcopy(SMOKE)
    config["table4"] = {
        "treebank": "nltk",
        "treebank_zip": str(archive),
        "held_out_files": 2,
        "vocab_size": 100,
        "semi_supervised_dir": "",
        "decode": SMOKE["table4"]["decode"],
    }
    proc = snakemake_on(tmp_path, config, "-n", "-p", "data/parse_treebank/treebank/train.words")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    commands = run_printed_commands(tmp_path, proc.stdout + proc.stderr)
    assert any("treebank" in c and "nltk" in c for c in commands), commands
    assert not pwned(tmp_path, ROOT)


def test_mirror_payload_in_a_real_run_of_the_data_rules(tmp_path):
    """download and prepare of the smoke corpus (generated locally) really run; the mirror's
    payload reaches their shell command and does nothing."""
    config = copy.deepcopy(SMOKE)
    config["mirror"] = f"http://example.invalid/{MARK}"
    proc = snakemake_on(tmp_path, config, "data/en_de/prepared/dev.src")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert (tmp_path / "work" / "data" / "en_de" / "prepared" / "dev.src").stat().st_size > 0
    assert not pwned(tmp_path, ROOT)


# -- 8. every shipped configuration stands alone ---------------------------------------------------


@pytest.mark.parametrize("name", ["config", "smoke", "multi30k", "multi30k_tiny", "nltk_parsing"])
def test_every_key_the_rules_read_is_set_in_each_shipped_configuration(name):
    config = yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())
    assert defaulted_keys(config) == []


def test_a_smoke_file_missing_a_key_never_takes_the_papers_value(tmp_path):
    config = copy.deepcopy(SMOKE)
    del config["decode"]["max_tokens"]  # the paper's is 8192, the schema's default 4096
    proc = snakemake_on(
        tmp_path, config, "-n", "-p", "results/translations/en_de/base.test.avg.txt"
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "the schema's defaults are used: decode.max_tokens=4096" in out
    assert "--max-tokens 4096" in out and "8192" not in out
    del config["decode"]["max_len_b"]  # required: no default at all
    proc = snakemake_on(tmp_path, config, "-n", "results/translations/en_de/base.test.avg.txt")
    assert proc.returncode != 0 and "max_len_b" in proc.stdout + proc.stderr
    assert not (tmp_path / "work" / "data").exists()
