"""Tables 2 and 3 assembled from the pipeline's result files, with the paper's values beside ours,
and the readers of those files that Table 4 (``table4``) shares.

Inputs are the JSON files earlier stages write: a training ``summary.json``, a
``score`` JSON (paper-style BLEU, sacreBLEU and the Multi30k literature's lowercased
tokenized BLEU, each with sacreBLEU's 95% bootstrap interval) and a ``ppl`` JSON. Each table is written as CSV with a markdown twin,
atomically (``table_markdown.write_table``).

A cell trained with several seeds (config ``seeds``) shows the mean over seeds, its
standard deviation (``*_std``) and the per-seed values (``*_per_seed``, "seed:value");
``*_ci95`` is the half-width of sacreBLEU's bootstrap interval (the sampling of the test
sentences), averaged over the seeds' runs. Table 3's deltas against base and their
p-values (``table3_significance``) are added when the table is assembled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from transformer_core.errors import UserError
from transformer_core.evaluation.significance import mean_std
from transformer_core.model.config import ModelConfig
from transformer_core.paper import TABLE2, TABLE2_PRESET_ROWS, TABLE3

LOWERCASED_TOKENIZED = "bleu_lowercased_tokenized"  # bleu.lowercased_tokenized_bleu's key
PAIR_COLUMNS = {"en_de": ("en_de_bleu", "en_de_flops"), "en_fr": ("en_fr_bleu", "en_fr_flops")}

TABLE2_COLUMNS = [
    "source",
    "model",
    "pair",
    "bleu_paper_style",
    "sacrebleu",
    "sacrebleu_signature",
    "beam",
    "alpha",
    "decode_from",
    "bleu_paper_style_ci95",
    "sacrebleu_ci95",
    "seeds",
    "bleu_paper_style_std",
    "bleu_paper_style_per_seed",
    "sacrebleu_std",
    "sacrebleu_per_seed",
    "bleu_lowercased_tokenized",
    "bleu_lowercased_tokenized_ci95",
    "bleu_lowercased_tokenized_std",
    "bleu_lowercased_tokenized_per_seed",
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
    "seeds",
    "ppl_dev",
    "ppl_dev_std",
    "ppl_dev_per_seed",
    "bleu_dev",
    "bleu_dev_ci95",
    "bleu_dev_std",
    "bleu_dev_per_seed",
    "sacrebleu_dev",
    "sacrebleu_dev_ci95",
    "sacrebleu_dev_std",
    "sacrebleu_dev_per_seed",
    "bleu_lowercased_tokenized_dev",
    "bleu_lowercased_tokenized_dev_ci95",
    "bleu_lowercased_tokenized_dev_std",
    "bleu_lowercased_tokenized_dev_per_seed",
    "beam",
    "alpha",
    "decode_from",
    "params_m",
    "params_m_at_37k",
    "paper_ppl",
    "paper_bleu",
    "paper_params",
]

# Notes under the markdown of the tables whose BLEU has intervals (and Table 3's deltas).
INTERVAL_NOTES = (
    "BLEU ±x: half-width of sacreBLEU's 95% bootstrap confidence interval over the scored "
    "sentences (its `corpus_score(n_bootstrap=...)`, seeded; resamples and seed are in each "
    "score file's `*_ci` field). With several seeds: the mean over seeds, the runs' mean "
    "half-width, and (sd x) the standard deviation over seeds.",
)
DELTA_NOTES = (
    "Deltas are row minus base. p: sacreBLEU's paired bootstrap test of the row's translations "
    "against base's translations of the same dev set (seeds pooled); **bold**: p < 0.05. "
    "PPL deltas have no test: the dev perplexity is recorded as a sum, not per sentence.",
)


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


def seed_columns(name: str, seeds: list[int], values: list[float], half_widths: list) -> dict:
    """Columns ``name`` (mean over seeds), ``name_ci95``, ``name_std`` and ``name_per_seed``.

    ``half_widths`` are the runs' bootstrap half-widths (None where a score file has no
    interval): their mean is the ``_ci95`` column, empty unless every run has one.
    """
    mean, std = mean_std(values)
    columns = {
        name: mean,
        f"{name}_std": std,
        f"{name}_per_seed": " ".join(f"{s}:{v:.2f}" for s, v in zip(seeds, values, strict=True)),
    }
    if half_widths is not None:
        known = [h for h in half_widths if h is not None]
        columns[f"{name}_ci95"] = mean_std(known)[0] if len(known) == len(values) else None
    return columns


def bleu_keys(scores: list[dict]) -> list[str]:
    """The BLEU variants the tables show of these score files: paper-style and sacreBLEU,
    and the Multi30k literature's lowercased tokenized BLEU where every file has it (score
    files written before it was added have not; its columns stay empty)."""
    keys = ["bleu_paper_style", "sacrebleu"]
    if all(LOWERCASED_TOKENIZED in score for score in scores):
        keys.append(LOWERCASED_TOKENIZED)
    return keys


def _half_width(score: dict, key: str) -> float | None:
    interval = score.get(f"{key}_ci")
    return interval["half_width"] if interval else None


def decode_origin(decoding: dict[str, Any]) -> str:
    """Where a score's beam and alpha came from: ``config``, or which were chosen on the dev
    set and for which model (``decoding.dev_choice``)."""
    origins = decoding.get("from") or {}
    chosen = [key for key in ("beam", "alpha") if origins.get(key) == "dev"]
    if not chosen:  # translate's own record of a decode given on its command line says so
        return "command line" if "command line" in origins.values() else "config"
    text = f"{' and '.join(chosen)} chosen on dev"
    return f"{text} for {decoding['chosen_for']}" if decoding.get("chosen_for") else text


def decoding_columns(seeds: list[int], scores: list[dict]) -> dict[str, Any]:
    """``beam``, ``alpha`` and ``decode_from`` of the runs' scores (their ``decoding`` record):
    one value where the seeds' runs agree, else "seed:value" per seed; empty for a score file
    that records no decoding."""
    records = [score.get("decoding") for score in scores]
    if not all(isinstance(record, dict) for record in records):
        return {}
    columns: dict[str, Any] = {}
    for key in ("beam", "alpha"):
        values = [record.get(key) for record in records]
        columns[key] = (
            values[0]
            if len(set(values)) == 1
            else " ".join(f"{s}:{v:g}" for s, v in zip(seeds, values, strict=True))
        )
    columns["decode_from"] = "; ".join(dict.fromkeys(decode_origin(r) for r in records))
    return columns


def group_seeds(results: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    """``results`` grouped by the values of ``keys``, in first-seen order; a seed given twice
    for one group is an error."""
    groups: dict[tuple, list[dict]] = {}
    for item in results:
        group = groups.setdefault(tuple(item[k] for k in keys), [])
        if any(other["seed"] == item["seed"] for other in group):
            raise UserError(
                f"seed {item['seed']} given twice for {', '.join(map(str, group[0].values()))}"
            )
        group.append(item)
    return groups


def mean_of(summaries: list[dict], key: str, scale: float = 1.0) -> float | None:
    """The mean of ``key`` over the runs' summaries (divided by ``scale``); None if one lacks it."""
    values = [s[key] for s in summaries if s.get(key) is not None]
    return mean_std(values)[0] / scale if len(values) == len(summaries) else None


