"""Tables 2, 3 and 4 assembled from the pipeline's result files, with the paper's values beside ours.

Inputs are the JSON files earlier stages write: a training ``summary.json``, a
``score`` JSON (paper-style BLEU and sacreBLEU), a ``ppl`` JSON and an ``evalb``
JSON (bracket scores). Each table is written as CSV with a markdown twin, atomically.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from transformer_core.config import ModelConfig
from transformer_core.errors import UserError
from transformer_core.io import atomic_open, atomic_write_text
from transformer_core.paper import TABLE2, TABLE2_PRESET_ROWS, TABLE3, TABLE4

PAIR_COLUMNS = {"en_de": ("en_de_bleu", "en_de_flops"), "en_fr": ("en_fr_bleu", "en_fr_flops")}

TABLE2_COLUMNS = [
    "source",
    "model",
    "pair",
    "bleu_paper_style",
    "sacrebleu",
    "sacrebleu_signature",
    "paper_bleu",
    "cost_flops_paper_method",
    "flops_analytic",
    "paper_flops",
    "device",
    "devices",
    "train_precision",
    "train_hours",
    "steps",
]
TABLE3_COLUMNS = [
    "row",
    "N",
    "d_model",
    "d_ff",
    "h",
    "d_k",
    "d_v",
    "P_drop",
    "eps_ls",
    "positional",
    "steps",
    "train_precision",
    "ppl_dev",
    "bleu_dev",
    "sacrebleu_dev",
    "params_m",
    "params_m_at_37k",
    "paper_ppl",
    "paper_bleu",
    "paper_params",
]

TABLE4_COLUMNS = [
    "source",
    "parser",
    "training",
    "status",
    "treebank",
    "f1",
    "f1_len_le_40",
    "recall",
    "precision",
    "test_sentences",
    "paper_f1",
    "steps",
    "train_hours",
    "device",
    "devices",
    "train_precision",
]
# Our settings of Table 4 and the paper's training column each reproduces.
TABLE4_SETTINGS = {"wsj_only": "WSJ only, discriminative", "semi_supervised": "semi-supervised"}
EVALB_CUTOFF_LEN = 40  # COLLINS.prm's CUTOFF_LEN, the column f1_len_le_40


def read_json(path: str | os.PathLike, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A result JSON; a missing file or key is a UserError naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise UserError(f"result file not found: {path}") from err
    except json.JSONDecodeError as err:
        raise UserError(f"{path} is not valid JSON: {err}") from err
    missing = [key for key in required if key not in data]
    if missing:
        raise UserError(f"{path} lacks key(s) {', '.join(missing)}")
    return data


def train_precision(summary: dict) -> str:
    """The precision a run trained in: ``bf16`` or ``fp32`` (older summaries spell torch's dtype)."""
    value = summary.get("precision", "float32")
    return {"float32": "fp32", "bfloat16": "bf16"}.get(value, value)


def table2(results: list[dict[str, str]]) -> pd.DataFrame:
    """Table 2: our rows (one per model and pair) followed by the paper's literature rows.

    ``results`` items have ``model`` (a preset: base or big), ``pair`` (en_de or en_fr),
    ``score`` (JSON path, newstest2014 of the averaged model) and ``summary`` (training summary path).
    """
    paper_rows = {row.model: row for row in TABLE2}
    rows = []
    for item in results:
        if item["pair"] not in PAIR_COLUMNS:
            raise UserError(
                f"table2: unknown pair {item['pair']!r}; known: {', '.join(PAIR_COLUMNS)}"
            )
        if item["model"] not in TABLE2_PRESET_ROWS:
            raise UserError(
                f"table2: model {item['model']!r} is not one of {', '.join(TABLE2_PRESET_ROWS)}"
            )
        score = read_json(item["score"], ("bleu_paper_style", "sacrebleu", "sacrebleu_signature"))
        summary = read_json(item["summary"], ("wall_seconds", "device", "devices", "steps"))
        paper = paper_rows[TABLE2_PRESET_ROWS[item["model"]]]
        bleu_col, flops_col = PAIR_COLUMNS[item["pair"]]
        rows.append(
            {
                "source": "ours",
                "model": paper.model,
                "pair": item["pair"],
                "bleu_paper_style": score["bleu_paper_style"],
                "sacrebleu": score["sacrebleu"],
                "sacrebleu_signature": score["sacrebleu_signature"],
                "paper_bleu": getattr(paper, bleu_col),
                "cost_flops_paper_method": summary.get("flops_paper_method"),
                "flops_analytic": summary.get("flops_analytic"),
                "paper_flops": getattr(paper, flops_col),
                "device": summary["device"],
                "devices": summary["devices"],
                "train_precision": train_precision(summary),
                "train_hours": summary["wall_seconds"] / 3600.0,
                "steps": summary["steps"],
            }
        )
    for paper in TABLE2:
        if paper.ours:
            continue
        for pair, (bleu_col, flops_col) in PAIR_COLUMNS.items():
            if getattr(paper, bleu_col) is None:
                continue
            rows.append(
                {
                    "source": "paper",
                    "model": paper.model,
                    "pair": pair,
                    "paper_bleu": getattr(paper, bleu_col),
                    "paper_flops": getattr(paper, flops_col),
                }
            )
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


def params_at_vocab(params: int, cfg: ModelConfig, vocab_size: int) -> int:
    """The parameter count of the same model with another vocabulary.

    The shared embedding (vocab_size x d_model) is the model's only vocabulary-sized
    tensor: tied to the pre-softmax projection, which has no bias.
    """
    return params + (vocab_size - cfg.vocab_size) * cfg.d_model


def table3_row(row: str, score_path: str, summary_path: str) -> pd.DataFrame:
    """One Table 3 row: the trained model's hyperparameters, our dev PPL/BLEU, the paper's values.

    PPL is the training run's final dev evaluation (the last checkpoint, per word piece,
    no label smoothing: the same quantity `transformer-core ppl` computes).
    """
    if row not in TABLE3:
        raise UserError(f"table3: unknown row {row!r}; known: {', '.join(TABLE3)}")
    score = read_json(score_path, ("bleu_paper_style", "sacrebleu"))
    summary = read_json(summary_path, ("steps", "model_config", "params", "dev_ppl"))
    if summary["dev_ppl"] is None:
        raise UserError(f"{summary_path}: the run has no dev perplexity (train it with --dev)")
    cfg = ModelConfig.from_dict(summary["model_config"], where=f"{summary_path}:model_config")
    paper = TABLE3[row]
    return pd.DataFrame(
        [
            {
                "row": row,
                "N": cfg.encoder_layers,
                "d_model": cfg.d_model,
                "d_ff": cfg.d_ff,
                "h": cfg.h,
                "d_k": cfg.d_k,
                "d_v": cfg.d_v,
                "P_drop": cfg.dropout,
                "eps_ls": cfg.label_smoothing,
                "positional": cfg.positional,
                "steps": summary["steps"],
                "train_precision": train_precision(summary),
                "ppl_dev": summary["dev_ppl"],
                "bleu_dev": score["bleu_paper_style"],
                "sacrebleu_dev": score["sacrebleu"],
                "params_m": summary["params"] / 1e6,
                "params_m_at_37k": params_at_vocab(summary["params"], cfg, 37000) / 1e6,
                "paper_ppl": paper.ppl,
                "paper_bleu": paper.bleu,
                "paper_params": paper.params_m,
            }
        ],
        columns=TABLE3_COLUMNS,
    )


def table3(row_csvs: list[str]) -> pd.DataFrame:
    """Table 3 from its per-row CSVs, in the paper's row order."""
    frames = []
    for path in row_csvs:
        try:
            frames.append(pd.read_csv(path))
        except FileNotFoundError as err:
            raise UserError(f"table3: row file not found: {path}") from err
    table = pd.concat(frames, ignore_index=True)
    order = {name: i for i, name in enumerate(TABLE3)}
    return table.sort_values("row", key=lambda col: col.map(order)).reset_index(drop=True)


def table4(results: list[dict[str, str]], treebank: str) -> pd.DataFrame:
    """Table 4 in the paper's row order, our rows where the paper's Transformer rows are.

    ``results`` items have ``setting`` (``wsj_only`` or ``semi_supervised``), ``evalb``
    (the JSON of ``transformer-core evalb`` on the test split) and ``summary`` (training
    summary path). A setting without a result is a row with status ``not run``;
    ``treebank`` names what our rows were trained and tested on (only ``wsj`` is the
    paper's section 23).
    """
    ours: dict[str, dict[str, Any]] = {}
    for item in results:
        setting = item["setting"]
        if setting not in TABLE4_SETTINGS:
            raise UserError(
                f"table4: unknown setting {setting!r}; known: {', '.join(TABLE4_SETTINGS)}"
            )
        if setting in ours:
            raise UserError(f"table4: setting {setting!r} given twice")
        scores = read_json(item["evalb"], ("all", "cutoff_len"))
        if scores["cutoff_len"] != EVALB_CUTOFF_LEN:
            raise UserError(
                f"{item['evalb']}: cutoff_len is {scores['cutoff_len']}, not COLLINS.prm's "
                f"{EVALB_CUTOFF_LEN}"
            )
        short = read_json(item["evalb"], (f"len<={EVALB_CUTOFF_LEN}",))[f"len<={EVALB_CUTOFF_LEN}"]
        summary = read_json(item["summary"], ("wall_seconds", "device", "devices", "steps"))
        # No valid sentence: nothing was scored, the row says so. Valid sentences but no bracket
        # EVALB counts: F1 stays an empty cell (EVALB's nan), never a number.
        valid = scores["all"].get("valid_sentences", 1) > 0
        f1 = scores["all"]["f1"]
        f1 = f1 if isinstance(f1, (int, float)) and math.isfinite(f1) else None
        ours[setting] = {
            "status": "run" if valid else "no valid sentences",
            "treebank": treebank,
            "f1": f1 if valid else None,
            "f1_len_le_40": short["f1"] if valid and f1 is not None else None,
            "recall": scores["all"]["recall"],
            "precision": scores["all"]["precision"],
            "test_sentences": scores["all"]["valid_sentences"],
            "steps": summary["steps"],
            "train_hours": summary["wall_seconds"] / 3600.0,
            "device": summary["device"],
            "devices": summary["devices"],
            "train_precision": train_precision(summary),
        }
    setting_of = {training: setting for setting, training in TABLE4_SETTINGS.items()}
    rows = []
    for paper in TABLE4:
        row = {"parser": paper.parser, "training": paper.training, "paper_f1": paper.f1}
        if paper.ours:
            row.update(source="ours", **ours.get(setting_of[paper.training], {"status": "not run"}))
        else:
            row.update(source="paper")
        rows.append(row)
    counts = {
        "test_sentences": "Int64",
        "steps": "Int64",
        "devices": "Int64",
    }  # integers beside empty cells
    return pd.DataFrame(rows, columns=TABLE4_COLUMNS).astype(counts)


def _cell(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        if abs(value) >= 1e6:
            return f"{value:.3g}"
        # counts read back from CSV beside missing cells come as floats
        return str(int(value)) if value.is_integer() and abs(value) >= 1 else f"{value:.2f}"
    return str(value).replace("|", "\\|")


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
) -> None:
    """Write the CSV (and its markdown twin) atomically."""
    with atomic_open(csv_path, "w", newline="") as handle:
        table.to_csv(handle, index=False)
    if markdown_path is not None:
        atomic_write_text(markdown_path, to_markdown(table, notes))
