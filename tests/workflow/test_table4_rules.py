"""Table 4 in the workflow: configuration checks naming the key, and the parsing jobs of a dry run."""

import copy
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, snakemake_on

from transformer_core.errors import ConfigError
from transformer_core.workflow_plan.config_checks import check
from transformer_core.workflow_plan.config_facts import (
    experiments,
    parsing_runs,
    table4_unavailable,
)

PAPER = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SMOKE = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
PARSING_JOBS = {
    "treebank": 1,
    "spm_train": 1,
    "binarize": 2,
    "train": 1,
    "average": 1,
    "translate": 1,
    "decode_choice": 1,  # the parsing search's numbers, recorded
    "delinearize": 1,
    "evalb": 1,
    "table4": 1,
}


def fake_wsj(root: Path) -> Path:
    for section in range(2, 24):
        folder = root / "wsj" / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text(
            "( (S (NP-SBJ (NNP Ann)) (VP (VBD ran)) (. .)) )\n"
        )
    return root


def semi_corpus(root: Path) -> Path:
    root.mkdir()
    (root / "train.words").write_text("she left\n")
    (root / "train.tree").write_text("(S (NP XX )NP (VP XX )VP )S\n")
    return root


def with_table4(config, **table4):
    config = copy.deepcopy(config)
    config["table4"] = {**config["table4"], **table4}
    return config


def test_paper_config_keeps_table4_as_a_placeholder():
    check(PAPER)
    assert "table4.treebank_dir" in table4_unavailable(PAPER)
    assert parsing_runs(PAPER) == {} and "parsing" not in experiments(PAPER)
    without = {key: value for key, value in PAPER.items() if key != "table4"}
    check(without)
    assert "needs a table4 section" in table4_unavailable(without)


def test_runs_follow_the_configured_inputs(tmp_path):
    wsj = with_table4(PAPER, treebank_dir=str(fake_wsj(tmp_path / "ptb")))
    check(wsj)
    assert table4_unavailable(wsj) is None and experiments(wsj)[-1] == "parsing"
    assert parsing_runs(wsj) == {"wsj_only": "parse_treebank"}
    semi = with_table4(wsj, semi_supervised_dir=str(semi_corpus(tmp_path / "semi")))
    check(semi)
    assert parsing_runs(semi) == {"wsj_only": "parse_treebank", "semi_supervised": "parse_semi"}
    assert parsing_runs(SMOKE) == {"wsj_only": "parse_treebank"}


def _not_a_zip(tmp_path):
    path = tmp_path / "treebank.zip"
    path.write_text("not a zip")
    return {"treebank": "nltk", "treebank_zip": str(path)}


@pytest.mark.parametrize(
    ("table4", "key", "message"),
    [
        (
            lambda p: {"treebank_dir": str(p / "nowhere")},
            "table4.treebank_dir",
            "no such directory",
        ),
        (lambda p: {"treebank_dir": str(p)}, "table4.treebank_dir", "no WSJ section folders"),
        (lambda p: {"treebank": "nltk"}, "table4.treebank_zip", "is not a file"),
        (_not_a_zip, "table4.treebank_zip", "not a zip file"),
        (
            lambda p: {"treebank": "smoke", "semi_supervised_dir": str(p)},
            "table4.semi_supervised_dir",
            "lacks train.words and train.tree",
        ),
    ],
)
def test_missing_inputs_are_config_errors_naming_the_key(tmp_path, table4, key, message):
    with pytest.raises(ConfigError, match=rf"^{key}: .*{message}"):
        check(with_table4(PAPER, **table4(tmp_path)))


def test_nltk_zip_and_reserved_pair_names(tmp_path):
    archive = tmp_path / "treebank.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(1, 6):
            zf.writestr(f"treebank/combined/wsj_000{i}.mrg", "( (S (NN a)) )")
    check(with_table4(PAPER, treebank="nltk", treebank_zip=str(archive), held_out_files=2))
    config = with_table4(SMOKE)
    config["pairs"]["parse_treebank"] = config["pairs"]["en_de"]
    with pytest.raises(ConfigError, match="pairs.parse_treebank: the name is Table 4's"):
        check(config)


def job_counts(output):
    """The 'Job stats' table of a dry run, without its total."""
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0].splitlines()[3:]
    return {name: int(count) for name, count in (line.split() for line in table) if name != "total"}