def table2(results: list[dict[str, str]]) -> pd.DataFrame:
    """Table 2: our rows (one per model and pair) followed by the paper's literature rows.

    ``results`` items have ``model`` (a preset: base or big), ``pair`` (en_de or en_fr),
    ``seed`` (of the training run), ``score`` (JSON path, newstest2014 of the averaged model)
    and ``summary`` (training summary path). Several seeds of one model and pair make one
    row: BLEU and training cost are means over the seeds.
    """
    paper_rows = {row.model: row for row in TABLE2}
    rows = []
    for (model, pair), items in group_seeds(results, ("model", "pair")).items():
        if pair not in PAIR_COLUMNS:
            raise UserError(f"table2: unknown pair {pair!r}; known: {', '.join(PAIR_COLUMNS)}")
        if model not in TABLE2_PRESET_ROWS:
            raise UserError(
                f"table2: model {model!r} is not one of {', '.join(TABLE2_PRESET_ROWS)}"
            )
        scores = [
            read_json(i["score"], ("bleu_paper_style", "sacrebleu", "sacrebleu_signature"))
            for i in items
        ]
        summaries = [
            read_json(i["summary"], ("wall_seconds", "device", "devices", "steps")) for i in items
        ]
        seeds = [int(i["seed"]) for i in items]
        paper = paper_rows[TABLE2_PRESET_ROWS[model]]
        bleu_col, flops_col = PAIR_COLUMNS[pair]
        first = summaries[0]
        row = {
            "source": "ours",
            "model": paper.model,
            "pair": pair,
            "seeds": " ".join(map(str, seeds)),
            "sacrebleu_signature": scores[0]["sacrebleu_signature"],
            **decoding_columns(seeds, scores),
            "paper_bleu": getattr(paper, bleu_col),
            "cost_flops_paper_method": mean_of(summaries, "flops_paper_method"),
            "flops_analytic": mean_of(summaries, "flops_analytic"),
            "paper_flops": getattr(paper, flops_col),
            "device": first["device"],
            "devices": first["devices"],
            "train_precision": train_precision(first),
            "train_hours": mean_of(summaries, "wall_seconds", 3600.0),
            "steps": first["steps"],
        }
        for key in bleu_keys(scores):
            values = [score[key] for score in scores]
            row.update(seed_columns(key, seeds, values, [_half_width(s, key) for s in scores]))
        rows.append(row)
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


