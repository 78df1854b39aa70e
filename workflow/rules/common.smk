# Configuration validation, wildcard constraints and input helpers. No logic worth
# testing lives here: names and checks come from transformer_core.
# Shell safety: every placeholder of every rule's shell command is quoted ({x:q}); a params
# function that gives several arguments returns them as a list, which {x:q} quotes one by one.
import os
import sys
from typing import NamedTuple

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from transformer_core.config import EXPERIMENTS, EXPORT_QUANTIZATIONS
from transformer_core.data.registry import load_registry
from transformer_core.errors import ConfigError
from transformer_core.pipeline_config import (
    PARSING_EXPERIMENT,
    PARSING_PAIRS,
    check,
    check_size,
    defaulted_keys,
    job_threads,
    lookup,
    parsing_runs,
    rank_threads,
    run_options,
    table4_unavailable,
)
from transformer_core.workflow_plan import RunPlan

check_size(config)  # before anything walks it: a YAML alias bomb stops here
DEFAULTED = defaulted_keys(config)  # before validate() fills them in
validate(config, "../schemas/config.schema.yaml")
if DEFAULTED:
    print(
        "config: not set in the configuration, the schema's defaults are used: "
        + ", ".join(f"{key}={lookup(config, key)[1]}" for key in DEFAULTED),
        file=sys.stderr,
    )
check(config, known_datasets=tuple(load_registry().datasets))

# This run's --configfile and --config, for the hints that print a snakemake command (the
# report's "builds it", workflow/report/workflow.rst, which sees only `config`): added after
# every check, under a name the schema refuses from a configuration.
config["_run_options"] = run_options(
    workflow.overwrite_configfiles or [],
    dict(workflow.config_settings.config),  # --config alone
)
TABLE3_PAIR = config["table3"]["pair"]
TABLE4 = config.get("table4")
PARSING_RUNS = parsing_runs(
    config
)  # Table 4 setting -> data folder, e.g. wsj_only -> parse_treebank
ENV = "../envs/transformer-core.yaml"
# Run names and seeds, each run's train options, each pair's search (workflow_plan.py).
PLAN = RunPlan(config)
SEEDS = PLAN.seeds
run_name, split_run, is_parsing = PLAN.run_name, PLAN.split_run, PLAN.is_parsing


wildcard_constraints:
    pair="[a-z]+_[a-z]+",
    src="[a-z]+",
    tgt="[a-z]+",
    split="train|dev|test",
    exp=f"(?:{'|'.join(EXPERIMENTS)})(?:-seed[0-9]+)?",  # a run: experiment [+ seed], see run_name
    ckpt="avg|last",
    quantization="|".join(EXPORT_QUANTIZATIONS),  # of a CTranslate2 export (export.smk)


def run_dir_of(wildcards, input):
    """The training run's folder, from its summary file (train writes there, average reads)."""
    return os.path.dirname(input[0])


def train_run_dir(wildcards, output):
    return os.path.dirname(output.summary)


def manifest_dir(wildcards, output):
    return os.path.dirname(output.manifest)


def output_dir(wildcards, output):
    """The folder of the first output (tools that write a set of files into a folder)."""
    return os.path.dirname(output[0])


def output_prefix(suffix):
    """A params function: the first output's path without ``suffix`` (tools that take a prefix)."""

    def prefix(wildcards, output):
        return output[0][: -len(suffix)]

    return prefix


def input_prefix(name, suffix=".json"):
    """A params function: input ``name``'s path without ``suffix`` (binarized data is named by prefix)."""

    def prefix(wildcards, input):
        return input[name][: -len(suffix)]

    return prefix


def languages(pair):
    return pair.split("_")


def dataset_of(wildcards):
    return config["pairs"][f"{wildcards.src}_{wildcards.tgt}"]["dataset"]


def mirror_arg(wildcards):
    return ["--mirror", config["mirror"]] if config.get("mirror") else []


def treebank_file(pair, split, ext):
    """A parsing run's text: the semi-supervised run trains on the treebank plus its corpus,
    and every run is checked on the treebank's own dev and test sections."""
    folder = pair if split == "train" else PARSING_PAIRS["wsj_only"]
    return f"data/{folder}/treebank/{split}.{ext}"