def test_smoke_dry_run_lists_the_parsing_jobs(tmp_path):
    proc = snakemake_on(tmp_path, SMOKE, "-n", "-p", "results/table4.csv")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert job_counts(proc.stdout) == PARSING_JOBS
    out = proc.stdout
    assert (
        "transformer-core treebank smoke --train 3000 --dev 250 --test 250 --seed 0"
        " --linearization xx" in out
    )
    assert "--no-split-by-unicode-script" not in out  # sentencepiece's default
    assert "--tree-constraint" not in out  # the paper's unconstrained search
    assert (
        "--input data/parse_treebank/treebank/train.words data/parse_treebank/treebank/train.tree"
        in out
    )
    assert (
        "--experiment parsing --set encoder_layers=2 --set decoder_layers=2 --set d_model=128"
        in out
    )
    assert "--input data/parse_treebank/treebank/test.words" in out
    assert "--beam 21 --alpha 0.3 --max-len-a 1.0 --max-len-b 300" in out
    assert "--tags data/parse_treebank/treebank/test.tags" in out
    assert "--result wsj_only 1 results/evalb/parse_treebank/parsing.test.avg.json" in out
    default = snakemake_on(tmp_path, SMOKE, "-n")
    assert default.returncode == 0 and job_counts(default.stdout)["table4"] == 1
    assert not (tmp_path / "work" / "data").exists()


def test_paper_dry_run_with_a_treebank_and_a_corpus(tmp_path):
    config = with_table4(
        PAPER,
        treebank_dir=str(fake_wsj(tmp_path / "ptb")),
        semi_supervised_dir=str(semi_corpus(tmp_path / "semi")),
    )
    proc = snakemake_on(tmp_path, config, "-n", "-p", "results/table4.csv")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    assert counts == {
        **PARSING_JOBS,
        "treebank_merge": 1,
        "spm_train": 2,
        "binarize": 4,
        "train": 2,
        "average": 2,
        "translate": 2,
        "decode_choice": 2,
        "delinearize": 2,
        "evalb": 2,
    }
    out = proc.stdout
    assert "--vocab-size 16000" in out and "--vocab-size 32000" in out
    assert (
        "--experiment parsing --set encoder_layers=4 --set decoder_layers=4 --set d_model=1024"
        in out
    )
    assert "--steps 100000" in out and "--max-len-b 300" in out
    # the semi-supervised run is tuned and tested on the treebank's own sections
    assert "--src data/parse_treebank/treebank/dev.words" in out
    assert out.count("--input data/parse_treebank/treebank/test.words") == 2
    assert "--result semi_supervised 1 results/evalb/parse_semi/parsing.test.avg.json" in out
    assert "transformer-core treebank merge" in out and "--linearization xx" in out


def test_seeds_and_linearization_reach_the_parsing_jobs(tmp_path):
    config = with_table4(
        {**SMOKE, "seeds": [1, 2]},
        linearization="tags",
        split_by_unicode_script=False,
        decode={**SMOKE["table4"]["decode"], "tree_constraint": True},
    )
    proc = snakemake_on(tmp_path, config, "-n", "-p", "results/table4.csv")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    for rule in ("train", "average", "translate", "delinearize", "evalb"):
        assert counts[rule] == 2, rule
    out = proc.stdout
    assert out.count("--linearization tags") == 3  # treebank, and delinearize per seed
    assert out.count("--no-split-by-unicode-script") == 1  # the parsing vocabulary
    assert out.count("--tree-constraint tags") == 3  # each seed's test decode, the table's note
    assert "--result wsj_only 1 results/evalb/parse_treebank/parsing.test.avg.json" in out
    assert "--result wsj_only 2 results/evalb/parse_treebank/parsing-seed2.test.avg.json" in out


def test_paper_placeholder_skips_table4_and_names_the_key_when_asked(tmp_path):
    default = snakemake_on(tmp_path, PAPER, "-n")
    assert default.returncode == 0, default.stderr
    assert "table4" not in job_counts(default.stdout) and "treebank" not in job_counts(
        default.stdout
    )
    asked = snakemake_on(tmp_path, PAPER, "-n", "results/table4.csv")
    assert (
        asked.returncode != 0
        and "table4.treebank_dir: give the folder" in asked.stdout + asked.stderr
    )
    wrong = snakemake_on(tmp_path, with_table4(PAPER, treebank_dir=str(tmp_path / "nowhere")), "-n")
    assert wrong.returncode != 0 and "table4.treebank_dir:" in wrong.stdout + wrong.stderr
    assert not (tmp_path / "work" / "data").exists()


def test_lint_is_clean(tmp_path):
    proc = snakemake_on(tmp_path, SMOKE, "--lint")
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )


