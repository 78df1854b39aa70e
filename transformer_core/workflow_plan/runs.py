"""The runs of a configuration: run names and seeds, each run's ``train`` options and
launcher, its checkpoints, each language pair's search (workflow/rules/train.smk,
evaluate.smk). The parsing runs (the data folders
of ``config_facts.PARSING_PAIRS``) take Table 4's settings where the configuration gives
them: ``table4.steps``, ``table4.train`` (recipe, checkpoints, dropout and label smoothing)
and ``table4.decode``.

Seeds: ``seeds`` trains every run once per seed. The runs of ``train.seed`` keep the plain
names (``runs/<pair>/<exp>``), so the default DAG is unchanged; every other seed N adds runs
named ``<exp>-seedN`` beside them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from transformer_core.decoding.dev_choice import GridPoint, grid_points
from transformer_core.errors import ConfigError
from transformer_core.model.config import EXPERIMENTS, PARSING_TRAIN, ModelConfig
from transformer_core.settings import CHOSEN_FIELDS
from transformer_core.settings.decode import decode_flags
from transformer_core.settings.runtime import inference_flags
from transformer_core.settings.train import train_flags
from transformer_core.workflow_plan.config_facts import (
    PARSING_EXPERIMENT,
    experiments,
    parsing_runs,
)
from transformer_core.workflow_plan.data import is_parsing
from transformer_core.workflow_plan.scaling import scaled_model_overrides, scaled_steps

SEED_SUFFIX = "-seed"
# The names ``RunPlan.run_name`` writes (the `exp` wildcard): an experiment [+ -seedN].
RUN_NAME_PATTERN = f"(?:{'|'.join(EXPERIMENTS)})(?:{SEED_SUFFIX}[0-9]+)?"
# table4.train's model settings (ModelConfig fields declared for that section): regularization,
# and widths replacing the scaled preset's
PARSING_MODEL_KEYS = tuple(
    f.name for f in dataclasses.fields(ModelConfig) if PARSING_TRAIN in f.metadata["sections"]
)


def launcher(gpus: int, nodes: int = 1, threads: int = 1) -> list[Any]:
    """What starts a training job's processes: plain python for one device or the CPU;
    torchrun over the ``gpus`` of one node; on several ``nodes`` (a SLURM allocation), one srun
    task per node, each a torchrun agent of ``gpus`` processes (one on CPU nodes) with the
    node's ``threads``, the agents meeting at a c10d rendezvous on the first node, whose
    endpoint and id the train rule exports (PET_RDZV_ENDPOINT, PET_RDZV_ID: the batch
    script's host and a port of the SLURM job's own, and the job id)."""
    if nodes > 1:
        return [
            "srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            f"--cpus-per-task={threads}", *([f"--gpus-per-node={gpus}"] if gpus else []),
            "--kill-on-bad-exit=1",
            "torchrun", "--nnodes", nodes, "--nproc-per-node", max(gpus, 1),
            "--rdzv-backend", "c10d", "-m", "transformer_core",
        ]  # fmt: skip
    if gpus > 1:
        return ["torchrun", "--standalone", "--nproc_per_node", gpus, "-m", "transformer_core"]
    return ["python", "-m", "transformer_core"]


def checkpoint_path(pair: str, run: str, ckpt: str) -> str:
    """The model a `translate` job decodes: ``avg`` the averaged checkpoints, ``last`` the last."""
    return f"runs/{pair}/{run}/{'averaged.pt' if ckpt == 'avg' else 'last.pt'}"


class RunPlan:
    """The runs and commands of one validated configuration (a dict, the schema's defaults in)."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.table4 = config.get("table4") or {}
        seed = config["train"]["seed"]
        if seed not in config["seeds"]:
            raise ConfigError(
                f"seeds: {config['seeds']} lacks train.seed ({seed}), the seed of the runs at "
                "runs/<pair>/<exp>: add it to seeds or change train.seed"
            )
        self.seeds = [seed] + [s for s in dict.fromkeys(config["seeds"]) if s != seed]
        self._check_cooldowns()

    def _training_runs(self) -> list[tuple[str, str]]:
        """(pair, experiment) of every run the configuration trains, Table 4's included."""
        runs = [(pair, PARSING_EXPERIMENT) for pair in parsing_runs(self.config).values()]
        return runs + [
            (pair, exp)
            for pair in self.config["pairs"]
            for exp in experiments(self.config)
            if exp != PARSING_EXPERIMENT
        ]

    def _check_cooldowns(self) -> None:
        """Each run's cooldown (train.cooldown, table4.train.cooldown) fits in its steps:
        refused before any job starts, naming the key."""
        for pair, exp in self._training_runs():
            cooldown, steps = self.training_recipe(pair).get("cooldown", 0), self.steps(pair, exp)
            if cooldown > steps:
                own = "cooldown" in self._table4_train(pair)
                raise ConfigError(
                    f"{'table4.train' if own else 'train'}.cooldown: {cooldown} steps, more than "
                    f"the {steps} of run {pair}/{exp}"
                )

    def _check_checkpoints(self, pair: str, exp: str) -> None:
        """The run writes at least the checkpoints it averages (one every checkpoint_interval
        steps and one at the last): refused when Snakemake plans the run, before any job,
        rather than after training, naming the key. Only the runs a target needs are checked
        (a Table 4 configuration's translation runs may never be meant to run)."""
        kept, steps = self.checkpointing(pair, exp), self.steps(pair, exp)
        written = math.ceil(steps / kept["checkpoint_interval"])
        if kept["average_last"] > written:
            section = (
                "table4.train"
                if "average_last" in self._table4_train(pair)
                else f"models.{'big' if exp == 'big' else 'base'}"
            )
            raise ConfigError(
                f"{section}.average_last: {kept['average_last']} checkpoints to average, but "
                f"run {pair}/{exp} writes {written} ({steps} steps, one every "
                f"checkpoint_interval {kept['checkpoint_interval']} and one at the last)"
            )

    # --- runs and seeds ----------------------------------------------------------------------

    def run_name(self, exp: str, seed: int) -> str:
        """The run of experiment ``exp`` with ``seed``: ``exp`` for train.seed, else exp-seedN."""
        return exp if seed == self.seeds[0] else f"{exp}{SEED_SUFFIX}{seed}"

    def split_run(self, name: str) -> tuple[str, int]:
        """(experiment, seed) of a run name (the ``exp`` wildcard)."""
        exp, _, seed = name.partition(SEED_SUFFIX)
        return exp, int(seed) if seed else self.seeds[0]

    # --- training ----------------------------------------------------------------------------

    def model_settings(self, exp: str) -> dict[str, Any]:
        """models.big for big, models.base for every other experiment."""
        return self.config["models"]["big" if exp == "big" else "base"]

    def _table4_train(self, pair: str) -> dict[str, Any]:
        return (self.table4.get("train") or {}) if is_parsing(pair) else {}

    def checkpointing(self, pair: str, exp: str) -> dict[str, Any]:
        """checkpoint_interval and average_last: models.*'s, or table4.train's for parsing runs."""
        settings, own = self.model_settings(exp), self._table4_train(pair)
        return {key: own.get(key, settings[key]) for key in ("checkpoint_interval", "average_last")}

    def average_last(self, pair: str, run: str) -> int:
        """How many of the run's last checkpoints `average` takes."""
        return self.checkpointing(pair, self.split_run(run)[0])["average_last"]

    def training_recipe(self, pair: str) -> dict[str, Any]:
        """The `train` section; table4.train's settings replace its values for parsing runs."""
        return {**self.config["train"], **self._table4_train(pair)}

    def model_overrides(self, pair: str, exp: str) -> dict[str, Any]:
        """The experiment's ModelConfig overrides: scaled, then `model`, then table4.train's
        dropout, label_smoothing and widths for parsing runs."""
        scale = self.config["scale_rule"]
        own = self._table4_train(pair)
        return {
            **scaled_model_overrides(exp, scale["width_divisor"], scale.get("layer_divisor", 1)),
            **self.config.get("model", {}),
            **{key: own[key] for key in PARSING_MODEL_KEYS if key in own},
        }

    def steps(self, pair: str, exp: str) -> int:
        """Configured steps (models.*.steps, table4.steps for parsing), else the paper's scaled."""
        settings = self.table4 if is_parsing(pair) else self.model_settings(exp)
        return settings.get("steps") or scaled_steps(exp, self.config["scale_rule"]["step_divisor"])

    def train_args(self, pair: str, run: str) -> list[Any]:
        """The run's `transformer-core train` options: the scaled experiment, its model
        settings, and its recipe, seed and runtime (``settings.train_flags``: one flag per
        TrainSettings field the configuration sets)."""
        exp, seed = self.split_run(run)
        self._check_checkpoints(pair, exp)
        recipe = {
            **self.training_recipe(pair),
            **self.checkpointing(pair, exp),
            "steps": self.steps(pair, exp),
            "seed": seed,
        }
        sets = [
            arg
            for key, value in self.model_overrides(pair, exp).items()
            for arg in ("--set", f"{key}={value}")
        ]
        return ["--experiment", exp, *sets, *train_flags(recipe)]

    # --- decoding ----------------------------------------------------------------------------

    def decode_settings(self, pair: str) -> dict[str, Any]:
        """The `decode` section, or table4.decode for parsing runs."""
        return (self.table4 if is_parsing(pair) else self.config)["decode"]

    def search_flags(self, pair: str, chosen: bool = True) -> list[str]:
        """The search flags of the pair's decoding, one per DecodeSettings field
        (``settings.decode_flags``); without beam and alpha where not ``chosen`` (a decoding
        settings file gives them). table4.decode.tree_constraint constrains the parsing runs'
        search to the trees of table4.linearization."""
        settings = self.decode_settings(pair)
        if not chosen:
            settings = {k: v for k, v in settings.items() if k not in CHOSEN_FIELDS}
        if not is_parsing(pair):
            return decode_flags(settings)
        linearization = self.table4["linearization"] if settings["tree_constraint"] else None
        return decode_flags({**settings, "tree_constraint": linearization})

    def decode_args(self, pair: str, point: str = "") -> list[str]:
        """The options of a `translate` or `bleu_curve` job but its --decode-settings: the
        search of the pair without beam and alpha, or with those of grid ``point`` (a
        ``point_suffix``), and the runtime (``settings.InferenceSettings``: max_tokens,
        precision, compile)."""
        settings = self.decode_settings(pair)
        chosen: list[Any] = []
        if point:
            grid_point = GridPoint.parse(point.removeprefix("."))
            chosen = ["--beam", grid_point.beam, "--alpha", grid_point.alpha]
        return [*chosen, *self.search_flags(pair, chosen=False), *inference_flags(settings)]

    def grid_points(self, pair: str) -> list[GridPoint]:
        """The points whose dev decodes choose the pair's decoding (``decode.grid`` where
        decode.beam or decode.alpha is ``dev``); none for the parsing runs or where both are
        numbers."""
        if is_parsing(pair):
            return []
        settings = self.decode_settings(pair)
        return grid_points(settings["beam"], settings["alpha"], settings["grid"])

    def decode_choice_path(self, pair: str, run: str, ckpt: str) -> str:
        """The decoding settings a decode of ``run``'s ``ckpt`` checkpoint reads: its own, or
        where table3.decoding is ``base``, those of the same seed's averaged base model (big's
        for big), as the paper decoded its ablations with the base setting. Where decode's
        settings are numbers, base's file holds them and reading it needs no base model."""
        exp, seed = self.split_run(run)
        if not is_parsing(pair) and self.config["table3"]["decoding"] == "base":
            preset = exp if exp in ("base", "big") else "base"
            run, ckpt = self.run_name(preset, seed), "avg"
        return f"results/decode_choice/{pair}/{run}.{ckpt}.json"

    def decode_choice_inputs(self, pair: str, run: str, ckpt: str) -> dict[str, str]:
        """The dev scores a choice for ``run``'s ``ckpt`` reads, one per grid point."""
        return {
            point.name: f"results/scores/{pair}/{run}.dev.{ckpt}{point_suffix(point)}.json"
            for point in self.grid_points(pair)
        }

    def decode_choice_setting(self, pair: str, run: str, ckpt: str) -> list[Any]:
        """`decode_choice`'s configured beam and alpha (numbers or ``dev``) and the model it
        chooses for: the configuration's part of its options (Snakemake records it, so a
        changed setting remakes the choice)."""
        settings = self.decode_settings(pair)
        label = f"{pair}/{run} {'averaged' if ckpt == 'avg' else 'last'}"
        return ["--beam", settings["beam"], "--alpha", settings["alpha"], "--chosen-for", label]

    def decode_choice_points(self, pair: str, inputs: Any) -> list[Any]:
        """`decode_choice`'s grid points, each with its dev score (``inputs``: the rule's, by
        point name)."""
        return [
            arg
            for point in self.grid_points(pair)
            for arg in ("--point", point.beam, point.alpha, inputs[point.name])
        ]


# The suffixes ``point_suffix`` writes, or none (the `point` wildcard).
POINT_PATTERN = r"(\.beam[0-9]+-alpha[0-9][0-9.e+-]*)?"


def point_suffix(point: GridPoint) -> str:
    """The ``point`` wildcard of a grid point's translation and score files: ``.beam4-alpha0.6``
    (empty for the decodes that read a settings file)."""
    return f".{point.name}"
