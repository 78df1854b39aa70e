"""What a table was measured on: the dev and test sets of the configuration that made it.

The paper's Tables 2 and 3 are WMT14 numbers (newstest2014 and newstest2013). Our rows
are measured on whatever the configuration trains: WMT14 at paper scale, Multi30k, or
the generated smoke corpus. The notes under each table name our sets, and wherever
they are not the paper's, the paper's columns are labelled as the paper's values on
WMT14: shown for reference (the targets of the paper-scale run), not comparable. They
are kept rather than dropped so that every configuration writes the same CSV columns.
"""

from __future__ import annotations

from collections.abc import Iterable

from transformer_core.data.registry import Dataset, load_registry

# The paper's task for each of our pair names, and its sets (section 6.1, Table 3).
PAPER_DATASETS = {"en_de": "wmt14_en_de", "en_fr": "wmt14_en_fr"}
PAPER_SETS = {"dev": "newstest2013", "test": "newstest2014"}
# Table 4's treebanks other than WSJ (config table4.treebank), and their splits.
TREEBANK_SETS = {
    "nltk": "NLTK's 10% sample of the Penn Treebank (WSJ files 0001-0199; test: its last "
    "table4.held_out_files files, dev: as many before them, train: the rest)",
    "smoke": "the treebank generated from a grammar (table4.smoke: train, dev and test sections)",
}


def datasets_of(pairs: Iterable[tuple[str, str]]) -> dict[str, Dataset]:
    """(pair, dataset name) -> pair: the registry's dataset; an unknown name is a ConfigError."""
    registry = load_registry()
    return {pair: registry.dataset(name) for pair, name in pairs}


def set_name(dataset: Dataset, split: str) -> str:
    """The name of a dataset's dev or test set: its parts (``newstest2013``,
    ``multi30k-val``), or the generated section of a smoke corpus."""
    parts = dataset.splits.get(split) or ()
    if parts:
        return "+".join(part.name for part in parts)
    return f"the generated {split} section of {dataset.name}"


def is_paper_task(pair: str, dataset: Dataset) -> bool:
    return PAPER_DATASETS.get(pair) == dataset.name


def paper_label(column: str, what: str) -> str:
    """A paper column's markdown header where our rows measure something else."""
    return f"{column} (paper, {what})"


def table2_notes(datasets: dict[str, Dataset]) -> tuple[str, ...]:
    """Table 2's notes on its sets: our test set per pair, and what the paper's columns are
    (none without datasets)."""
    if not datasets:
        return ()
    ours = "; ".join(
        f"{pair}: {set_name(dataset, 'test')} ({dataset.description})"
        for pair, dataset in datasets.items()
    )
    notes = (f"Our rows' BLEU is on the test set of this configuration's data: {ours}.",)
    others = [pair for pair, dataset in datasets.items() if not is_paper_task(pair, dataset)]
    if others:
        notes += (
            f"paper_bleu and paper_flops are the paper's values on WMT14 {PAPER_SETS['test']}, "
            f"a different task from this configuration's {', '.join(others)} data: shown for "
            "reference (the paper-scale targets), not comparable with our rows.",
        )
    return notes


def table3_notes(pair: str, dataset: Dataset) -> tuple[str, ...]:
    """Table 3's notes on its dev set and on what the paper's columns are."""
    notes = (
        f"PPL is per word piece of the run's own vocabulary, on {set_name(dataset, 'dev')} "
        "(the dev set of this configuration's "
        f"{dataset.name}), without label smoothing; BLEU is on the same set, from beam search "
        "without checkpoint averaging.",
    )
    if not is_paper_task(pair, dataset):
        notes += (
            "paper_ppl, paper_bleu and paper_params are the paper's values on WMT14 EN-DE "
            f"{PAPER_SETS['dev']}, with the paper's widths and a 37000-piece vocabulary: shown "
            f"for reference, not comparable with our rows on {set_name(dataset, 'dev')}.",
        )
    return notes


def paper_labels(datasets: dict[str, Dataset], columns: tuple[str, ...]) -> dict[str, str]:
    """Markdown headers for the paper's columns when some pair is not the paper's task."""
    if all(is_paper_task(pair, dataset) for pair, dataset in datasets.items()):
        return {}
    return {column: paper_label(column, "WMT14") for column in columns}
