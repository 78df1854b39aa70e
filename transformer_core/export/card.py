"""The model card of a transformers export (its ``README.md``): the facts it states and
``export.json`` records, and its text.

The facts are gathered before and beside the export: the checkpoint's and the sentencepiece
model's sha256 (every export records them, CTranslate2's too: ``provenance``), the run's
experiment and recipe (the checkpoint's own record, else the run's ``summary.json`` beside
it), the steps an averaged checkpoint averages, the ``score`` result the card states (read and
checked before the work: ``read_card_score``), and the command that made the export.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from transformer_core.decoding.dev_choice import checked_search, read_score
from transformer_core.errors import UserError
from transformer_core.files import check_input_file, sha256_of
from transformer_core.model.checkpoint import load_checkpoint
from transformer_core.model.transformer import Transformer


def provenance(checkpoint: str | os.PathLike, spm: str | os.PathLike) -> dict[str, str]:
    """What every export records of its inputs: the checkpoint's path and sha256, and the
    sentencepiece model's sha256."""
    return {
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": sha256_of(checkpoint),
        "spm_sha256": sha256_of(spm),
    }


def read_card_score(path: str | os.PathLike) -> dict[str, Any]:
    """The ``score`` result at ``path`` (``--score``) that the card states, checked before the
    work: its two BLEU numbers finite, and its search (its ``decoding`` record), where it has
    one, within the decoding settings' bounds; a UserError naming ``--score`` otherwise."""
    check_input_file(path, "--score")
    try:
        score = read_score(path)  # the card's two numbers, finite
        if score.get("decoding") is not None:  # the search the card and folder state
            checked_search(score["decoding"], path)
    except UserError as err:
        raise UserError(f"--score {err}") from None
    return score


def card_facts(
    checkpoint: str | os.PathLike,
    spm: str | os.PathLike,
    out: str | os.PathLike,
    score_path: str | os.PathLike | None = None,
    score: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the card of the export of ``checkpoint`` and ``spm`` into ``out`` states, and its
    ``export.json`` records of it: ``provenance``, the run's experiment and recipe (the
    checkpoint's, else its run's ``summary.json``), the steps it averages, ``score`` (read from
    ``score_path``: ``read_card_score``) and the command that made it."""
    inputs = provenance(checkpoint, spm)
    payload = load_checkpoint(checkpoint)
    summary = Path(checkpoint).parent / "summary.json"  # the run's, beside last.pt
    trained = read_summary(summary) if summary.is_file() else {}
    steps = payload.get("steps") or []
    command = [
        "transformer-core", "export", "--checkpoint", str(checkpoint), "--spm", str(spm),
        "--format", "transformers", *(["--score", str(score_path)] if score_path else []),
        "--out", str(out),
    ]  # fmt: skip
    return {
        **inputs,
        "experiment": payload.get("experiment") or trained.get("experiment"),
        "train_config": payload.get("train_config") or trained.get("train_config"),
        "averaged_steps": ", ".join(map(str, steps)) if None not in steps else None,
        "score": score,
        "command": shlex.join(command),
    }


def read_summary(path: Path) -> dict[str, Any]:
    """The training summary beside an exported checkpoint (the card's recipe); a file cut off
    or not a mapping is a UserError naming it."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(
            f"{path}: not a training summary ({err}); the card reads the run's recipe from it: "
            "restore it, or export a copy of the checkpoint kept elsewhere"
        ) from None
    if not isinstance(summary, dict):
        raise UserError(f"{path}: not a training summary (a JSON mapping)")
    return summary


def score_search(score: dict[str, Any] | None) -> tuple[int, float] | None:
    """The beam and alpha a score's translations were decoded with (its ``decoding`` record),
    or None where the score does not record them."""
    decoding = (score or {}).get("decoding")
    if not isinstance(decoding, dict) or "beam" not in decoding or "alpha" not in decoding:
        return None
    return int(decoding["beam"]), float(decoding["alpha"])


def search_origins(score: dict[str, Any]) -> set[str]:
    """Where a score's beam and alpha came from (``config``, ``dev``)."""
    return set(((score.get("decoding") or {}).get("from") or {}).values())


def model_card(model: Transformer, facts: dict[str, Any]) -> str:
    """The folder's README.md: what the model is, how it was trained, its score, how it was made."""
    cfg = model.cfg
    params = sum(p.numel() for p in model.parameters())
    lines = [
        f"# {facts.get('experiment') or 'Transformer'}: a reproduction of Vaswani et al. (2017)",
        "",
        "A Transformer trained by the transformer-core pipeline, exported to MarianMT.",
        "",
        "## Model",
        "",
        f"Post-norm encoder-decoder, {cfg.encoder_layers}+{cfg.decoder_layers} layers, d_model "
        f"{cfg.d_model}, d_ff {cfg.d_ff}, {cfg.h} heads, ReLU, sinusoidal positions, one embedding "
        f"matrix of {cfg.vocab_size} sentencepiece pieces shared by both sides and the output layer; "
        f"{params:,} parameters.",
        "",
        "## Training",
        "",
        "The paper's recipe: Adam(0.9, 0.98, 1e-9), the learning rate d_model^-0.5 * "
        "min(step^-0.5, step * warmup^-1.5), label smoothing "
        f"{cfg.label_smoothing}, dropout {cfg.dropout}.",
    ]
    train = facts.get("train_config")
    try:  # the run's recipe, each TrainSettings field in its words; a recipe without one of
        # them (an older run's), or none, leaves the line out
        lines += [
            f"{train['steps']:,} steps of {train['tokens_per_step']:,} target tokens, warmup "
            f"{train['warmup']}, lr_scale {train['lr_scale']}, seed {train['seed']}."
        ]
    except (KeyError, TypeError):
        pass
    if facts.get("averaged_steps"):
        lines += [
            f"The weights are the average of the checkpoints of steps {facts['averaged_steps']}."
        ]
    if facts.get("score"):
        score = facts["score"]
        search = score_search(score)
        how = (
            f"(beam {search[0]}, GNMT's length penalty with alpha {search[1]:g}"
            + (", chosen on the dev set" if "dev" in search_origins(score) else "")
            + ")"
            if search
            else "(the score file records no beam or length penalty: the search that made it "
            "is unknown)"
        )
        lines += [
            "",
            "## Score",
            "",
            f"On `{score.get('ref', 'the test set')}`: sacreBLEU {score['sacrebleu']:.2f} "
            f"(`{score.get('sacrebleu_signature', '')}`), paper-style BLEU "
            f"{score['bleu_paper_style']:.2f}, decoded by the project's beam search {how}.",
        ]
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "from transformers import MarianMTModel, MarianTokenizer",
        "",
        'tokenizer = MarianTokenizer.from_pretrained("FOLDER")',
        'model = MarianMTModel.from_pretrained("FOLDER")',
        'batch = tokenizer(["A man is riding a bike."], return_tensors="pt", truncation=True)',
        "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
        "```",
        "",
        "`generate` divides a hypothesis' log-probability by |Y|^alpha (`length_penalty`); the "
        "paper and the project by ((5 + |Y|) / 6)^alpha, so the same alpha can pick another "
        "hypothesis. Layer norms use epsilon 1e-5 here and 1e-6 in training.",
        "",
        "## Made by",
        "",
        f"`{facts.get('command', 'transformer-core export --format transformers')}`",
    ]
    return "\n".join(lines) + "\n"
