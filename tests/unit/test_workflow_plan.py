"""transformer_core.workflow_plan: what the workflow's rules run for a configuration (run
names and seeds, train options, search, data files and shards, the tables' and report's
inputs and arguments), called as the rules call it, with the wildcards' values."""

import copy
import re

import pytest
import yaml
from conftest import ROOT, SMOKE
from snakemake.utils import validate

from transformer_core.decoding.dev_choice import grid_points
from transformer_core.errors import ConfigError
from transformer_core.model.config import EXPERIMENTS
from transformer_core.paper import ATTENTION_FIGURES
from transformer_core.workflow_plan import DataPlan, RunPlan, TablePlan
from transformer_core.workflow_plan.config_checks import check
from transformer_core.workflow_plan.data import (
    BINARIZED_SUFFIXES,
    shard_args,
    split_prefixes,
)
from transformer_core.workflow_plan.runs import (
    POINT_PATTERN,
    RUN_NAME_PATTERN,
    checkpoint_path,
    launcher,
    point_suffix,
)
from transformer_core.workflow_plan.tables import figure_args, option_args, option_inputs

SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")


PAPER = ROOT / "config" / "config.yaml"


def configuration(path=SMOKE, **changes):
    """A shipped configuration with the schema's defaults filled in, as the workflow sees it."""
    config = yaml.safe_load(path.read_text())
    config.update(copy.deepcopy(changes))
    validate(config, SCHEMA)
    return config


def test_seeds_name_the_runs():
    plan = RunPlan(configuration(seeds=[3, 1, 2]))
    assert plan.seeds == [1, 3, 2]  # train.seed first
    assert plan.run_name("base", 1) == "base" and plan.run_name("C3", 2) == "C3-seed2"
    assert plan.split_run("C3-seed2") == ("C3", 2) and plan.split_run("base") == ("base", 1)
    with pytest.raises(ConfigError, match=r"seeds: \[2\] lacks train.seed \(1\)"):
        RunPlan(configuration(seeds=[2]))


def test_run_names_match_the_exp_wildcard_and_near_misses_do_not():
    plan = RunPlan(configuration(seeds=[1, 2, 10]))
    for name in [plan.run_name(exp, seed) for exp in EXPERIMENTS for seed in plan.seeds]:
        assert re.fullmatch(RUN_NAME_PATTERN, name), name
    for near_miss in ("basic", "base-seed", "base-seedX", "base_seed2", "C3-seed2.avg", "Z9", ""):
        assert not re.fullmatch(RUN_NAME_PATTERN, near_miss), near_miss


def test_point_suffixes_match_the_point_wildcard_and_near_misses_do_not():
    grid = {"beam": [1, 4, 21, 100], "alpha": [0.0, -0.0, 0.3, 0.6, 1, 10.0, 1e-05, 2.5e-7]}
    suffixes = [point_suffix(point) for point in grid_points("dev", "dev", grid)]
    for suffix in suffixes + [""]:  # empty: a decode that reads its settings file
        assert re.fullmatch(POINT_PATTERN, suffix), suffix
    for near_miss in (
        "beam4-alpha0.6",  # without its dot
        ".beam4-alpha",
        ".beam-alpha0.6",
        ".beam4_alpha0.6",
        ".beam4-alpha-0.6",
        ".beam4-alpha0.6.txt",
    ):
        assert not re.fullmatch(POINT_PATTERN, near_miss), near_miss


