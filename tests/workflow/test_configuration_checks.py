"""Configuration checks: every mistake is named by its key, before any job runs."""

import copy
import shlex

import pytest
import yaml
from conftest import ROOT, snakemake, snakemake_on

from transformer_core.errors import ConfigError
from transformer_core.workflow_plan.config_checks import check
from transformer_core.workflow_plan.config_facts import (
    experiments,
    job_threads,
    rank_threads,
    run_options,
)
from transformer_core.workflow_plan.config_yaml import check_values

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
        # passed `snakemake -n`, then failed in the train job after the data jobs
        (lambda c: c["train"].update(compute_weights="bf16", precision="fp32"),
         "train.compute_weights: bf16"),
    ],
)  # fmt: skip
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


def test_paper_dry_run_lists_the_whole_dag(tmp_path):
    proc = snakemake_on(tmp_path, PAPER, "-n")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout + proc.stderr
    for rule, count in (
        ("download", 2),
        # the training corpora in shards (pairs.*.shards: EN-DE 16, EN-FR 128), merged back
        ("shard_index", 2),
        ("prepare_shard", 16 + 128),
        ("prepare_report", 2),
        ("binarize_shard", 16 + 128),
        ("merge_shards", 2),
        ("spm_train", 2),
        ("train", 22),
        ("average", 4),
        (
            "decode_choice",
            4,
        ),  # numbers: the settings of the 4 Table 2 models, the rows base's and big's
        ("table3_row", 20),
        ("table2", 1),
    ):
        assert any(line.split() == [rule, str(count)] for line in out.splitlines()), (rule, out)
    assert not (tmp_path / "work" / "results").exists()


def test_the_published_tiny_recipe_dry_run_has_its_text_shape_and_search(tmp_path):
    """config/multi30k_tiny.yaml: their lowercased tokenized unfiltered text, their model,
    their steps, beam 5, and decodes detokenized before they are scored."""
    tiny = yaml.safe_load((ROOT / "config" / "multi30k_tiny.yaml").read_text())
    check(tiny)
    proc = snakemake_on(tmp_path, tiny, "-n", "-p", "results/table2.csv")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    commands = [line for line in out.splitlines() if "transformer" in line]
    prepares = [c for c in commands if "transformer-core prepare" in c]
    assert len(prepares) == 3 and all("--lowercase --tokenize" in c for c in prepares), prepares
    assert all(("--no-filter" in c) for c in prepares), prepares  # train too: filter: false
    (train,) = [c for c in commands if " train --train " in c]
    for flag in ("--set d_model=128", "--set d_ff=256", "--set h=4", "--set encoder_layers=4",
                 "--set decoder_layers=4", "--set dropout=0.3", "--steps 8000",
                 "--warmup 2000", "--lr-scale 2.5298", "--keep-last 10"):  # fmt: skip
        assert flag in train, (flag, train)
    (translate,) = [c for c in commands if "transformer-core translate" in c]
    assert "--detokenize de" in translate and "--max-len-a 0.0 --max-len-b 200" in translate


@pytest.mark.parametrize("key", ["d_model", "dropout"])
def test_a_model_shape_goes_with_base_alone(key):
    config = copy.deepcopy(PAPER)
    config["model"] = {key: 128 if key == "d_model" else 0.3}
    with pytest.raises(ConfigError, match=f"model.{key}: .*also trains big, A1"):
        check(config)
    config["table2"]["models"], config["table3"]["rows"] = ["base"], ["base"]
    check(config)


def test_sharded_data_commands(tmp_path):
    """The EN-DE corpus in its 16 shards: each prepared from its line range of the raw files,
    sentencepiece trained on every shard's source then every shard's target (the whole
    corpus's order, so the same model for any number of shards), the shards merged in order."""
    proc = snakemake_on(tmp_path, PAPER, "-n", "-p", "data/en_de/bin/train.json")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout + proc.stderr
    shards = [f"data/en_de/shards/prepared/{i:04d}-of-0016" for i in range(16)]
    texts = " ".join([f"{s}.src" for s in shards] + [f"{s}.tgt" for s in shards])
    assert f"spm train --input {texts} --vocab-size 37000" in out
    assert "--shard-index data/en_de/shards/index.json --shard 15 --shards 16" in out
    assert (
        "shards split --src data/en_de/raw/train.en --tgt data/en_de/raw/train.de --shards 16"
        in out
    )
    parts = " ".join(f"data/en_de/shards/bin/{i:04d}-of-0016" for i in range(16))
    assert f"shards merge --parts {parts} --out-prefix data/en_de/bin/train" in out
    assert "--prepare-report data/en_de/prepared/train.report.json" in out


