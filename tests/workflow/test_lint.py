"""The workflow passes `snakemake --lint` and `snakefmt --check`, and its rule files stay
rules and thin calls (the logic is transformer_core.workflow_plan, unit-tested)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from transformer_core.parsing.corpora import NLTK_MEMBER_PREFIX


def tool(name):
    return shutil.which(name) or str(Path(sys.executable).parent / name)


@pytest.mark.parametrize(
    "config",
    [
        "config/config.yaml",
        "config/smoke.yaml",
        "config/multi30k.yaml",
        "config/multi30k_tiny.yaml",
        "config/nltk_parsing.yaml",
    ],
)
def test_snakemake_lint_is_clean(config, tmp_path):
    configfiles = [config]
    table4 = yaml.safe_load((ROOT / config).read_text()).get("table4", {})
    treebank = table4.get("treebank_zip")
    if treebank and not (ROOT / treebank).is_file():
        # Without ../shared/data the configuration check stops before the lint: lint with an
        # archive of empty members named as NLTK's, enough for the held-out files, in its
        # place, the configuration otherwise as shipped.
        stand_in = tmp_path / "treebank.zip"
        with zipfile.ZipFile(stand_in, "w") as archive:
            for number in range(1, 2 * table4["held_out_files"] + 2):
                archive.writestr(f"{NLTK_MEMBER_PREFIX}wsj_{number:04d}.mrg", "")
        overlay = tmp_path / "treebank.yaml"
        overlay.write_text(yaml.safe_dump({"table4": {"treebank_zip": str(stand_in)}}))
        configfiles.append(str(overlay))
    proc = subprocess.run(
        [tool("snakemake"), "--lint", "--configfile", *configfiles],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, config + "\n" + proc.stdout + proc.stderr


def test_snakefmt_check_is_clean():
    proc = subprocess.run(
        [tool("snakefmt"), "--check", "Snakefile", "workflow/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


RULE_FILE_LINES = 250
HELPER_LINES = 12  # a helper's body, its docstring included


def test_rule_files_hold_rules_not_logic():
    """No rule file grows past 250 lines, and none defines a function longer than a short
    helper: what the rules compute belongs in transformer_core.workflow_plan, under test."""
    for path in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        lines = path.read_text().splitlines()
        assert len(lines) <= RULE_FILE_LINES, f"{path.name}: {len(lines)} lines"
        for start, line in enumerate(lines):
            if line.startswith("def "):
                body = []
                for inner in lines[start + 1 :]:
                    if inner and not inner.startswith(" "):
                        break
                    body += [inner] if inner.strip() else []
                assert len(body) <= HELPER_LINES, f"{path.name}: {line} has {len(body)} lines"
