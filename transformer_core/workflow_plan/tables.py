"""The inputs and arguments of the table, figure and report rules (workflow/rules/tables.smk),
and the default target.

A table's command line is a list of ``Option``s built in one loop over the configuration:
the same list gives the rule's input files (``option_inputs``) and its arguments
(``option_args``), so an input cannot be added without its flag.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from transformer_core.paper import ATTENTION_FIGURES
from transformer_core.workflow_plan.config_facts import (
    PARSING_EXPERIMENT,
    PARSING_PAIRS,
    parsing_runs,
)
from transformer_core.workflow_plan.data import languages, require_table4
from transformer_core.workflow_plan.runs import RunPlan

DELTAS_PLOT = "results/plots/table3_deltas.png"


class Option(NamedTuple):
    """One option of a command line: ``flag``, its ``values``, then the paths of its ``files``
    (input name -> path)."""

    flag: str
    values: tuple
    files: dict[str, str]

    def args(self, inputs: Any) -> list[Any]:
        return [self.flag, *self.values, *(inputs[name] for name in self.files)]


def option_inputs(options: list[Option]) -> dict[str, str]:
    """The input files of ``options`` (name -> path), for a rule's ``unpack``."""
    return {name: path for option in options for name, path in option.files.items()}


def option_args(options: list[Option], inputs: Any) -> list[Any]:
    """The arguments of ``options``, their files taken from the rule's ``inputs``."""
    return [arg for option in options for arg in option.args(inputs)]


def attention_figures() -> dict[Any, str]:
    """The paper's Figures 3-5 (``paper.ATTENTION_FIGURES``) -> their PNG paths."""
    return {figure: f"results/figures/attention_{figure.name}.png" for figure in ATTENTION_FIGURES}


def figure_args(paths: list[str]) -> list[str]:
    """`attention --figure NAME PATH` of each figure, ``paths`` in ATTENTION_FIGURES' order."""
    return [
        arg for figure, path in zip(ATTENTION_FIGURES, paths, strict=True)
        for arg in ("--figure", figure.name, path)
    ]  # fmt: skip


