"""The report: recipe, tables, signatures, a real PNG plot and sample translations."""

import json
import subprocess
import sys

import pytest

from transformer_core.errors import UserError
from transformer_core.figures.learning_curves import read_metrics
from transformer_core.tables.report import samples_markdown


def test_report_command(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"event": "train", "step": 1, "loss": 9.0},
                {"event": "train", "step": 2, "loss": 7.5},
                {"event": "dev", "step": 2, "dev_loss": 6.8, "dev_ppl": 900.0},
            ]
        )
        + "\n"
    )
    table = tmp_path / "t2.md"
    table.write_text("| a |\n|---|\n| 1 |\n")
    score = tmp_path / "s.json"
    score.write_text(json.dumps({"sacrebleu_signature": "nrefs:1|tok:13a"}))
    for name, text in (
        ("src", "ein Haus\nzwei\n"),
        ("ref", "a house\ntwo\n"),
        ("hyp", "a home\ntwo\n"),
    ):
        (tmp_path / name).write_text(text)
    out, plot = tmp_path / "report.md", tmp_path / "plots" / "curves.png"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "report",
            "--scale",
            "smoke",
            "--table",
            "Table 2",
            str(table),
            "--score",
            "en_de",
            str(score),
            "--run",
            "en_de/base",
            str(metrics),
            "--plot",
            str(plot),
            "--figure",
            "Figure 3: long-distance dependencies",
            str(tmp_path / "figures" / "attention_long_distance.png"),
            "--sample",
            "en_de base",
            str(tmp_path / "src"),
            str(tmp_path / "ref"),
            str(tmp_path / "hyp"),
            "--out",
            str(out),
        ],
        check=True,
    )
    text = out.read_text()
    assert "Scale: `smoke`" in text and "## Table 2" in text and "`nrefs:1|tok:13a`" in text
    assert "## Learning curves\n\n![Learning curves](plots/curves.png)" in text
    assert "## Figure 3: long-distance dependencies" in text
    assert "(figures/attention_long_distance.png)" in text
    assert "source: `ein Haus`" in text and "ours: `a home`" in text
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_malformed_metrics_line_is_named(tmp_path):
    bad = tmp_path / "m.jsonl"
    bad.write_text('{"step": 1}\n{oops\n')
    with pytest.raises(UserError, match="m.jsonl:2"):
        read_metrics(bad)


def test_samples_are_the_first_lines_without_crlf_ends(tmp_path):
    files = {
        "src": "eins\r\nzwei\u2028drei\r\nvier\r\n",
        "ref": "one\ntwo\nthree\n",
        "hyp": "1\n2\n3\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_bytes(text.encode())
    text = samples_markdown("en_de", *(str(tmp_path / name) for name in ("src", "ref", "hyp")), n=2)
    assert text == (
        "### en_de\n\n1. source: `eins`\n   - reference: `one`\n   - ours: `1`\n"
        "2. source: `zwei\u2028drei`\n   - reference: `two`\n   - ours: `2`\n\n"
    )


@pytest.mark.parametrize(
    "line, shown",
    [
        ("<script>alert(1)</script>", "`<script>alert(1)</script>`"),
        ("![](http://example.invalid/x.png)", "`![](http://example.invalid/x.png)`"),
        ("a `b` c", "``a `b` c``"),
        ("`x``", "``` `x`` ```"),
        ("", "``"),
    ],
)
def test_samples_are_code_spans_never_html_links_or_images(tmp_path, line, shown):
    """Issue 29: a sample translation is data; Markdown shows it as typed."""
    for name in ("src", "ref", "hyp"):
        (tmp_path / name).write_text(line + "\n")
    text = samples_markdown("en_de", *(str(tmp_path / n) for n in ("src", "ref", "hyp")), n=1)
    assert (
        text == f"### en_de\n\n1. source: {shown}\n   - reference: {shown}\n   - ours: {shown}\n\n"
    )
