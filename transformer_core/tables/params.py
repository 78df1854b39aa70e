"""Parameter counts of every preset and Table 3 row, beside the paper's column.

The count is exact (the model is built on the meta device). With tied
embeddings and a 37000-token vocabulary, base has about 63M parameters and big
about 214M; the paper's column runs about 2M higher for the d_model = 512 rows.
"""

from __future__ import annotations

from transformer_core.model.config import TABLE3_ROWS, model_config
from transformer_core.model.transformer import parameter_count
from transformer_core.paper import TABLE3


def parameter_table(vocab_size: int = 37000) -> list[dict]:
    """One dict per Table 3 row: exact count, the paper's value and the relative gap."""
    rows = []
    for name, exp in TABLE3_ROWS.items():
        count = parameter_count(model_config(name, vocab_size=vocab_size))
        paper_m = TABLE3[name].params_m
        rows.append(
            {
                "row": name,
                "description": exp.description,
                "vocab_size": vocab_size,
                "params": count,
                "params_m": round(count / 1e6, 2),
                "paper_params_m": paper_m,
                "gap_pct": None
                if paper_m is None
                else round(100.0 * (count / 1e6 - paper_m) / paper_m, 1),
            }
        )
    return rows


def format_markdown(rows: list[dict]) -> str:
    """The table as markdown, as docs/model.md shows it."""
    lines = [
        f"| row | what changes | params (exact, vocab {rows[0]['vocab_size']}) | paper (M) | gap |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        paper = "" if r["paper_params_m"] is None else f"{r['paper_params_m']:g}"
        gap = "" if r["gap_pct"] is None else f"{r['gap_pct']:+.1f}%"
        lines.append(
            f"| {r['row']} | {r['description']} | {r['params']:,} ({r['params_m']:.1f}M) | {paper} | {gap} |"
        )
    return "\n".join(lines) + "\n"