def test_parsing_runs_take_table4_train_and_translation_runs_train():
    config = configuration()
    config["table4"]["train"].update(dropout=0.2, label_smoothing=0.0, d_model=192, d_k=24)
    plan = RunPlan(config)
    own, train = config["table4"]["train"], config["train"]
    switches = ("--tensorboard", "--no-tensorboard")  # flags without a value
    parsing = plan.train_args("parse_treebank", "parsing-seed2")
    translation = plan.train_args("en_de", "base")
    assert "--tensorboard" in parsing and "--tensorboard" in translation  # the schema's default
    parsing, translation = (
        [a for a in args if a not in switches] for args in (parsing, translation)
    )
    assert parsing[:2] == ["--experiment", "parsing"] and "dropout=0.2" in parsing
    assert "label_smoothing=0.0" in parsing and "dropout=0.2" not in translation
    assert {"d_model=192", "d_k=24"} <= set(parsing) and "d_model=192" not in translation
    for args, recipe, steps in (
        (parsing, own, config["table4"]["steps"]),
        (translation, train, plan.steps("en_de", "base")),
    ):
        flags = dict(zip(args[::2], args[1::2], strict=True))
        assert flags["--tokens-per-step"] == str(recipe["tokens_per_step"])
        assert flags["--warmup"] == str(recipe["warmup"]) and flags["--steps"] == str(steps)
    flags = dict(zip(parsing[::2], parsing[1::2], strict=True))
    assert flags["--seed"] == "2" and flags["--keep-last"] == str(own["average_last"])
    assert plan.checkpointing("parse_treebank", "parsing")["average_last"] == own["average_last"]
    base = config["models"]["base"]
    assert plan.checkpointing("en_de", "base")["average_last"] == base["average_last"]


def test_a_cooldown_reaches_the_runs_it_is_given_to_and_fits_their_steps():
    config = configuration()
    config["table4"]["train"]["cooldown"] = 7
    plan = RunPlan(config)
    parsing = plan.train_args("parse_treebank", "parsing")
    assert parsing[parsing.index("--cooldown") + 1] == "7"
    assert "--cooldown" not in plan.train_args("en_de", "base")  # left out: none, the paper
    config["table4"]["train"]["cooldown"] = config["table4"]["steps"] + 1
    with pytest.raises(
        ConfigError, match=r"^table4.train.cooldown: .* of run parse_treebank/parsing$"
    ):
        RunPlan(config)
    del config["table4"]["train"]["cooldown"]
    config["train"]["cooldown"] = 10**9
    with pytest.raises(
        ConfigError,
        match=r"^train.cooldown: 1000000000 steps, more than the \d+ of run (en_de|parse_treebank)/",
    ):
        RunPlan(config)


def test_search_flags_follow_the_pairs_decode_section():
    config = configuration()
    plan = RunPlan(config)
    config["decode"]["alpha"] = 0.6
    # smoke.yaml's, alpha fixed; a search field declared after these adds its flag after them
    search = "--beam 4 --alpha 0.6 --max-len-a 1.0 --max-len-b 10".split()
    assert plan.search_flags("en_de")[: len(search)] == search
    chosen = plan.search_flags("en_de", chosen=False)  # beam and alpha from a settings file
    assert chosen[:4] == search[4:] and "--beam" not in chosen and "--alpha" not in chosen
    assert plan.search_flags("parse_treebank")[:4] == ["--beam", "21", "--alpha", "0.3"]
    assert "--tree-constraint" not in plan.search_flags("parse_treebank")
    config["table4"]["decode"]["tree_constraint"] = True
    config["table4"]["linearization"] = "words"
    flags = plan.search_flags("parse_treebank")
    assert flags[flags.index("--tree-constraint") + 1] == "words"
    searched = plan.search_flags("parse_treebank", chosen=False)
    runtime = plan.decode_args("parse_treebank")[len(searched) :]
    assert runtime == ["--precision", "fp32", "--compile", "auto", "--max-tokens", "4096"]
    config["decode"]["compile"] = True  # YAML's unquoted `on`
    assert plan.decode_args("en_de")[-4:-2] == ["--compile", "on"]
    config["decode"]["compile"] = False
    assert plan.decode_args("en_de")[-4:-2] == ["--compile", "off"]