@pytest.mark.parametrize(
    ("decode", "line"),
    [
        ({"alpha": "dev", "grid": {"alpha": []}}, "decode.grid.alpha: give a non-empty list"),
        ({"alpha": "dev", "grid": {"alpha": [0.6, -0.3]}}, "grid.alpha[1]: must be at least 0"),
        ({"alpha": "dev", "grid": {"alpha": [0.6, float("nan")]}}, "decode.grid.alpha[1]: nan"),
        ({"beam": "dev", "grid": {"beam": [4, 0]}}, "decode.grid.beam[1]: must be at least 1"),
        (
            {"alpha": "dev", "grid": {"alpha": [0.6, 100]}},
            "decode.grid.alpha[1]: must be at most 10",
        ),
        ({"alpha": "best"}, "decode.alpha: 'best' is neither a number nor dev"),
    ],
)
def test_a_bad_decoding_grid_is_one_line_before_any_job(tmp_path, decode, line):
    config = copy.deepcopy(PAPER)
    config["decode"].update(decode)
    proc = snakemake_on(tmp_path, config, "-n")
    assert proc.returncode != 0
    assert [text for text in (proc.stderr + proc.stdout).splitlines() if line in text], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "work" / "data").exists()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c["table3"]["rows"].append("Q1"), "table3.rows[20]"),
        (lambda c: c["models"]["base"].__setitem__("steps", -5), "steps"),
        (lambda c: c.__setitem__("mirror", "/no/such/dir"), "mirror"),
        (lambda c: c["train"].__setitem__("warmpu", 10), "warmpu"),
        # Issue 29: refused before the work, by key, not after training.
        (lambda c: c.__setitem__("seeds", [1, -1]), "seeds"),
        (lambda c: c["train"].__setitem__("seed", -1), "seed"),
        (lambda c: c.__setitem__("bootstrap", {"seed": -1}), "bootstrap"),
        (lambda c: c.__setitem__("mirror", __file__), "is a file, not a directory"),
        (
            lambda c: c.__setitem__(
                "scale", "x\n\n.. raw:: html\n\n   <img src=x onerror=alert(1)>"
            ),
            "scale",
        ),
    ],
)
def test_bad_config_stops_snakemake_before_any_job(tmp_path, edit, expected):
    config = copy.deepcopy(PAPER)
    edit(config)
    proc = snakemake_on(tmp_path, config, "-n")
    assert proc.returncode != 0
    assert expected in proc.stderr + proc.stdout
    assert not (tmp_path / "work" / "data").exists()