def train_line(output, run_dir):
    """The `train` shell command of one run in a dry run's -p output."""
    (line,) = [
        line
        for line in output.splitlines()
        if " train --train " in line and f"--out-dir {run_dir} " in line
    ]
    return line


def recipe_flags(line):
    """The recipe flags of a `train` command line (``--flag value``, any order) as a dict."""
    words = line.split(" > ")[0].split()
    return {
        word: words[i + 1]
        for i, word in enumerate(words)
        if word.startswith("--") and i + 1 < len(words)
    }


def test_table4_train_settings_apply_to_the_parsing_runs_only(tmp_path):
    """table4.train replaces the recipe of the parsing runs; translation runs keep `train`."""
    own = SMOKE["table4"]["train"]
    proc = snakemake_on(
        tmp_path,
        SMOKE,
        "-n",
        "-p",
        "runs/parse_treebank/parsing/averaged.pt",
        "runs/en_de/base/averaged.pt",
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    parsing = train_line(proc.stdout, "runs/parse_treebank/parsing")
    expected = {
        "--steps": SMOKE["table4"]["steps"], "--tokens-per-step": own["tokens_per_step"],
        "--max-tokens": own["max_tokens"], "--warmup": own["warmup"],
        "--lr-scale": own["lr_scale"], "--checkpoint-interval": own["checkpoint_interval"],
        "--keep-last": own["average_last"],
    }  # fmt: skip
    flags = recipe_flags(parsing)
    assert {flag: flags[flag] for flag in expected} == {k: str(v) for k, v in expected.items()}
    assert f"--run-dir runs/parse_treebank/parsing --last {own['average_last']}" in proc.stdout
    train, base = SMOKE["train"], SMOKE["models"]["base"]
    flags = recipe_flags(train_line(proc.stdout, "runs/en_de/base"))
    for key in ("tokens_per_step", "max_tokens", "warmup", "lr_scale"):
        assert flags["--" + key.replace("_", "-")] == str(train[key]), key
    assert f"--run-dir runs/en_de/base --last {base['average_last']}" in proc.stdout
    assert "label_smoothing" not in parsing + train_line(proc.stdout, "runs/en_de/base")

    # dropout and label_smoothing are model settings of the parsing runs alone.
    config = with_table4(SMOKE, train={**own, "dropout": 0.2, "label_smoothing": 0.0})
    proc = snakemake_on(
        tmp_path, config, "-n", "-p", "runs/parse_treebank/parsing/averaged.pt",
        "runs/en_de/base/averaged.pt",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    parsing = train_line(proc.stdout, "runs/parse_treebank/parsing")
    assert "--set dropout=0.2 --set label_smoothing=0.0" in parsing
    assert "dropout=" not in train_line(proc.stdout, "runs/en_de/base")

    # Without table4.train the parsing run takes `train` and models.base.
    config = copy.deepcopy(SMOKE)
    del config["table4"]["train"]
    proc = snakemake_on(tmp_path, config, "-n", "-p", "runs/parse_treebank/parsing/averaged.pt")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    flags = recipe_flags(train_line(proc.stdout, "runs/parse_treebank/parsing"))
    assert flags["--tokens-per-step"] == str(train["tokens_per_step"])
    assert flags["--checkpoint-interval"] == str(base["checkpoint_interval"])


def test_table4_train_rejects_unknown_keys(tmp_path):
    config = with_table4(SMOKE, train={"learning_rate": 0.1})
    proc = snakemake_on(tmp_path, config, "-n", "results/table4.csv")
    assert proc.returncode != 0
    assert "learning_rate" in proc.stderr + proc.stdout


def test_compile_settings_reach_the_jobs_even_as_yaml_booleans(tmp_path):
    """``compile: on`` unquoted is a YAML boolean; it still means on (and false off)."""
    config = copy.deepcopy(SMOKE)
    config["train"]["compile"] = True
    config["decode"]["compile"] = False
    proc = snakemake_on(tmp_path, config, "-n", "-p", "results/table2.csv")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    commands = [line for line in proc.stdout.splitlines() if "transformer_core train" in line]
    assert len(commands) == counts["train"] and all("--compile on" in c for c in commands)
    assert proc.stdout.count("--compile off") == counts["translate"] + counts.get("bleu_curve", 0)
    # Numbers stay numbers (1.0 == True in Python): the smoke decode's max_len_a is 1.0.
    assert config["decode"]["max_len_a"] == 1 and "--max-len-a 1.0 " in proc.stdout
    assert "--max-len-a on" not in proc.stdout
