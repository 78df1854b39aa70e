"""The chart of Table 3's deltas against base (``results/plots/table3_deltas.png``): each row's
BLEU delta, its 95% interval and whether the paired test found it significant, as
``tables.deltas.add_deltas`` put them in the table."""

from __future__ import annotations

import os

import pandas as pd

from transformer_core.evaluation.significance import significant
from transformer_core.files import save_png


def plot_deltas(table: pd.DataFrame, base: str, out: str | os.PathLike) -> None:
    """One chart of every row's BLEU delta against the row named ``base``, with the row's 95%
    interval.

    Each row but ``base`` is a point at its delta (both BLEU variants side by side); the bar
    is the half-width of the row's sacreBLEU bootstrap interval, and a filled marker means the
    paired test against base gave p < 0.05.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table[table["row"] != base].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(rows) + 2), 4.5))
    offsets = {"bleu_dev": -0.15, "sacrebleu_dev": 0.15}
    labels = {"bleu_dev": "BLEU (paper-style)", "sacrebleu_dev": "sacreBLEU"}
    for (column, offset), color in zip(offsets.items(), ("tab:blue", "tab:orange"), strict=True):
        if f"{column}_delta" not in rows or rows[f"{column}_delta"].isna().all():
            continue
        label = labels[column]  # on the first point drawn only
        for i, record in rows.iterrows():
            delta = record[f"{column}_delta"]
            if pd.isna(delta):
                continue
            half = record.get(f"{column}_ci95")
            filled = significant(record[f"{column}_p"])
            ax.errorbar(
                i + offset,
                delta,
                yerr=None if pd.isna(half) else half,
                fmt="o",
                color=color,
                markerfacecolor=color if filled else "white",
                capsize=3,
                label=label,
            )
            label = None
    if rows.empty:
        ax.text(0.5, 0.5, "no Table 3 row besides base", ha="center", transform=ax.transAxes)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(rows)), rows["row"])
    ax.set(
        xlabel="Table 3 row",
        ylabel="BLEU - base BLEU (dev set)",
        title="Table 3: change against base (bars: 95% bootstrap; filled: p < 0.05)",
    )
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, out)