def parallel_text(pair, split):
    """(source, target) text of a split: prepared sentences, or words and linearized trees."""
    if is_parsing(pair):
        return treebank_file(pair, split, "words"), treebank_file(pair, split, "tree")
    return f"data/{pair}/prepared/{split}.src", f"data/{pair}/prepared/{split}.tgt"


def spm_inputs(wildcards):
    """The BPE model's text: a language pair's prepared shards (see Data shards)."""
    if is_parsing(wildcards.pair):
        return list(parallel_text(wildcards.pair, "train"))
    return shard_texts(wildcards.pair)


def binarize_inputs(wildcards):
    src, tgt = parallel_text(wildcards.pair, wildcards.split)
    return {"spm": f"data/{wildcards.pair}/spm.model", "src": src, "tgt": tgt}


def translate_source(wildcards):
    return parallel_text(wildcards.pair, wildcards.split)[0]


def vocab_size(wildcards):
    if wildcards.pair == PARSING_PAIRS["semi_supervised"]:
        return TABLE4["semi_supervised_vocab_size"]
    if is_parsing(wildcards.pair):
        return TABLE4["vocab_size"]
    return config["pairs"][wildcards.pair]["vocab_size"]


def spm_options(wildcards):
    """`spm train` options beyond the vocabulary size: the parsing runs' script splitting."""
    if is_parsing(wildcards.pair) and not TABLE4["split_by_unicode_script"]:
        return ["--no-split-by-unicode-script"]
    return []


def spm_sample_size(wildcards):
    settings = {} if is_parsing(wildcards.pair) else config["pairs"][wildcards.pair]
    return settings.get("spm_sample_size", 10000000)


def decode_setting(name):
    """A params function: decoding setting ``name``, Table 4's for parsing runs."""

    def setting(wildcards):
        return PLAN.decode_setting(wildcards.pair, name)

    return setting


def decode_args(wildcards):
    """The search flags of translate and bleu_curve (RunPlan.search_flags)."""
    return PLAN.search_flags(wildcards.pair)


def train_args(wildcards):
    """The run's `transformer-core train` options (RunPlan.train_args)."""
    return PLAN.train_args(wildcards.pair, wildcards.exp)


def launcher(wildcards, resources):
    """torchrun over the GPUs the job holds; plain python for one device or the CPU.

    GPUs are a resource the profiles set (workflow/profiles/default: TRANSFORMER_LOCAL_GPUS,
    workflow/profiles/slurm: TRANSFORMER_SLURM_GPUS), or `--set-resources train:gpu=8`.
    """
    gpus = int(resources.get("gpu", 0))
    if gpus > 1:
        return [
            "torchrun",
            "--standalone",
            "--nproc_per_node",
            gpus,
            "-m",
            "transformer_core",
        ]
    return ["python", "-m", "transformer_core"]


def configured_threads(rule_name):
    """The rule's `threads:`, from threads.<rule_name> (auto: every core Snakemake has).
    Without --cores (`--report`, `--lint`) Snakemake runs no job and has no core count.
    """
    try:
        cores = workflow.cores
    except WorkflowError:
        cores = None
    return job_threads(config["threads"][rule_name], cores)


def threads_per_rank(wildcards, threads, resources):
    """`--num-threads` of each process of a training job: its threads over its GPUs."""
    return rank_threads(threads, int(resources.get("gpu", 0)))


def average_last(wildcards):
    return PLAN.checkpointing(wildcards.pair, split_run(wildcards.exp)[0])[
        "average_last"
    ]


def checkpoint_of(wildcards):
    name = "averaged.pt" if wildcards.ckpt == "avg" else "last.pt"
    return f"runs/{wildcards.pair}/{wildcards.exp}/{name}"


def reference_of(wildcards):
    _, tgt = languages(wildcards.pair)
    return f"data/{wildcards.pair}/raw/{wildcards.split}.{tgt}"


def target_lang(wildcards):
    return languages(wildcards.pair)[1]


class Option(NamedTuple):
    """One option of a command line: ``flag``, its ``values``, then the paths of its ``files``
    (input name -> path). A table's options, built in one loop over the configuration,
    give both its rule's inputs (``inputs_of``) and its arguments (``args_of``)."""

    flag: str
    values: tuple
    files: dict

    def args(self, input):
        return [self.flag, *self.values, *(input[name] for name in self.files)]


