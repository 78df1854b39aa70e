"""Table 4 assembled from the parsing runs' EVALB scores and training summaries, the paper's rows
beside ours (``transformer-core table4``).

One setting (WSJ only, or semi-supervised) is one row; several seeds of it make one row with
the mean F1 beside each seed's. EVALB's nan stays an empty cell, never a number.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from transformer_core.errors import UserError
from transformer_core.evaluation.significance import mean_std
from transformer_core.paper import TABLE4
from transformer_core.settings import DecodeSettings
from transformer_core.tables.translation import (
    group_seeds,
    mean_of,
    read_json,
    seed_columns,
    train_precision,
)

TABLE4_COLUMNS = [
    "source",
    "parser",
    "training",
    "status",
    "treebank",
    "seeds",
    "f1",
    "f1_std",
    "f1_per_seed",
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


def table4(results: list[dict[str, str]], treebank: str) -> pd.DataFrame:
    """Table 4 in the paper's row order, our rows where the paper's Transformer rows are.

    ``results`` items have ``setting`` (``wsj_only`` or ``semi_supervised``), ``seed`` (of
    the training run), ``evalb`` (the JSON of ``transformer-core evalb`` on the test split)
    and ``summary`` (training summary path). Several seeds of one setting make one row: F1,
    recall, precision and training time are means over the seeds, with each seed's F1
    beside them. A setting without a result is a row with status ``not run``; ``treebank``
    names what our rows were trained and tested on (only ``wsj`` is the paper's section 23).
    """
    ours: dict[str, dict[str, Any]] = {}
    for (setting,), items in group_seeds(results, ("setting",)).items():
        if setting not in TABLE4_SETTINGS:
            raise UserError(
                f"table4: unknown setting {setting!r}; known: {', '.join(TABLE4_SETTINGS)}"
            )
        runs = [_evalb_run(item) for item in items]
        summaries = [
            read_json(i["summary"], ("wall_seconds", "device", "devices", "steps")) for i in items
        ]
        seeds = [int(i["seed"]) for i in items]
        first = summaries[0]
        row = {
            "status": "run" if all(r["valid"] for r in runs) else "no valid sentences",
            "treebank": treebank,
            "seeds": " ".join(map(str, seeds)),
            "test_sentences": runs[0]["test_sentences"],
            "steps": first["steps"],
            "train_hours": mean_of(summaries, "wall_seconds", 3600.0),
            "device": first["device"],
            "devices": first["devices"],
            "train_precision": train_precision(first),
        }
        for key in ("recall", "precision"):
            row[key] = mean_std([r[key] for r in runs])[0]
        if all(r["f1"] is not None for r in runs):
            row.update(seed_columns("f1", seeds, [r["f1"] for r in runs], None))
            short = [r["f1_len_le_40"] for r in runs]
            row["f1_len_le_40"] = None if None in short else mean_std(short)[0]
        else:  # EVALB's nan in some run: no mean to show, each seed's value is
            row["f1_per_seed"] = " ".join(
                f"{seed}:{'nan' if r['f1'] is None else format(r['f1'], '.2f')}"
                for seed, r in zip(seeds, runs, strict=True)
            )
        ours[setting] = row
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


def _evalb_run(item: dict[str, str]) -> dict[str, Any]:
    """One run's test scores from its EVALB JSON; F1 is None where EVALB prints nan.

    No valid sentence: nothing was scored, the row says so. Valid sentences but no bracket
    EVALB counts: F1 stays an empty cell (EVALB's nan), never a number.
    """
    scores = read_json(item["evalb"], ("all", "cutoff_len"))
    if scores["cutoff_len"] != EVALB_CUTOFF_LEN:
        raise UserError(
            f"{item['evalb']}: cutoff_len is {scores['cutoff_len']}, not COLLINS.prm's "
            f"{EVALB_CUTOFF_LEN}"
        )
    short = read_json(item["evalb"], (f"len<={EVALB_CUTOFF_LEN}",))[f"len<={EVALB_CUTOFF_LEN}"]
    valid = scores["all"].get("valid_sentences", 1) > 0
    f1, short_f1 = (_finite(scores["all"]["f1"]), _finite(short["f1"])) if valid else (None, None)
    return {
        "valid": valid,
        "f1": f1,
        "f1_len_le_40": short_f1,
        "recall": scores["all"]["recall"],
        "precision": scores["all"]["precision"],
        "test_sentences": scores["all"]["valid_sentences"],
    }


def _finite(value: Any) -> float | None:
    """A score as a number, None for EVALB's nan (written as null or NaN)."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def search_note(search: DecodeSettings) -> str:
    """The table's note on how our rows decoded: the search and what happens to its trees."""
    length = "input" if search.max_len_a == 1.0 else f"{search.max_len_a:g} x input"
    text = (
        f"Our rows decode with beam {search.beam}, alpha {search.alpha:g} and a maximum "
        f"output length of {length} + {search.max_len_b} (the paper: beam 21, alpha 0.3, input "
        "+ 300), average the last checkpoints as the base model does, and "
    )
    if search.tree_constraint:
        copied = (
            ", the sentence's words copied into them" if search.tree_constraint == "words" else ""
        )
        text += (
            f"search only well-formed trees with one leaf per word{copied} (the tree constraint, "
            f"linearization {search.tree_constraint}; the paper's search has none)"
        )
    else:
        text += (
            "repair output that is not a well-formed tree (unbalanced brackets, too few or too "
            "many leaves) before scoring"
        )
    return text + (
        "; gold part-of-speech tags are put back on the leaves so that EVALB deletes the same "
        "punctuation on both sides."
    )
