"""The report's BLEU against training steps: dev BLEU (paper-style and sacreBLEU) of each run's
kept checkpoints, one line per run, from the files ``bleu_curve`` writes
(``evaluation.curves.bleu_by_step``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from transformer_core.errors import UserError
from transformer_core.files import save_png


def plot_bleu_curves(curves: dict[str, str | os.PathLike], out: str | os.PathLike) -> None:
    """Dev BLEU (both variants) against steps, one line per run, from ``bleu_curve`` JSONs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for label, path in curves.items():
        try:
            points = json.loads(Path(path).read_text(encoding="utf-8"))["points"]
        except (OSError, ValueError, KeyError) as err:
            raise UserError(f"{path}: not a bleu_curve file ({err})") from None
        steps = [p["step"] for p in points]
        for ax, key in zip(axes, ("bleu_paper_style", "sacrebleu"), strict=True):
            ax.plot(steps, [p[key] for p in points], marker="o", label=label)
    for ax, title in zip(axes, ("BLEU, paper-style", "sacreBLEU"), strict=True):
        ax.set(xlabel="step", ylabel="dev BLEU (beam search, kept checkpoints)", title=title)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, out)