def inputs_of(options):
    """An input function (for unpack): the files of the options ``options()`` gives."""

    def inputs(wildcards):
        return {name: path for o in options() for name, path in o.files.items()}

    return inputs


def args_of(options):
    """A params function: the options ``options()`` gives, their files taken from the inputs."""

    def args(wildcards, input):
        return [arg for option in options() for arg in option.args(input)]

    return args


def table2_runs():
    """(pair, model) of every Table 2 cell, in the table's order."""
    return [
        (pair, model)
        for model in config["table2"]["models"]
        for pair in config["table2"]["pairs"]
    ]


def table2_exports():
    """The float32 CTranslate2 export of every Table 2 model, once per seed (exact:
    tests/test_export.py)."""
    return [
        f"exports/{pair}/{run_name(model, seed)}/ctranslate2-float32"
        for pair, model in table2_runs()
        for seed in SEEDS
    ]


def table2_options():
    """Each Table 2 cell's averaged test score and training summary, once per seed."""
    return [
        Option(
            "--result",
            (model, pair, seed),
            {
                f"score_{run}_{pair}": f"results/scores/{pair}/{run}.test.avg.json",
                f"summary_{run}_{pair}": f"runs/{pair}/{run}/summary.json",
            },
        )
        for pair, model in table2_runs()
        for seed in SEEDS
        for run in [run_name(model, seed)]
    ] + [dataset_option(pair) for pair in config["table2"]["pairs"]]


def dataset_option(pair):
    """`--dataset PAIR DATASET` of the table commands: the notes name its sets."""
    return Option("--dataset", (pair, config["pairs"][pair]["dataset"]), {})


def table3_row_runs(exp):
    """(seed, dev score, training summary) of each seed's run of a Table 3 row: rows are
    scored on the dev set of the Table 3 pair, without averaging."""
    return [
        (
            seed,
            f"results/scores/{TABLE3_PAIR}/{run}.dev.last.json",
            f"runs/{TABLE3_PAIR}/{run}/summary.json",
        )
        for seed in SEEDS
        for run in [run_name(exp, seed)]
    ]


def table3_row_inputs(wildcards):
    return {
        f"{kind}_{seed}": path
        for seed, score, summary in table3_row_runs(wildcards.exp)
        for kind, path in (("score", score), ("summary", summary))
    }


def table3_row_args(wildcards, input):
    """`table3_row --run SEED SCORE SUMMARY` of each seed."""
    return [
        arg
        for seed, _, _ in table3_row_runs(wildcards.exp)
        for arg in ("--run", seed, input[f"score_{seed}"], input[f"summary_{seed}"])
    ]


def table3_options():
    """Table 3's row files, and each row's dev translations per seed with the reference
    (the paired test against base)."""
    tgt = languages(TABLE3_PAIR)[1]
    rows = config["table3"]["rows"]
    options = [
        Option(
            "--rows",
            (),
            {f"row_{row}": f"results/table3/rows/{row}.csv" for row in rows},
        )
    ]
    options += [
        Option(
            "--hyp",
            (row, seed),
            {f"hyp_{run}": f"results/translations/{TABLE3_PAIR}/{run}.dev.last.txt"},
        )
        for row in rows
        for seed in SEEDS
        for run in [run_name(row, seed)]
    ]
    return options + [
        Option("--ref", (), {"ref": f"data/{TABLE3_PAIR}/raw/dev.{tgt}"}),
        dataset_option(TABLE3_PAIR),
    ]


def trained_runs():
    """(pair, experiment) of every training run, Table 2's, Table 3's, then Table 4's."""
    runs = table2_runs()
    runs += [(TABLE3_PAIR, row) for row in config["table3"]["rows"]]
    runs += [(pair, PARSING_EXPERIMENT) for pair in PARSING_RUNS.values()]
    return list(dict.fromkeys(runs))


def require_table4():
    """Stop, naming the key to set, when Table 4's data is asked for but not configured."""
    reason = table4_unavailable(config)
    if reason:
        raise ConfigError(reason)


