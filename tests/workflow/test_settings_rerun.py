"""A changed setting always reruns what it changed: on the finished smoke quickstart, each
train, model and decode setting of config/smoke.yaml changed in turn makes `snakemake -n`
schedule the jobs that read it (and nothing of the data stage). The cases are generated from
the settings classes, so a new field is covered without editing this test."""

import copy
import dataclasses
import re
import shutil

import pytest
import yaml
from conftest import SMOKE, snakemake

from transformer_core.settings import (
    AUTO,
    DEV,
    DecodeSettings,
    InferenceSettings,
    TrainSettings,
    config_fields,
    config_key,
)

TARGET = "results/scores/en_de/base.test.avg.json"  # one run, trained and decoded
DATA_RULES = {"download", "prepare", "prepare_shard", "spm_train", "binarize", "merge_shards"}
SMOKE_CONFIG = yaml.safe_load(SMOKE.read_text())


def _changed(f: dataclasses.Field, value):
    """Another valid value of settings field ``f`` than ``value`` (its configured one)."""
    meta = f.metadata
    if "choices" in meta:
        return next(c for c in meta["choices"] if c not in (value, AUTO))
    if value in (AUTO, DEV, None):
        value = f.default if f.default not in (AUTO, None) else meta.get("minimum", 1)
        if value is None or value == 0:
            return 10
        return value if isinstance(value, int) else value + 0.5
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 if value + 1 <= meta.get("maximum", value + 1) else value - 1
    return round(value * 1.5 + 0.1, 3)


def _cases():
    """(section, key, new value, the rule that must rerun) for every configured field."""
    cases = []
    for f in config_fields(TrainSettings):
        section = ("models", "base") if f.metadata.get("by_experiment") else ("train",)
        cases.append((section, config_key(f), f, "train"))
    for cls in (DecodeSettings, InferenceSettings):
        for f in config_fields(cls):
            if f.name != "tree_constraint":  # the parsing runs' alone
                cases.append((("decode",), config_key(f), f, "translate"))
    for key in ("init", "init_std"):
        cases.append((("model",), key, None, "train"))
    return cases


@pytest.fixture(scope="module")
def finished(smoke_quickstart, tmp_path_factory):
    """A copy of the finished quickstart, which nothing here runs in."""
    assert smoke_quickstart.proc.returncode == 0, smoke_quickstart.proc.stderr[-5000:]
    work = tmp_path_factory.mktemp("rerun")
    shutil.copytree(smoke_quickstart.workdir, work, dirs_exist_ok=True, symlinks=True)
    proc = snakemake(work, "-n", "--cores", "1", TARGET)
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    return work


def _scheduled(work, config, tmp_path) -> set[str]:
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = snakemake(work, "-n", "--cores", "1", TARGET, configfiles=(path,))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    return set(re.findall(r"^rule (\w+):", out, re.M))


@pytest.mark.parametrize(
    ("section", "key", "field", "rule"),
    _cases(),
    ids=[".".join((*section, key)) for section, key, _, _ in _cases()],
)
def test_a_changed_setting_reruns_the_jobs_that_read_it(
    finished, tmp_path, section, key, field, rule
):
    config = copy.deepcopy(SMOKE_CONFIG)
    node = config
    for name in section:
        node = node.setdefault(name, {})
    if field is None:  # model: the init's own values
        node[key] = {"init": "normal", "init_std": 0.05}[key]
        node.setdefault("init", "normal")
    else:
        node[key] = _changed(field, node.get(key, field.default))
    if key == "seed":
        config["seeds"] = [node[key]]
    scheduled = _scheduled(finished, config, tmp_path)
    assert rule in scheduled, (key, node[key], scheduled)
    assert not scheduled & DATA_RULES, scheduled
