"""Tables as people read them: the CSV with every column apart, and its markdown twin with each
value, its interval and its spread in one cell (``write_table``)."""

from __future__ import annotations

import math
import os
from typing import Any

import pandas as pd

from transformer_core.evaluation.significance import significant
from transformer_core.files import atomic_open, atomic_write_text


def _cell(value: Any) -> str:
    if _missing(value):
        return ""
    if isinstance(value, float):
        if abs(value) >= 1e6:
            return f"{value:.3g}"
        # counts read back from CSV beside missing cells come as floats
        return str(int(value)) if value.is_integer() and abs(value) >= 1 else f"{value:.2f}"
    return str(value).replace("|", "\\|")


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _with_spread(value: Any, half_width: Any, std: Any) -> str:
    """ "25.31 ±0.61" (the bootstrap half-width), "sd 0.20" added over several seeds."""
    if _missing(value):
        return ""
    text = f"{value:.2f}"
    if not _missing(half_width):
        text += f" ±{half_width:.2f}"
    if not _missing(std):
        text += f" (sd {std:.2f})"
    return text


def _with_p(delta: Any, p_value: Any) -> str:
    """ "-0.52 (p 0.030)", in bold when p < 0.05."""
    if _missing(delta):
        return ""
    text = f"{delta:+.2f}"
    if _missing(p_value):
        return text
    p_value = float(p_value)
    text = f"{text} (p {p_value:.3f})"
    return f"**{text}**" if significant(p_value) else text


def markdown_view(table: pd.DataFrame) -> pd.DataFrame:
    """The table as a reader reads it: each value with its interval and spread in one cell.

    A column ``X`` with ``X_ci95``/``X_std`` becomes "X ±ci (sd std)"; ``X_delta`` with
    ``X_p`` becomes "delta (p value)", bold when significant. Per-seed values stay only
    when some cell has several seeds. The CSV keeps every column apart.
    """
    view = table.copy()
    several = "seeds" in view and view["seeds"].astype(str).str.contains(" ").any()
    for column in list(table.columns):
        if not column.endswith("_per_seed"):
            continue
        stem = column.removesuffix("_per_seed")
        ci = table.get(f"{stem}_ci95", pd.Series([None] * len(table)))
        view[stem] = [
            _with_spread(v, c, s)
            for v, c, s in zip(table[stem], ci, table[f"{stem}_std"], strict=True)
        ]
        view = view.drop(columns=[c for c in (f"{stem}_ci95", f"{stem}_std") if c in view])
        if not several:
            view = view.drop(columns=[column])
    for column in list(table.columns):
        if column.endswith("_delta") and f"{column.removesuffix('_delta')}_p" in table:
            p_column = f"{column.removesuffix('_delta')}_p"
            view[column] = [
                _with_p(d, p) for d, p in zip(table[column], table[p_column], strict=True)
            ]
            view = view.drop(columns=[p_column])
    return view


def to_markdown(table: pd.DataFrame, notes: tuple[str, ...] = ()) -> str:
    """A GitHub markdown table (empty cells for missing values) followed by notes."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for record in table.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in record) + " |")
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    return text


def write_table(
    table: pd.DataFrame,
    csv_path: str | os.PathLike,
    markdown_path: str | os.PathLike | None = None,
    notes: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
) -> None:
    """Write the CSV (and its markdown twin, its headers renamed by ``labels``) atomically."""
    with atomic_open(csv_path, "w", newline="") as handle:
        table.to_csv(handle, index=False)
    if markdown_path is not None:
        view = markdown_view(table).rename(columns=labels or {})
        atomic_write_text(markdown_path, to_markdown(view, notes))
