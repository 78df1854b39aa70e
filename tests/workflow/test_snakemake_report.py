"""`snakemake --report` after the README quickstart alone: it must work, show what was built
and name what was not.

The quickstart builds Tables 2 and 3 only; the default target also has Table 4, the report
and the figures, whose files do not exist yet. The report must not fail on them
(workflow/rules/common.smk: reported).
"""

import re
import zipfile
from html import unescape

from conftest import SMOKE, snakemake


def test_report_after_the_quickstart(smoke_quickstart, tmp_path):
    assert smoke_quickstart.proc.returncode == 0, smoke_quickstart.proc.stderr[-5000:]
    report = tmp_path / "report.zip"
    proc = snakemake(smoke_quickstart.workdir, "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-5000:]
    with zipfile.ZipFile(report) as archive:
        names = archive.namelist()
        html = "".join(
            archive.read(n).decode("utf-8", "replace") for n in names if n.endswith(".html")
        )
    assert any(n.endswith("table2.csv") for n in names) and any(
        n.endswith("table3.csv") for n in names
    )
    assert any(n.endswith("table3_deltas.png") for n in names)  # built with Table 3
    assert not any(n.endswith("table4.csv") for n in names)
    for name in ("Tables 2, 3 and 4", "results/table4.csv", "not built", "attention_anaphora.png"):
        assert name in html, name
    # Issue 31: copied as printed, each "builds it" command runs this run's configuration
    # (without it, `snakemake results/table4.csv` starts the paper-scale one).
    text = visible_text(html)
    assert f"snakemake results/table4.csv --cores all --configfile {SMOKE} builds it" in text


def test_report_hints_carry_config_overrides(smoke_quickstart, tmp_path):
    """`--config` values are carried too, and `threads: auto` (which reads Snakemake's core
    count) does not stop a report made without --cores."""
    assert smoke_quickstart.proc.returncode == 0, smoke_quickstart.proc.stderr[-5000:]
    report = tmp_path / "report.zip"
    threads = "threads={train: auto, translate: auto, bleu_curve: auto, attention_figures: auto}"
    proc = snakemake(smoke_quickstart.workdir, "--report", str(report), "--config", threads)
    assert proc.returncode == 0, proc.stderr[-5000:]
    with zipfile.ZipFile(report) as archive:
        html = "".join(
            archive.read(n).decode("utf-8", "replace")
            for n in archive.namelist()
            if n.endswith(".html")
        )
    expected = f"snakemake results/table4.csv --cores all --configfile {SMOKE} --config '{threads}'"
    assert expected in visible_text(html)


def visible_text(html):
    """The report's text as a reader sees it: tags dropped, entities decoded, spaces joined."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))