def treebank_action(wildcards):
    """`transformer-core treebank` action and options of the configured treebank."""
    kind = TABLE4["treebank"]
    if kind == "wsj":
        return ["wsj", "--dir", TABLE4["treebank_dir"], *linearization(wildcards)]
    if kind == "nltk":
        return [
            "nltk",
            "--zip",
            TABLE4["treebank_zip"],
            "--test-files",
            TABLE4["held_out_files"],
            *linearization(wildcards),
        ]
    sizes = TABLE4["smoke"]
    return ["smoke", "--train", sizes["train"], "--dev", sizes["dev"], "--test", sizes["test"],
            "--seed", sizes["seed"], *linearization(wildcards)]  # fmt: skip


def linearization(wildcards):
    """`--linearization` of the `treebank` actions: the leaf tokens of the trees."""
    return ["--linearization", TABLE4["linearization"]]


def treebank_source(wildcards):
    """The NLTK archive is a file Snakemake can watch; the WSJ folder is checked by pipeline_config."""
    require_table4()
    return [TABLE4["treebank_zip"]] if TABLE4["treebank"] == "nltk" else []


def semi_supervised_file(ext):
    """An input function: ``train.ext`` of the parsed corpus in table4.semi_supervised_dir."""

    def path(wildcards):
        return os.path.join(TABLE4["semi_supervised_dir"], f"train.{ext}")

    return path


def input_dir(name):
    """A params function: the folder of input ``name`` (tools that read a set of files from a folder)."""

    def folder(wildcards, input):
        return os.path.dirname(input[name])

    return folder


def treebank_input(ext):
    """An input function: the treebank's file ``{split}.ext`` (words, tags, gold) of a parsing run."""

    def path(wildcards):
        return treebank_file(wildcards.pair, wildcards.split, ext)

    return path


def table4_options():
    """Each Table 4 setting's averaged test EVALB scores and training summary, once per seed;
    the treebank."""
    require_table4()
    results = [
        Option(
            "--result",
            (setting, seed),
            {
                f"evalb_{setting}_{seed}": f"results/evalb/{pair}/{run}.test.avg.json",
                f"summary_{setting}_{seed}": f"runs/{pair}/{run}/summary.json",
            },
        )
        for setting, pair in PARSING_RUNS.items()
        for seed in SEEDS
        for run in [run_name(PARSING_EXPERIMENT, seed)]
    ]
    search = PLAN.search_flags(
        PARSING_PAIRS["wsj_only"]
    )  # how the rows decoded: the note
    return [
        *results,
        Option("--treebank", (TABLE4["treebank"],), {}),
        *(Option(flag, (value,), {}) for flag, value in zip(search[::2], search[1::2])),
    ]


def tables():
    """The tables the configuration builds: table2, table3 and, when it can be built, table4."""
    return ["table2", "table3"] + (["table4"] if PARSING_RUNS else [])


def report_options():
    """The tables, every training run's metrics (learning curves), the Table 3 deltas chart,
    the attention figures, and for each Table 2 pair the first model's test score and a
    sample of its translations."""
    model = config["table2"]["models"][0]
    options = [
        Option(
            "--table",
            (f"Table {name.removeprefix('table')}",),
            {name: f"results/{name}.md"},
        )
        for name in tables()
    ]
    options.append(
        Option("--figure", ("Table 3: change against base",), {"deltas": DELTAS_PLOT})
    )
    options += [
        Option("--figure", (figure.title,), {f"figure_{figure.name}": path})
        for figure, path in attention_figures().items()
    ]
    options += [
        Option(
            "--curve",
            (f"{pair}/{exp}",),
            {f"curve_{pair}_{exp}": f"results/curves/{pair}/{exp}.dev.json"},
        )
        for pair, exp in table2_runs()
    ]
    options += [
        Option(
            "--run",
            (f"{pair}/{exp}",),
            {f"metrics_{pair}_{exp}": f"runs/{pair}/{exp}/metrics.jsonl"},
        )
        for pair, exp in trained_runs()
    ]
    for pair in config["table2"]["pairs"]:
        src, tgt = languages(pair)
        score = f"results/scores/{pair}/{model}.test.avg.json"
        options += [
            Option("--score", (pair,), {f"score_{pair}": score}),
            Option(
                "--sample",
                (f"{pair} {model}, newstest2014",),
                {
                    f"src_{pair}": f"data/{pair}/raw/test.{src}",
                    f"ref_{pair}": f"data/{pair}/raw/test.{tgt}",
                    f"hyp_{pair}": f"results/translations/{pair}/{model}.test.avg.txt",
                },
            ),
        ]
    return options


