"""Table 3's deltas against base: the difference of each row and its p-value (the chart of
them: ``figures.table3_deltas``).

The paper reads Table 3 by comparing each row with base; a few tenths of BLEU may be the
sampling of newstest2013 rather than the ablation. For every row and both BLEU variants,
``add_deltas`` puts the difference from base beside the p-value of sacreBLEU's paired
bootstrap test of the row's translations against base's translations of the same dev set
(``significance.paired_test``). With several seeds, each seed's translations are
concatenated, row and base in the same seed order, and tested as one set: the delta is
still the difference of the seed means shown in the table.

Perplexity gets its delta without a p-value: a paired test needs per-sentence
log-likelihoods, and Table 3's PPL is the training run's own dev evaluation, which records
only the sum over the set (docs/departures.md).
"""

from __future__ import annotations

import os

import pandas as pd

from transformer_core.errors import UserError
from transformer_core.evaluation.significance import paired_test
from transformer_core.files import read_lines

BASE = "base"
# Table 3 column -> the BLEU variant of significance.paired_test that made it.
BLEU_COLUMNS = {"bleu_dev": "paper", "sacrebleu_dev": "sacrebleu"}


def _pooled(row: str, translations: dict[str, dict[int, str]], seeds: list[int]) -> list[str]:
    lines: list[str] = []
    for seed in seeds:
        try:
            lines += read_lines(translations[row][seed])
        except KeyError:
            raise UserError(f"table3: no dev translation of row {row} with seed {seed}") from None
    return lines


def add_deltas(
    table: pd.DataFrame,
    translations: dict[str, dict[int, str]],
    ref: str | os.PathLike,
    lang: str,
    resamples: int,
    seed: int,
) -> pd.DataFrame:
    """``table`` with ``ppl_dev_delta`` and, per BLEU column, ``<column>_delta`` and ``<column>_p``.

    ``translations[row][seed]`` is the dev-set translation file of each row and seed;
    ``ref`` the dev reference. Base's own row and every row of a table without base keep
    these cells empty.
    """
    table = table.copy()
    new = ["ppl_dev_delta"] + [f"{c}_{s}" for c in BLEU_COLUMNS for s in ("delta", "p")]
    for column in new:
        table[column] = pd.NA
    by_row = table.set_index("row")
    if BASE in by_row.index:
        base = by_row.loc[BASE]
        base_seeds = [int(s) for s in str(base["seeds"]).split()]
        refs = read_lines(ref)
        base_lines = _pooled(BASE, translations, base_seeds)
        for index, record in table.iterrows():
            if record["row"] == BASE:
                continue
            seeds = [int(s) for s in str(record["seeds"]).split()]
            if seeds != base_seeds:
                raise UserError(
                    f"table3: row {record['row']} was trained with seeds {seeds}, base with "
                    f"{base_seeds}: a paired test needs the same seeds"
                )
            lines = _pooled(record["row"], translations, seeds)
            if len(lines) != len(refs) * len(seeds):
                raise UserError(
                    f"table3: row {record['row']}'s dev translations have {len(lines)} lines, "
                    f"not {len(refs)} ({ref}) for each of its {len(seeds)} seed(s)"
                )
            table.at[index, "ppl_dev_delta"] = record["ppl_dev"] - base["ppl_dev"]
            for column, variant in BLEU_COLUMNS.items():
                result = paired_test(
                    variant, base_lines, lines, refs * len(seeds), resamples, seed, lang
                )
                table.at[index, f"{column}_delta"] = record[column] - base[column]
                table.at[index, f"{column}_p"] = result.p_value
    order = []
    for column in table.columns:
        if column in new:
            continue
        order.append(column)
        stem = column.removesuffix("_per_seed")
        if column.endswith("_per_seed"):
            order += [c for c in new if c.startswith(f"{stem}_") and c != column]
    return table[order]