def alias_bomb(depth):
    """YAML whose key ``model`` stands for 10^depth values in a few lines (nested aliases)."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, depth + 1)]
    return "\n".join([*lines, f"model: {{init: *a{depth}}}"]) + "\n"


def test_a_yaml_alias_bomb_stops_at_once_naming_a_key(tmp_path):
    """Issue 29: 10^9 values in 10 lines; refused by the first walk, in seconds."""
    config = yaml.safe_load(alias_bomb(3))
    check_values(config)  # 1,000 values pass
    with pytest.raises(ConfigError, match="a4: expands to more than 100,000 values"):
        check_values(yaml.safe_load(alias_bomb(9)))
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(9))
    proc = snakemake(
        tmp_path / "work", "-n", configfiles=(ROOT / "config" / "smoke.yaml", bomb), timeout=120
    )
    assert proc.returncode != 0
    assert "expands to more than 100,000 values" in proc.stdout + proc.stderr


def test_job_threads_auto_takes_every_core_and_ranks_share_them():
    """Issue 31: a lone job uses the cores it is given; a number stays a number."""
    assert job_threads("auto", 2) == 2
    assert job_threads("auto", None) == 1  # no --cores (a dry run)
    assert job_threads(1, 16) == 1 and job_threads(4, 2) == 4  # Snakemake lowers 4 to --cores
    assert rank_threads(16, 8) == 2 and rank_threads(2, 0) == 2 and rank_threads(2, 4) == 1


def test_thread_settings_reach_the_jobs(tmp_path):
    """threads.train auto runs training on every core of --cores (here 2); a number is kept;
    a bad value is refused by key before any job."""
    paper = copy.deepcopy(PAPER)
    target = "runs/en_de/base/summary.json"
    proc = snakemake_on(tmp_path, paper, "-n", "-p", "--cores", "2", target)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "--num-threads 2 --resume" in proc.stdout
    paper["threads"]["train"] = 1
    proc = snakemake_on(tmp_path, paper, "-n", "-p", "--cores", "2", target)
    assert "--num-threads 1 --resume" in proc.stdout
    paper["threads"]["train"] = "all"
    proc = snakemake_on(tmp_path, paper, "-n")
    assert proc.returncode != 0 and "threads" in proc.stderr + proc.stdout


def test_run_options_read_back_as_the_same_configuration():
    """The report's hints carry this run's --configfile and --config: Snakemake parses the
    printed --config values back into the values it was given."""
    from snakemake.cli import parse_config

    overrides = {
        "mirror": "/data/my mirror",
        "table4": {"treebank_zip": "../x.zip", "steps": 3},
        "seeds": [1, 2],
        "flag": True,
        "lr": 0.5,
        "empty": None,
    }
    options = run_options(["config/smoke.yaml", "seeds.yaml"], overrides)
    words = shlex.split(options)
    assert words[:3] == ["--configfile", "config/smoke.yaml", "seeds.yaml"]
    assert words[3] == "--config"
    parsed = parse_config(words[4:])
    # Nested values come back as strings (Snakemake reads YAML with BaseLoader), as the
    # user's own --config gave them.
    assert parsed == {
        **overrides,
        "table4": {"treebank_zip": "../x.zip", "steps": "3"},
        "seeds": ["1", "2"],
    }
    assert run_options([], {}) == ""


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path):
    text = (ROOT / "config" / "smoke.yaml").read_text()
    twice = text.replace("train:\n", "train:\n  warmup: 7\n", 1)  # smoke.yaml gives warmup too
    (tmp_path / "twice.yaml").write_text(twice)
    proc = snakemake(tmp_path / "work", "-n", configfiles=(tmp_path / "twice.yaml",))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "key 'warmup' is given twice, on lines" in out, out[-2000:]
    assert not (tmp_path / "work" / "data").exists()


def test_a_number_yaml_reads_as_a_string_is_named_with_its_fix():
    config = copy.deepcopy(PAPER)
    config["train"]["lr_scale"] = "1e9"
    with pytest.raises(ConfigError, match=r"train.lr_scale: '1e9' is a string .* write 1.0e9"):
        check_values(config)


@pytest.mark.parametrize(
    "decode", [{"beam": 100000}, {"beam": "dev", "grid": {"beam": [4, 40000]}}]
)
def test_a_beam_larger_than_the_vocabulary_is_refused_before_any_job(decode):
    config = copy.deepcopy(PAPER)  # vocabularies of 37000 and 32000
    config["decode"].update(decode)
    with pytest.raises(ConfigError, match=r"decode.beam: [0-9]+ is more than pairs\.en_\w+"):
        check(config)


def test_a_nested_config_value_on_the_command_line_keeps_its_type(tmp_path):
    """Snakemake reads --config 'decode={alpha: 0.6}' with YAML's BaseLoader (all strings); the
    workflow types it as Snakemake types a top-level value."""
    proc = snakemake(
        tmp_path / "work", "-n", "-p", "results/translations/en_de/base.test.avg.txt",
        "--config", "decode={alpha: 0.6, beam: 5}", "train={warmup: 100, tensorboard: false}",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "decode_choice --beam 5 --alpha 0.6" in out
    assert "--warmup 100" in out and "--no-tensorboard" in out
