"""Tables 2 and 3 from result files: our values beside the paper's, clear errors for missing inputs."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from transformer_core.config import model_config
from transformer_core.errors import UserError
from transformer_core.model import parameter_count
from transformer_core.tables import table2, table3, table3_row, to_markdown, write_table


def write(path, data):
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def results(tmp_path):
    score = write(
        tmp_path / "score.json",
        {
            "bleu_paper_style": 27.9,
            "sacrebleu": 27.1,
            "sacrebleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        },
    )
    cfg = model_config("C4", vocab_size=1000)
    summary = write(
        tmp_path / "summary.json",
        {
            "wall_seconds": 7200,
            "device": "NVIDIA H200",
            "devices": 8,
            "steps": 100000,
            "flops_paper_method": 1.0e18,
            "flops_analytic": 5.0e17,
            "model_config": cfg.to_dict(),
            "params": parameter_count(cfg),
            "dev_ppl": 5.5,
        },
    )
    return tmp_path, score, summary


def test_table2_ours_beside_paper(results):
    _, score, summary = results
    table = table2([{"model": "base", "pair": "en_de", "score": score, "summary": summary}])
    ours = table[table.source == "ours"].iloc[0]
    assert (
        ours.model == "Transformer (base model)"
        and ours.paper_bleu == 27.3
        and ours.paper_flops == 3.3e18
    )
    assert ours.bleu_paper_style == 27.9 and ours.train_hours == 2.0 and ours.devices == 8
    literature = table[table.source == "paper"]
    assert set(literature.model) >= {"ByteNet", "GNMT + RL Ensemble", "Deep-Att + PosUnk"}
    assert len(literature) == 13  # 6 EN-DE + 7 EN-FR literature cells
    assert "Transformer (big)" not in set(literature.model)


def test_table2_errors_name_the_problem(results, tmp_path):
    _, score, summary = results
    with pytest.raises(UserError, match="unknown pair 'en_xx'"):
        table2([{"model": "base", "pair": "en_xx", "score": score, "summary": summary}])
    with pytest.raises(UserError, match="missing.json"):
        table2(
            [
                {
                    "model": "base",
                    "pair": "en_de",
                    "score": str(tmp_path / "missing.json"),
                    "summary": summary,
                }
            ]
        )
    bad = write(tmp_path / "bad.json", {"sacrebleu": 1})
    with pytest.raises(UserError, match="bleu_paper_style"):
        table2([{"model": "base", "pair": "en_de", "score": bad, "summary": summary}])


def test_table3_row_needs_a_dev_perplexity(results, tmp_path):
    _, score, summary = results
    data = json.loads(open(summary).read())
    data["dev_ppl"] = None
    no_dev = write(tmp_path / "nodev.json", data)
    with pytest.raises(UserError, match="no dev perplexity"):
        table3_row("base", score, no_dev)


def test_table3_row_and_assembly(results):
    tmp_path, score, summary = results
    row = table3_row("C4", score, summary)
    assert row.iloc[0].d_model == 256 and row.iloc[0].d_k == 32 and row.iloc[0].paper_params == 28
    assert row.iloc[0].ppl_dev == 5.5
    # the vocabulary arithmetic equals an exact count of the model at 37000
    assert row.iloc[0].params_m_at_37k * 1e6 == pytest.approx(
        parameter_count(model_config("C4", vocab_size=37000))
    )
    write_table(row, tmp_path / "C4.csv")
    write_table(table3_row("base", score, summary), tmp_path / "base.csv")
    table = table3([str(tmp_path / "C4.csv"), str(tmp_path / "base.csv")])
    assert list(table.row) == ["base", "C4"]  # the paper's order


def test_markdown_twin_and_cli(results):
    tmp_path, score, summary = results
    out = tmp_path / "t2.csv"
    md = tmp_path / "t2.md"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "table2",
            "--result",
            "base",
            "en_de",
            score,
            summary,
            "--out",
            str(out),
            "--markdown",
            str(md),
        ],
        check=True,
    )
    assert pd.read_csv(out).shape[0] == 14
    text = md.read_text()
    assert text.startswith("| source | model |") and "41.0" in text
    assert (
        to_markdown(pd.DataFrame([{"a": None, "b": 1.5, "c": 25.0, "d": 0.0}])).splitlines()[2]
        == "|  | 1.50 | 25 | 0.00 |"
    )