def test_runs_launch_and_average_as_configured():
    plan = RunPlan(configuration(seeds=[1, 2]))
    assert launcher(0) == launcher(1) == ["python", "-m", "transformer_core"]
    assert launcher(8)[:4] == ["torchrun", "--standalone", "--nproc_per_node", 8]
    across = launcher(8, nodes=2, threads=16)  # one srun task per node, a torchrun agent each
    assert across[: across.index("torchrun")] == [
        "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=16",
        "--gpus-per-node=8", "--kill-on-bad-exit=1",
    ]  # fmt: skip
    assert across[across.index("torchrun") :] == [
        "torchrun", "--nnodes", 2, "--nproc-per-node", 8, "--rdzv-backend", "c10d",
        "-m", "transformer_core",
    ]  # fmt: skip
    assert "--gpus-per-node=0" not in launcher(0, nodes=2) and "--nproc-per-node" in launcher(0, 2)
    assert checkpoint_path("en_de", "C3-seed2", "avg") == "runs/en_de/C3-seed2/averaged.pt"
    assert checkpoint_path("en_de", "base", "last") == "runs/en_de/base/last.pt"
    config = plan.config
    assert plan.average_last("en_de", "big-seed2") == config["models"]["big"]["average_last"]
    own = config["table4"]["train"]["average_last"]
    assert plan.average_last("parse_treebank", "parsing-seed2") == own


def test_shards_expand_per_pair_in_sentencepieces_order():
    config = configuration()
    config["pairs"]["en_fr"]["shards"] = 3
    data = DataPlan(config)
    assert data.shard_names("en_de") == ["0000-of-0002", "0001-of-0002"]
    texts = data.shard_texts("en_fr")
    assert len(texts) == 6 and texts[2] == "data/en_fr/shards/prepared/0002-of-0003.src"
    assert texts[3] == "data/en_fr/shards/prepared/0000-of-0003.tgt"  # every source first
    assert data.spm_inputs("en_fr") == texts
    assert data.shard_reports("en_de")[1] == "data/en_de/shards/prepared/0001-of-0002.report.json"
    merge = data.merge_inputs("en_de")
    assert len(merge) == 2 * len(BINARIZED_SUFFIXES) + 1
    assert merge["report"] == "data/en_de/prepared/train.report.json"
    headers = [path for path in merge.values() if path.endswith(".json")]
    prefixes = split_prefixes(headers, merge["report"])
    assert prefixes == [f"data/en_de/shards/bin/000{i}-of-0002" for i in range(2)]
    assert shard_args("0001-of-0002") == ["--shard", 1, "--shards", 2]
    del config["pairs"]["en_fr"]["shards"]  # the registry's size decides: a small corpus
    assert data.shard_count("en_fr") == 1


def test_parsing_data_comes_from_the_treebank():
    config = configuration()
    config["table4"].update(semi_supervised_dir="/corpus", semi_supervised_vocab_size=777)
    data = DataPlan(config)
    assert data.parallel_text("parse_semi", "train") == (
        "data/parse_semi/treebank/train.words",
        "data/parse_semi/treebank/train.tree",
    )  # the semi-supervised run is checked on the treebank's own dev section
    assert data.parallel_text("parse_semi", "dev")[0] == "data/parse_treebank/treebank/dev.words"
    assert data.parallel_text("en_de", "test") == (
        "data/en_de/prepared/test.src",
        "data/en_de/prepared/test.tgt",
    )
    assert data.spm_inputs("parse_treebank") == list(data.parallel_text("parse_treebank", "train"))
    sizes = {pair: data.vocab_size(pair) for pair in ("parse_semi", "parse_treebank", "en_fr")}
    assert sizes == {"parse_semi": 777, "parse_treebank": 1000, "en_fr": 300}
    assert data.spm_options("parse_treebank") == ["--split-by-unicode-script"]
    assert data.spm_options("en_de") == []
    config["table4"]["split_by_unicode_script"] = False
    assert data.spm_options("parse_treebank") == ["--no-split-by-unicode-script"]
    assert data.spm_options("en_de") == []  # spm train's own sample size
    config["pairs"]["en_de"]["spm_sample_size"] = 5000
    assert data.spm_options("en_de") == ["--sample-size", "5000"]
    assert data.semi_supervised_file("tree") == "/corpus/train.tree"
    assert data.reference("en_fr", "dev") == "data/en_fr/raw/dev.fr"
    assert data.treebank_source() == []  # generated: nothing to watch
    assert data.treebank_action() == [
        "smoke", "--train", 3000, "--dev", 250, "--test", 250, "--seed", 0,
        "--linearization", "xx",
    ]  # fmt: skip
    config["table4"].update(treebank="nltk", treebank_zip="/t.zip", held_out_files=20)
    assert data.treebank_source() == ["/t.zip"]
    assert data.treebank_action()[:5] == ["nltk", "--zip", "/t.zip", "--test-files", 20]


