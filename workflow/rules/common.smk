# The configuration's checks, the plan objects, wildcard constraints, and the helpers that
# need Snakemake itself (core counts, report marks). What the rules run for a configuration
# (files, run names, arguments) is plain Python in transformer_core.workflow_plan, tested in
# tests/unit/test_workflow_plan.py; the rules call it with their wildcards' values.
# Shell safety: every placeholder of every rule's shell command is quoted ({x:q}); a params
# function that gives several arguments returns them as a list, which {x:q} quotes one by one.
import os

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from transformer_core.data.shards import NAME_PATTERN as SHARD_PATTERN
from transformer_core.settings import EXPORT_QUANTIZATIONS
from transformer_core.workflow_plan.config_facts import job_threads, rank_threads
from transformer_core.workflow_plan.config_load import load
from transformer_core.workflow_plan import DataPlan, RunPlan, TablePlan
from transformer_core.workflow_plan.data import (
    BINARIZED_SUFFIXES,
    languages,
    shard_args,
    split_prefixes,
)
from transformer_core.workflow_plan.runs import (
    POINT_PATTERN,
    RUN_NAME_PATTERN,
    checkpoint_path,
    launcher,
)
from transformer_core.workflow_plan.tables import (
    DELTAS_PLOT,
    attention_figures,
    figure_args,
    option_args,
    option_inputs,
)


def workflow_cores():
    """Snakemake's core count (--cores); None without one: `--report` and `--lint` run no job."""
    try:
        return workflow.cores
    except WorkflowError:
        return None


# Every check, in order, each mistake one line naming its key; the schema's defaults filled in
# (and named on stderr); this run's --configfile and --config recorded as _run_options for the
# report's hints (workflow/report/workflow.rst). The schema's path is relative to this file.
load(
    config,
    configfiles=workflow.configfiles,
    command_configfiles=workflow.overwrite_configfiles or [],
    overrides=workflow.config_settings.config,
    cores=workflow_cores(),
    validate=lambda data: validate(data, "../schemas/config.schema.yaml"),
)
ENV = "../envs/transformer-core.yaml"
PLAN = RunPlan(config)  # runs, seeds, train options, search
DATA = DataPlan(config)  # texts, shards, sentencepiece, treebank
TABLES = TablePlan(config, PLAN)  # tables, figures, report, the default target
TABLE3_PAIR = config["table3"]["pair"]


wildcard_constraints:
    pair="[a-z]+_[a-z]+",
    src="[a-z]+",
    tgt="[a-z]+",
    split="train|dev|test",
    exp=RUN_NAME_PATTERN,  # a run: experiment [+ seed] (runs.RunPlan.run_name)
    ckpt="avg|last",
    point=POINT_PATTERN,  # a grid point's decode of dev, or none (evaluate.smk; runs.point_suffix)
    quantization="|".join(EXPORT_QUANTIZATIONS),  # of a CTranslate2 export (export.smk)
    shard=SHARD_PATTERN,  # a shard of a pair's training corpus (data.smk; data.shards.name)


def src_tgt(wildcards):
    """The pair of a rule whose wildcards are {src}_{tgt}."""
    return f"{wildcards.src}_{wildcards.tgt}"


def output_prefix(suffix):
    """A params function: the first output's path without ``suffix`` (tools that take a prefix)."""
    return lambda wildcards, output: output[0][: -len(suffix)]


def input_prefix(name, suffix=".json"):
    """A params function: input ``name``'s path without ``suffix`` (binarized data is named by prefix)."""
    return lambda wildcards, input: input[name][: -len(suffix)]


def input_dir(name):
    """A params function: the folder of input ``name`` (tools that read a set of files from a folder)."""
    return lambda wildcards, input: os.path.dirname(input[name])


def output_dir(wildcards, output):
    """The folder of the first output (tools that write a set of files into a folder)."""
    return os.path.dirname(output[0])


def decode_settings_input(wildcards):
    """The decoding settings file (decode_choice's) a translate or score job reads its beam
    and alpha from; none for a grid point's, whose file name gives them."""
    if wildcards.point:
        return []
    return PLAN.decode_choice_path(wildcards.pair, wildcards.exp, wildcards.ckpt)


def settings_flag(flag, input):
    """``flag`` and the job's decoding settings file (its input ``settings``), or nothing."""
    return [flag, input.settings] if input.settings else []


def decode_args(wildcards):
    """A translate or bleu_curve job's search and runtime options, the beam and alpha of its
    grid point (workflow_plan.runs.RunPlan.decode_args): a function of the wildcards alone,
    which Snakemake records, so that a changed decode setting reruns the job."""
    return PLAN.decode_args(wildcards.pair, getattr(wildcards, "point", ""))


def configured_threads(rule_name):
    """The rule's `threads:`, from threads.<rule_name> (auto: every core Snakemake has)."""
    return job_threads(config["threads"][rule_name], workflow_cores())


def node_gpus(resources):
    """The GPUs of each node of a training job: `gpu` on one node, `gpus_per_node` on several
    (the slurm profile's `train_request`)."""
    several = int(resources.get("nodes", 1)) > 1
    return int(resources.get("gpus_per_node" if several else "gpu", 0))


def train_launcher(wildcards, threads, resources):
    """What starts a training job's processes (workflow_plan.runs.launcher); on several nodes
    each node's CPUs are sbatch's --cpus-per-task (its one task per node)."""
    nodes = int(resources.get("nodes", 1))
    cpus = int(resources.get("cpus_per_task", 0)) if nodes > 1 else 0
    return launcher(node_gpus(resources), nodes, cpus if cpus > 0 else threads)


def threads_per_rank(wildcards, threads, resources):
    """`--num-threads` of each process of a training job: its node's threads over its GPUs."""
    return rank_threads(threads, node_gpus(resources))


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
