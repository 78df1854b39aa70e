# Configuration validation, wildcard constraints and input helpers. No logic worth
# testing lives here: names and checks come from transformer_core.
import os

from snakemake.utils import validate

from transformer_core.config import TABLE3_ROWS
from transformer_core.pipeline_config import check, experiments
from transformer_core.scaling import scaled_model_overrides, scaled_steps

validate(config, "../schemas/config.schema.yaml")
check(config)

TABLE3_PAIR = config["table3"]["pair"]
ENV = "../envs/transformer-core.yaml"


wildcard_constraints:
    pair="[a-z]+_[a-z]+",
    src="[a-z]+",
    tgt="[a-z]+",
    split="train|dev|test",
    exp="|".join(TABLE3_ROWS),
    ckpt="avg|last",


def run_dir_of(wildcards, input):
    """The training run's folder, from its summary file (train writes there, average reads)."""
    return os.path.dirname(input[0])


def train_run_dir(wildcards, output):
    return os.path.dirname(output.summary)


def manifest_dir(wildcards, output):
    return os.path.dirname(output.manifest)


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
    return f"--mirror {config['mirror']}" if config.get("mirror") else ""


def prepare_filter_arg(wildcards):
    """Only training data is filtered; dev and test keep every line, so references never shift."""
    return "" if wildcards.split == "train" else "--no-filter"


def vocab_size(wildcards):
    return config["pairs"][wildcards.pair]["vocab_size"]


def spm_sample_size(wildcards):
    return config["pairs"][wildcards.pair].get("spm_sample_size", 10000000)


def checkpointing(exp):
    return config["models"]["big" if exp == "big" else "base"]


def steps_of(exp):
    settings = checkpointing(exp)
    return settings.get("steps") or scaled_steps(
        exp, config["scale_rule"]["step_divisor"]
    )


def train_args(wildcards):
    """The scaled experiment as `transformer-core train` options."""
    scale = config["scale_rule"]
    overrides = scaled_model_overrides(
        wildcards.exp, scale["width_divisor"], scale.get("layer_divisor", 1)
    )
    settings = checkpointing(wildcards.exp)
    train = config["train"]
    sets = " ".join(f"--set {key}={value}" for key, value in overrides.items())
    return (
        f"--experiment {wildcards.exp} {sets}"
        f" --steps {steps_of(wildcards.exp)}"
        f" --tokens-per-step {train['tokens_per_step']} --max-tokens {train['max_tokens']}"
        f" --warmup {train['warmup']} --lr-scale {train.get('lr_scale', 1.0)}"
        f" --seed {train.get('seed', 1)} --log-interval {train.get('log_interval', 100)}"
        f" --checkpoint-interval {settings['checkpoint_interval']}"
        f" --keep-last {settings['average_last']}"
    )


def launcher(wildcards, resources):
    """torchrun over the GPUs the job holds; plain python for one device or the CPU.

    GPUs are a resource the profiles set (workflow/profiles/default: TRANSFORMER_LOCAL_GPUS,
    workflow/profiles/slurm: TRANSFORMER_SLURM_GPUS), or `--set-resources train:gpu=8`.
    """
    gpus = int(resources.get("gpu", 0))
    if gpus > 1:
        return f"torchrun --standalone --nproc_per_node {gpus} -m transformer_core"
    return "python -m transformer_core"


def average_last(wildcards):
    return checkpointing(wildcards.exp)["average_last"]


def checkpoint_of(wildcards):
    name = "averaged.pt" if wildcards.ckpt == "avg" else "last.pt"
    return f"runs/{wildcards.pair}/{wildcards.exp}/{name}"


def reference_of(wildcards):
    _, tgt = languages(wildcards.pair)
    return f"data/{wildcards.pair}/raw/{wildcards.split}.{tgt}"


def target_lang(wildcards):
    return languages(wildcards.pair)[1]


def table2_inputs(wildcards):
    return {
        f"{kind}_{model}_{pair}": path
        for model in config["table2"]["models"]
        for pair in config["table2"]["pairs"]
        for kind, path in (
            ("score", f"results/scores/{pair}/{model}.test.avg.json"),
            ("summary", f"runs/{pair}/{model}/summary.json"),
        )
    }


def table2_args(wildcards, input):
    return " ".join(
        f"--result {model} {pair} {input[f'score_{model}_{pair}']} {input[f'summary_{model}_{pair}']}"
        for model in config["table2"]["models"]
        for pair in config["table2"]["pairs"]
    )


def table3_rows():
    return expand("results/table3/rows/{exp}.csv", exp=config["table3"]["rows"])


def table3_row_inputs(wildcards):
    """Table 3 rows are scored on the dev set of the Table 3 pair, without averaging."""
    pair, exp = TABLE3_PAIR, wildcards.exp
    return {
        "score": f"results/scores/{pair}/{exp}.dev.last.json",
        "summary": f"runs/{pair}/{exp}/summary.json",
    }


def trained_runs():
    """(pair, experiment) of every training run, Table 2's then Table 3's."""
    runs = [
        (pair, model)
        for model in config["table2"]["models"]
        for pair in config["table2"]["pairs"]
    ]
    runs += [(TABLE3_PAIR, row) for row in config["table3"]["rows"]]
    return list(dict.fromkeys(runs))


def report_inputs(wildcards):
    inputs = {"table2": "results/table2.md", "table3": "results/table3.md"}
    for pair, exp in trained_runs():
        inputs[f"metrics_{pair}_{exp}"] = f"runs/{pair}/{exp}/metrics.jsonl"
    for pair in config["table2"]["pairs"]:
        model = config["table2"]["models"][0]
        src, tgt = languages(pair)
        inputs[f"score_{pair}"] = f"results/scores/{pair}/{model}.test.avg.json"
        inputs[f"hyp_{pair}"] = f"results/translations/{pair}/{model}.test.avg.txt"
        inputs[f"src_{pair}"] = f"data/{pair}/raw/test.{src}"
        inputs[f"ref_{pair}"] = f"data/{pair}/raw/test.{tgt}"
    return inputs


def report_args(wildcards, input):
    args = [f"--table 'Table 2' {input.table2}", f"--table 'Table 3' {input.table3}"]
    args += [
        f"--run {pair}/{exp} {input[f'metrics_{pair}_{exp}']}"
        for pair, exp in trained_runs()
    ]
    model = config["table2"]["models"][0]
    for pair in config["table2"]["pairs"]:
        args.append(f"--score {pair} {input[f'score_{pair}']}")
        args.append(
            f"--sample '{pair} {model}, newstest2014' {input[f'src_{pair}']}"
            f" {input[f'ref_{pair}']} {input[f'hyp_{pair}']}"
        )
    return " ".join(args)


def all_targets():
    return [
        "results/table2.csv",
        "results/table3.csv",
        "results/report.md",
    ]