def test_the_paper_configuration_without_its_treebank_leaves_table4_out():
    config = configuration(PAPER)
    tables = TablePlan(config, RunPlan(config))
    assert tables.tables() == ["table2", "table3"]
    assert "results/table4.csv" not in tables.all_targets()
    assert not any(exp == "parsing" for _, exp in tables.trained_runs())
    with pytest.raises(ConfigError, match="table4.treebank_dir"):
        tables.table4()
    with pytest.raises(ConfigError, match="table4.treebank_dir"):
        DataPlan(config).treebank_source()
    assert DataPlan(config).mirror_args() == []
    config["mirror"] = "../shared/data"
    assert DataPlan(config).mirror_args() == ["--mirror", "../shared/data"]


def test_table_options_give_inputs_and_arguments_together():
    config = configuration(seeds=[1, 2])
    tables = TablePlan(config, RunPlan(config))
    options = tables.table2()
    inputs = option_inputs(options)
    assert len(inputs) == 2 * 2 * 2 * 2  # score and summary of 2 models x 2 pairs x 2 seeds
    assert inputs["score_big-seed2_en_fr"] == "results/scores/en_fr/big-seed2.test.avg.json"
    args = option_args(options, {name: f"<{name}>" for name in inputs})
    first = ["--result", "base", "en_de", 1, "<score_base_en_de>", "<summary_base_en_de>"]
    assert args[:6] == first
    assert args[-6:] == ["--dataset", "en_de", "smoke_en_de", "--dataset", "en_fr", "smoke_en_fr"]
    table3 = option_inputs(tables.table3())
    assert len(table3) == 20 + 20 * 2 + 1  # rows, each row's dev translations per seed, ref
    assert table3["ref"] == "data/en_de/raw/dev.de"
    row = tables.table3_row_inputs("C3")
    assert row == {
        "score_1": "results/scores/en_de/C3.dev.last.json",
        "summary_1": "runs/en_de/C3/summary.json",
        "score_2": "results/scores/en_de/C3-seed2.dev.last.json",
        "summary_2": "runs/en_de/C3-seed2/summary.json",
    }
    assert tables.table3_row_args("C3", row)[:4] == ["--run", 1, row["score_1"], row["summary_1"]]
    table4 = option_args(tables.table4(), option_inputs(tables.table4()))
    assert table4[:3] == ["--result", "wsj_only", 1] and "--treebank" in table4
    assert table4[table4.index("--beam") + 1] == "21"  # the note says how the rows decoded
    assert tables.table2_exports()[-1] == "exports/en_fr/big-seed2/ctranslate2-float32"
    assert tables.table2_exports("transformers")[0] == "exports/en_de/base/transformers"
    assert tables.bootstrap_args()[0] == "--bootstrap-resamples"


def test_the_report_takes_every_table_run_and_figure():
    config = configuration()
    tables = TablePlan(config, RunPlan(config))
    assert tables.all_targets() == [
        "results/table2.csv", "results/table3.csv", "results/table4.csv", "results/report.md"
    ]  # fmt: skip
    runs = tables.trained_runs()
    assert runs[:4] == [("en_de", "base"), ("en_fr", "base"), ("en_de", "big"), ("en_fr", "big")]
    assert runs[-1] == ("parse_treebank", "parsing") and len(runs) == len(set(runs))
    assert len(runs) == 4 + 18 + 1  # Table 3's base and big are Table 2's runs
    inputs = option_inputs(tables.report())
    assert {"table2", "table3", "table4", "deltas"} <= set(inputs)
    assert sum(name.startswith("metrics_") for name in inputs) == len(runs)
    assert sum(name.startswith("figure_") for name in inputs) == len(ATTENTION_FIGURES)
    assert inputs["hyp_en_fr"] == "results/translations/en_fr/base.test.avg.txt"
    paths = [f"{figure.name}.png" for figure in ATTENTION_FIGURES]
    assert figure_args(paths)[:3] == ["--figure", ATTENTION_FIGURES[0].name, paths[0]]
    with pytest.raises(ValueError):
        figure_args(paths[:-1])  # a figure without its file


