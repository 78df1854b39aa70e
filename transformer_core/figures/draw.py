"""The paper's Figures 3-5 redrawn from a trained model, in the paper's style.

Each panel writes the sentence's pieces twice, vertically, along a top row (the attending
positions) and a bottom row (the attended ones), and joins them with lines whose opacity
and width grow with the attention weight; each head has its own color. What each figure
shows (transformer_core.paper.ATTENTION_FIGURES) and which heads (attention.pick_heads):

- Figure 3 (long-distance dependencies): every head, from the word "making" only;
- Figure 4 (anaphora): the full attention of the head sharpest from "its", and below it
  the attention from "its" alone of the two sharpest heads;
- Figure 5 (sentence structure): the full attention of the two heads with the sharpest
  patterns over the whole sentence.
"""

from __future__ import annotations

import os

from transformer_core.figures.attention_maps import WORD_START, SentenceAttention, pick_heads
from transformer_core.files import save_png
from transformer_core.paper import AttentionFigure

MIN_ALPHA = 0.05  # fainter lines do not show on the page; skipping them keeps files small
HEADS_PER_PANEL = 2  # Figures 4 and 5 compare two heads, as the paper's do


def _colors(count: int) -> list:
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(count)]


def draw_panel(
    ax, attention: SentenceAttention, heads: dict[int, tuple], query: int | None
) -> None:
    """Lines from the top row (queries) to the bottom row (keys), one color per head.

    ``heads`` maps each head to its color; ``query`` limits the lines to one position.
    """
    tokens = [t.removeprefix(WORD_START) for t in attention.tokens]
    length = len(tokens)
    for position, token in enumerate(tokens):
        bold = "bold" if position == query else "normal"
        ax.text(
            position, 1.02, token, rotation=90, ha="center", va="bottom", fontsize=8, weight=bold
        )
        ax.text(position, -0.02, token, rotation=90, ha="center", va="top", fontsize=8)
    queries = range(length) if query is None else [query]
    for head, color in heads.items():
        weights = attention.weights[head]
        for i in queries:
            for j in range(length):
                weight = float(weights[i, j])
                # one word's lines: opacity by the square root, so a diffuse head's weak lines
                # stay visible; a full pattern (T^2 lines) in proportion, or it turns to a haze
                alpha = weight**0.5 if query is not None else weight
                if alpha < MIN_ALPHA:
                    continue
                ax.plot([i, j], [1, 0], color=color, alpha=alpha, linewidth=0.5 + 3 * weight)
    ax.set_xlim(-1, length)
    ax.set_ylim(-0.9, 1.9)
    ax.axis("off")


def _label(ax, text: str) -> None:
    ax.text(-1, 1.75, text, fontsize=9, ha="left", va="top")


def draw_figure(
    figure: AttentionFigure, attention: SentenceAttention, out: str | os.PathLike, model: str
) -> None:
    """One of the paper's Figures 3-5 from ``attention`` (one layer on the figure's sentence)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads_total = attention.weights.size(0)
    width = max(8.0, 0.32 * len(attention.tokens))
    where = f"encoder self-attention, layer {attention.layer} of {attention.layers}"
    if figure.heads == "all":
        fig, axes = plt.subplots(1, 1, figsize=(width, 4.2))
        axes = [axes]
        colors = dict(enumerate(_colors(heads_total)))
        draw_panel(axes[0], attention, colors, attention.word_position(figure.word))
        _label(
            axes[0], f"all {heads_total} heads, attention from '{figure.word}' only (colors: heads)"
        )
    elif figure.word is not None:
        fig, axes = plt.subplots(2, 1, figsize=(width, 8.0))
        chosen = pick_heads(attention, figure.word, HEADS_PER_PANEL)
        colors = dict(zip(chosen, _colors(len(chosen)), strict=True))
        first = chosen[0]
        draw_panel(axes[0], attention, {first: colors[first]}, None)
        _label(axes[0], f"head {first + 1}: full attention")
        draw_panel(axes[1], attention, colors, attention.word_position(figure.word))
        heads = " and ".join(str(h + 1) for h in chosen)
        _label(axes[1], f"heads {heads}: attention from '{figure.word}' only")
    else:
        fig, axes = plt.subplots(2, 1, figsize=(width, 8.0))
        chosen = pick_heads(attention, None, HEADS_PER_PANEL)
        for ax, head, color in zip(axes, chosen, _colors(len(chosen)), strict=True):
            draw_panel(ax, attention, {head: color}, None)
            _label(ax, f"head {head + 1}: full attention")
    fig.suptitle(f"Figure {figure.number} of the paper, redrawn: {where}\n{model}", fontsize=10)
    fig.tight_layout()
    save_png(fig, out)