def table3_row(row: str, runs: list[dict[str, str]]) -> pd.DataFrame:
    """One Table 3 row: the trained model's hyperparameters, our dev PPL/BLEU, the paper's values.

    ``runs`` items have ``seed``, ``score`` (newstest2013 score JSON of the last checkpoint)
    and ``summary`` (the run's training summary), one per seed. PPL is the training run's
    final dev evaluation (the last checkpoint, per word piece, no label smoothing: the same
    quantity `transformer-core ppl` computes).
    """
    if row not in TABLE3:
        raise UserError(f"table3: unknown row {row!r}; known: {', '.join(TABLE3)}")
    if not runs:
        raise UserError(f"table3: row {row} has no run")
    group_seeds(runs, ())  # a seed given twice is an error
    scores = [read_json(r["score"], ("bleu_paper_style", "sacrebleu")) for r in runs]
    summaries = [
        read_json(r["summary"], ("steps", "model_config", "params", "dev_ppl")) for r in runs
    ]
    for run, summary in zip(runs, summaries, strict=True):
        if summary["dev_ppl"] is None:
            raise UserError(
                f"{run['summary']}: the run has no dev perplexity (train it with --dev)"
            )
    first, path = summaries[0], runs[0]["summary"]
    cfg = ModelConfig.from_dict(first["model_config"], where=f"{path}:model_config")
    seeds = [int(r["seed"]) for r in runs]
    paper = TABLE3[row]
    values = {
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
        "steps": first["steps"],
        "train_precision": train_precision(first),
        "seeds": " ".join(map(str, seeds)),
        **seed_columns("ppl_dev", seeds, [s["dev_ppl"] for s in summaries], None),
        **decoding_columns(seeds, scores),
        "params_m": first["params"] / 1e6,
        "params_m_at_37k": params_at_vocab(first["params"], cfg, 37000) / 1e6,
        "paper_ppl": paper.ppl,
        "paper_bleu": paper.bleu,
        "paper_params": paper.params_m,
    }
    for key in bleu_keys(scores):
        column = {"bleu_paper_style": "bleu_dev", "sacrebleu": "sacrebleu_dev"}.get(
            key, f"{key}_dev"
        )
        half_widths = [_half_width(score, key) for score in scores]
        values.update(seed_columns(column, seeds, [s[key] for s in scores], half_widths))
    return pd.DataFrame([values], columns=TABLE3_COLUMNS)


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