def all_targets():
    return [f"results/{name}.csv" for name in tables()] + ["results/report.md"]


# --- Bootstrap intervals, attention figures, the report ---------------------------------
from transformer_core.paper import ATTENTION_FIGURES

DELTAS_PLOT = "results/plots/table3_deltas.png"


def bootstrap_args(wildcards):
    """sacreBLEU's bootstrap settings (config `bootstrap`) as command options."""
    settings = config["bootstrap"]
    return [
        "--bootstrap-resamples", settings["resamples"], "--bootstrap-seed", settings["seed"]
    ]  # fmt: skip


def attention_figures():
    """The paper's Figures 3-5 (transformer_core.paper.ATTENTION_FIGURES) -> their PNG paths."""
    return {
        figure: f"results/figures/attention_{figure.name}.png"
        for figure in ATTENTION_FIGURES
    }


def figure_args(wildcards, output):
    return [
        arg
        for f, path in zip(ATTENTION_FIGURES, output)
        for arg in ("--figure", f.name, path)
    ]


def reported(path, caption, category):
    """``path`` marked for `snakemake --report` when it exists as the workflow is read.

    `snakemake --report` stops at the first marked file that is missing, so after a partial
    run (the README quickstart builds Tables 2 and 3 only) a file not built yet is left
    unmarked: the report holds what exists, and its description (workflow/report/workflow.rst)
    names what was not built.
    """
    if os.path.exists(path):
        return report(path, caption=caption, category=category)
    return path


# --- Data shards ---------------------------------------------------------------------------
# A language pair's training corpus runs as pairs.<pair>.shards shards (default: by corpus
# size, transformer_core.data.shards.default_count), named 0003-of-0008 (data.smk). N is
# per pair, so these input functions expand the shard names (Snakemake's scattergather
# has one count per workflow).
from transformer_core.data.binarized import split_files
from transformer_core.data.shards import (
    default_count,
    expected_pairs,
    name as shard_name,
)
from transformer_core.data.shards import parse_name as parse_shard_name

CONFIGURED_PAIRS = "|".join(config["pairs"])
# A binarized split's files, its header first (output_prefix strips it).
BINARIZED_SUFFIXES = (".json",) + tuple(
    str(path) for key, path in split_files("").items() if key != "json"
)


wildcard_constraints:
    shard="[0-9]{4}-of-[0-9]{4}",


def pair_shards(pair):
    """pairs.<pair>.shards, else the default for the dataset's size in the registry."""
    settings = config["pairs"][pair]
    if "shards" in settings:
        return settings["shards"]
    return default_count(expected_pairs(load_registry().dataset(settings["dataset"])))


def shard_count(wildcards):
    return pair_shards(f"{wildcards.src}_{wildcards.tgt}")


def shard_names(pair):
    count = pair_shards(pair)
    return [shard_name(i, count) for i in range(count)]


def shard_args(wildcards):
    """`prepare --shard I --shards N` of the job's shard."""
    index, count = parse_shard_name(wildcards.shard)
    return ["--shard", index, "--shards", count]


def shard_reports(wildcards):
    pair = f"{wildcards.src}_{wildcards.tgt}"
    return [f"data/{pair}/shards/prepared/{s}.report.json" for s in shard_names(pair)]


def shard_texts(pair):
    """Every shard's source text, then every shard's target text: in this order sentencepiece's
    sample is the one it draws from the whole corpus, whatever the number of shards."""
    names = shard_names(pair)
    return [
        f"data/{pair}/shards/prepared/{s}.{side}"
        for side in ("src", "tgt")
        for s in names
    ]


def merge_inputs(wildcards):
    """Every file of every shard's binarized split (the arrays too, or Snakemake would
    delete them, temp, as soon as they were written) and the merged prepare report, whose
    pairs the merge checks against them (and which thus belongs to every run)."""
    pair = wildcards.pair
    files = {
        f"{s}{suffix}": f"data/{pair}/shards/bin/{s}{suffix}"
        for s in shard_names(pair)
        for suffix in BINARIZED_SUFFIXES
    }
    return {**files, "report": f"data/{pair}/prepared/train.report.json"}


def shard_split_prefixes(wildcards, input):
    """The shards' split prefixes, from their headers among the inputs."""
    return [
        p[: -len(".json")] for p in input if p.endswith(".json") and p != input.report
    ]
