"""BLEU against training steps: a run's kept checkpoints decoded and scored (the report's
chart of them: ``figures.bleu_curves``).

The learning curves of the report show training loss and dev perplexity, which every run
logs; BLEU needs a decode per checkpoint. ``bleu_by_step`` decodes the dev set with up
to ``count`` of the checkpoints a run kept (``train --keep-last``: the last ones, those
Table 2 averages), evenly spaced and always with the last, and scores every BLEU variant.
So at paper scale the curve covers the end of training, where the averaging happens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from transformer_core.errors import UserError


def spaced(items: Sequence, count: int) -> list:
    """Up to ``count`` of ``items``, evenly spaced, the last always among them."""
    if count < 1:
        raise UserError(f"--checkpoints must be at least 1, got {count}")
    if len(items) <= count:
        return list(items)
    if count == 1:
        return [items[-1]]
    last = len(items) - 1
    return [items[i] for i in sorted({round(i * last / (count - 1)) for i in range(count)})]


def bleu_by_step(
    checkpoints: Sequence[tuple[int, Path]],
    translate: Callable[[Path], list[str]],
    refs: Sequence[str],
    lang: str,
) -> list[dict]:
    """``[{"step", "bleu_paper_style", "sacrebleu", "bleu_lowercased_tokenized"}]`` of each
    (step, checkpoint), oldest first; ``translate(path)`` decodes the dev set with one
    checkpoint."""
    from transformer_core.evaluation.bleu import (
        lowercased_tokenized_bleu,
        paper_bleu,
        sacrebleu_13a,
    )

    points = []
    for step, path in checkpoints:
        hyps = translate(path)
        points.append(
            {
                "step": step,
                "checkpoint": str(path),
                "bleu_paper_style": paper_bleu(hyps, refs, lang).bleu,
                "sacrebleu": sacrebleu_13a(hyps, refs)[0].bleu,
                "bleu_lowercased_tokenized": lowercased_tokenized_bleu(hyps, refs, lang).bleu,
            }
        )
    return points