class TablePlan:
    """The tables, figures and report of one validated configuration and its ``RunPlan``."""

    def __init__(self, config: dict[str, Any], plan: RunPlan):
        self.config, self.plan = config, plan
        self.table3_pair = config["table3"]["pair"]
        self.parsing_runs = parsing_runs(config)  # Table 4 setting -> data folder

    def tables(self) -> list[str]:
        """The tables the configuration builds: table2, table3 and, when it can, table4."""
        return ["table2", "table3"] + (["table4"] if self.parsing_runs else [])

    def all_targets(self) -> list[str]:
        return [f"results/{name}.csv" for name in self.tables()] + ["results/report.md"]

    def bootstrap_args(self, point: str = "") -> list[Any]:
        """sacreBLEU's bootstrap settings (config `bootstrap`) as command options; none for a
        grid ``point``'s dev score, which only chooses the decoding."""
        settings = self.config["bootstrap"]
        return ["--bootstrap-resamples", 0 if point else settings["resamples"],
                "--bootstrap-seed", settings["seed"]]  # fmt: skip

    def _dataset_option(self, pair: str) -> Option:
        """`--dataset PAIR DATASET` of the table commands: the notes name its sets."""
        return Option("--dataset", (pair, self.config["pairs"][pair]["dataset"]), {})

    # --- Table 2 -----------------------------------------------------------------------------

    def table2_runs(self) -> list[tuple[str, str]]:
        """(pair, model) of every Table 2 cell, in the table's order."""
        table2 = self.config["table2"]
        return [(pair, model) for model in table2["models"] for pair in table2["pairs"]]

    def table2_exports(self, engine: str = "ctranslate2-float32") -> list[str]:
        """The export of every Table 2 model, once per seed: ``engine`` is the export folder's
        name (the float32 CTranslate2 one, or ``transformers``)."""
        return [
            f"exports/{pair}/{self.plan.run_name(model, seed)}/{engine}"
            for pair, model in self.table2_runs()
            for seed in self.plan.seeds
        ]

    def table2(self) -> list[Option]:
        """Each Table 2 cell's averaged test score and training summary, once per seed."""
        options = [
            Option("--result", (model, pair, seed), {
                f"score_{run}_{pair}": f"results/scores/{pair}/{run}.test.avg.json",
                f"summary_{run}_{pair}": f"runs/{pair}/{run}/summary.json",
            })
            for pair, model in self.table2_runs()
            for seed in self.plan.seeds
            for run in [self.plan.run_name(model, seed)]
        ]  # fmt: skip
        return options + [self._dataset_option(pair) for pair in self.config["table2"]["pairs"]]

    # --- Table 3 -----------------------------------------------------------------------------

    def table3_row_runs(self, exp: str) -> list[tuple[int, str, str]]:
        """(seed, dev score, training summary) of each seed's run of a Table 3 row: rows are
        scored on the dev set of the Table 3 pair, without averaging."""
        pair = self.table3_pair
        return [
            (seed, f"results/scores/{pair}/{run}.dev.last.json", f"runs/{pair}/{run}/summary.json")
            for seed in self.plan.seeds
            for run in [self.plan.run_name(exp, seed)]
        ]

    def table3_row_inputs(self, exp: str) -> dict[str, str]:
        return {
            f"{kind}_{seed}": path
            for seed, score, summary in self.table3_row_runs(exp)
            for kind, path in (("score", score), ("summary", summary))
        }

    def table3_row_args(self, exp: str, inputs: Any) -> list[Any]:
        """`table3_row --run SEED SCORE SUMMARY` of each seed."""
        return [
            arg
            for seed, _, _ in self.table3_row_runs(exp)
            for arg in ("--run", seed, inputs[f"score_{seed}"], inputs[f"summary_{seed}"])
        ]

    def table3(self) -> list[Option]:
        """Table 3's row files, and each row's dev translations per seed with the reference
        (the paired test against base)."""
        pair, rows = self.table3_pair, self.config["table3"]["rows"]
        hyps = [
            Option("--hyp", (row, seed),
                   {f"hyp_{run}": f"results/translations/{pair}/{run}.dev.last.txt"})
            for row in rows
            for seed in self.plan.seeds
            for run in [self.plan.run_name(row, seed)]
        ]  # fmt: skip
        return [
            Option("--rows", (), {f"row_{row}": f"results/table3/rows/{row}.csv" for row in rows}),
            *hyps,
            Option("--ref", (), {"ref": f"data/{pair}/raw/dev.{languages(pair)[1]}"}),
            self._dataset_option(pair),
        ]

    # --- Table 4 -----------------------------------------------------------------------------

    def table4(self) -> list[Option]:
        """Each Table 4 setting's averaged test EVALB scores and training summary, once per
        seed; the treebank; how the rows decoded (the table's note)."""
        require_table4(self.config)
        results = [
            Option("--result", (setting, seed), {
                f"evalb_{setting}_{seed}": f"results/evalb/{pair}/{run}.test.avg.json",
                f"summary_{setting}_{seed}": f"runs/{pair}/{run}/summary.json",
            })
            for setting, pair in self.parsing_runs.items()
            for seed in self.plan.seeds
            for run in [self.plan.run_name(PARSING_EXPERIMENT, seed)]
        ]  # fmt: skip
        search = self.plan.search_flags(PARSING_PAIRS["wsj_only"])
        return [
            *results,
            Option("--treebank", (self.config["table4"]["treebank"],), {}),
            *(
                Option(flag, (value,), {})
                for flag, value in zip(search[::2], search[1::2], strict=True)
            ),
        ]

    # --- the report --------------------------------------------------------------------------

    def trained_runs(self) -> list[tuple[str, str]]:
        """(pair, experiment) of every training run, Table 2's, Table 3's, then Table 4's."""
        runs = self.table2_runs()
        runs += [(self.table3_pair, row) for row in self.config["table3"]["rows"]]
        runs += [(pair, PARSING_EXPERIMENT) for pair in self.parsing_runs.values()]
        return list(dict.fromkeys(runs))

    def report(self) -> list[Option]:
        """The tables, every training run's metrics (learning curves), the Table 3 deltas
        chart, the attention figures, and for each Table 2 pair the first model's test score
        and a sample of its translations."""
        model = self.config["table2"]["models"][0]
        options = [
            Option("--table", (f"Table {name.removeprefix('table')}",),
                   {name: f"results/{name}.md"})
            for name in self.tables()
        ]  # fmt: skip
        options.append(
            Option("--figure", ("Table 3: change against base",), {"deltas": DELTAS_PLOT})
        )
        options += [
            Option("--figure", (figure.title,), {f"figure_{figure.name}": path})
            for figure, path in attention_figures().items()
        ]
        options += [
            Option("--curve", (f"{pair}/{exp}",),
                   {f"curve_{pair}_{exp}": f"results/curves/{pair}/{exp}.dev.json"})
            for pair, exp in self.table2_runs()
        ]  # fmt: skip
        options += [
            Option("--run", (f"{pair}/{exp}",),
                   {f"metrics_{pair}_{exp}": f"runs/{pair}/{exp}/metrics.jsonl"})
            for pair, exp in self.trained_runs()
        ]  # fmt: skip
        options += [
            Option("--decoding", (f"{pair}/{run}",), {
                f"decoding_{pair}_{run}": self.plan.decode_choice_path(pair, run, "avg")
            })
            for pair, exp in self.table2_runs()
            for run in [self.plan.run_name(exp, self.plan.seeds[0])]
        ]  # fmt: skip
        for pair in self.config["table2"]["pairs"]:
            src, tgt = languages(pair)
            options += [
                Option("--score", (pair,),
                       {f"score_{pair}": f"results/scores/{pair}/{model}.test.avg.json"}),
                Option("--sample", (f"{pair} {model}, newstest2014",), {
                    f"src_{pair}": f"data/{pair}/raw/test.{src}",
                    f"ref_{pair}": f"data/{pair}/raw/test.{tgt}",
                    f"hyp_{pair}": f"results/translations/{pair}/{model}.test.avg.txt",
                }),
            ]  # fmt: skip
        return options
