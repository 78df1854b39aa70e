"""The report's learning curves: training loss and dev perplexity against steps, read from the
``metrics.jsonl`` every training run writes (``training.metrics_log``), one line per run."""

from __future__ import annotations

import json
import os

from transformer_core.errors import UserError
from transformer_core.files import save_png


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """The JSON lines of a training run's metrics file; a malformed line is an error naming it."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise UserError(f"{path}:{number}: not a JSON line: {err}") from err
    return records


def plot_learning_curves(runs: dict[str, str], out: str | os.PathLike) -> None:
    """Training loss and dev perplexity against steps, one line per run, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, path in runs.items():
        records = read_metrics(path)
        train = [r for r in records if r.get("event") == "train"]
        dev = [r for r in records if r.get("event") == "dev"]
        if train:
            ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], label=label)
        if dev:
            ax_ppl.plot(
                [r["step"] for r in dev], [r["dev_ppl"] for r in dev], marker="o", label=label
            )
    ax_loss.set(xlabel="step", ylabel="training loss (label-smoothed)", title="Training loss")
    ax_ppl.set(
        xlabel="step",
        ylabel="dev perplexity",
        title="Dev perplexity (no label smoothing)",
        yscale="log",
    )
    for ax in (ax_loss, ax_ppl):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    save_png(fig, out)