def test_a_setting_of_dev_is_chosen_from_the_grid_on_each_models_dev_decodes():
    """decode.alpha: dev (smoke.yaml) decodes each Table 2 model's dev split once per grid
    point; its test decode, its curve and (table3.decoding: base) every Table 3 row of the
    same seed read the choice made for the base or big model; numbers need no sweep."""
    config = configuration(seeds=[1, 2])
    plan = RunPlan(config)
    alphas = config["decode"]["grid"]["alpha"]
    assert [(p.beam, p.alpha) for p in plan.grid_points("en_de")] == [(4, a) for a in alphas]
    assert plan.grid_points("parse_treebank") == []  # Table 4 decodes with its numbers
    assert (
        plan.decode_choice_path("en_de", "base", "avg")
        == "results/decode_choice/en_de/base.avg.json"
    )
    assert plan.decode_choice_path("en_de", "C4-seed2", "last") == (
        "results/decode_choice/en_de/base-seed2.avg.json"
    )
    assert (
        plan.decode_choice_path("en_de", "big", "last")
        == "results/decode_choice/en_de/big.avg.json"
    )
    assert plan.decode_choice_path("parse_treebank", "parsing", "avg") == (
        "results/decode_choice/parse_treebank/parsing.avg.json"
    )
    inputs = plan.decode_choice_inputs("en_de", "base-seed2", "avg")
    assert list(inputs.values()) == [
        f"results/scores/en_de/base-seed2.dev.avg.beam4-alpha{float(a)!r}.json" for a in alphas
    ]
    setting = plan.decode_choice_setting("en_de", "base-seed2", "avg")
    assert setting == ["--beam", 4, "--alpha", "dev", "--chosen-for", "en_de/base-seed2 averaged"]
    points = plan.decode_choice_points("en_de", inputs)
    assert points[:4] == ["--point", 4, float(alphas[0]), next(iter(inputs.values()))]
    # A grid point's decode names its own beam and alpha; every other reads a settings file.
    point = ".beam4-alpha1.2"
    assert plan.decode_args("en_de", point)[:4] == ["--beam", 4, "--alpha", 1.2]
    assert "--alpha" not in plan.decode_args("en_de") and "--beam" not in plan.decode_args("en_de")

    config["table3"]["decoding"] = "own"  # each row chooses on its own last checkpoint
    assert plan.decode_choice_path("en_de", "C4-seed2", "last") == (
        "results/decode_choice/en_de/C4-seed2.last.json"
    )
    config["decode"]["alpha"] = 0.6  # numbers: no sweep, nothing to decode first
    assert (
        plan.grid_points("en_de") == [] and plan.decode_choice_inputs("en_de", "C4", "last") == {}
    )
    assert plan.decode_choice_setting("en_de", "C4", "last")[:4] == ["--beam", 4, "--alpha", 0.6]
    assert plan.decode_choice_points("en_de", {}) == []
    config["decode"].update(beam="dev", alpha="dev")
    config["decode"]["grid"] = {"beam": [1, 4], "alpha": [0.6, 1.0]}
    assert [(p.beam, p.alpha) for p in plan.grid_points("en_de")] == [
        (1, 0.6), (1, 1.0), (4, 0.6), (4, 1.0)
    ]  # fmt: skip


@pytest.mark.parametrize("section", ["decode", "table4.decode"])
def test_a_search_that_would_empty_every_output_is_refused_when_the_configuration_loads(section):
    """The schema bounds each number; DecodeSettings' own rule (a one-word source gets an output
    token) runs on the configuration too, before any job, naming the section."""
    config = configuration()
    decode = config["decode"] if section == "decode" else config["table4"]["decode"]
    decode.update(max_len_a=1.0, max_len_b=-100)
    with pytest.raises(ConfigError, match=rf"^{section}: --max-len-a 1.0 --max-len-b -100: a "):
        check(config)
    decode.update(max_len_b=-1)  # 2 x 1.0 - 1: one token
    check(config)
