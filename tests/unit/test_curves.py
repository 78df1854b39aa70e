"""BLEU against training steps: which checkpoints are decoded, the scores, the plot."""

import json

import pytest

from transformer_core.errors import UserError
from transformer_core.evaluation.curves import bleu_by_step, spaced
from transformer_core.figures.bleu_curves import plot_bleu_curves


def test_spaced_keeps_the_last_and_spreads_the_rest():
    items = list(range(20))
    assert spaced(items, 5) == [0, 5, 10, 14, 19]
    assert spaced(items, 1) == [19] and spaced(items[:3], 5) == [0, 1, 2]
    with pytest.raises(UserError, match="at least 1"):
        spaced(items, 0)


def test_each_checkpoint_is_scored_and_plotted(tmp_path):
    refs = ["the house is big", "a cat sees the dog"]
    outputs = {"a.pt": ["the house", "a cat"], "b.pt": refs}
    points = bleu_by_step(
        [(10, tmp_path / "a.pt"), (20, tmp_path / "b.pt")],
        lambda path: outputs[path.name],
        refs,
        "en",
    )
    assert [p["step"] for p in points] == [10, 20]
    assert points[1]["bleu_paper_style"] == pytest.approx(100.0)
    assert points[0]["sacrebleu"] < points[1]["sacrebleu"]
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"points": points}))
    out = tmp_path / "plots" / "bleu.png"
    plot_bleu_curves({"en_de/base": str(curve)}, out)
    assert out.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(UserError, match="not a bleu_curve file"):
        plot_bleu_curves({"x": str(tmp_path / "missing.json")}, out)
