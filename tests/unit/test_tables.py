"""Tables 2 and 3 from result files: our values beside the paper's, clear errors for missing inputs."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from transformer_core.errors import UserError
from transformer_core.figures.table3_deltas import plot_deltas
from transformer_core.model.config import model_config
from transformer_core.model.transformer import parameter_count
from transformer_core.tables.deltas import BASE, add_deltas
from transformer_core.tables.markdown import markdown_view, to_markdown, write_table
from transformer_core.tables.translation import table2, table3, table3_row


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
            "bleu_paper_style_ci": {"score": 27.9, "mean": 27.8, "half_width": 0.6},
            "sacrebleu_ci": {"score": 27.1, "mean": 27.0, "half_width": 0.5},
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
    table = table2(
        [{"model": "base", "pair": "en_de", "seed": 1, "score": score, "summary": summary}]
    )
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
        table2([{"model": "base", "pair": "en_xx", "seed": 1, "score": score, "summary": summary}])
    with pytest.raises(UserError, match="missing.json"):
        table2(
            [
                {
                    "model": "base",
                    "pair": "en_de",
                    "seed": 1,
                    "score": str(tmp_path / "missing.json"),
                    "summary": summary,
                }
            ]
        )
    bad = write(tmp_path / "bad.json", {"sacrebleu": 1})
    with pytest.raises(UserError, match="bleu_paper_style"):
        table2([{"model": "base", "pair": "en_de", "seed": 1, "score": bad, "summary": summary}])


def test_table3_row_needs_a_dev_perplexity(results, tmp_path):
    _, score, summary = results
    data = json.loads(open(summary).read())
    data["dev_ppl"] = None
    no_dev = write(tmp_path / "nodev.json", data)
    with pytest.raises(UserError, match="no dev perplexity"):
        table3_row("base", [{"seed": 1, "score": score, "summary": no_dev}])


def test_table3_row_and_assembly(results):
    tmp_path, score, summary = results
    row = table3_row("C4", [{"seed": 1, "score": score, "summary": summary}])
    assert row.iloc[0].d_model == 256 and row.iloc[0].d_k == 32 and row.iloc[0].paper_params == 28
    assert row.iloc[0].ppl_dev == 5.5
    # the vocabulary arithmetic equals an exact count of the model at 37000
    assert row.iloc[0].params_m_at_37k * 1e6 == pytest.approx(
        parameter_count(model_config("C4", vocab_size=37000))
    )
    write_table(row, tmp_path / "C4.csv")
    write_table(
        table3_row("base", [{"seed": 1, "score": score, "summary": summary}]), tmp_path / "base.csv"
    )
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
            "1",
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


def test_table2_intervals_and_seeds(results, tmp_path):
    _, score, summary = results
    other = json.loads(open(score).read())
    other.update(bleu_paper_style=28.9, sacrebleu=28.1)
    other["sacrebleu_ci"]["half_width"] = 0.7
    second = write(tmp_path / "score2.json", other)
    one = table2(
        [{"model": "base", "pair": "en_de", "seed": 1, "score": score, "summary": summary}]
    )
    assert one.iloc[0].sacrebleu_ci95 == 0.5 and pd.isna(one.iloc[0].sacrebleu_std)
    runs = [
        {"model": "base", "pair": "en_de", "seed": 1, "score": score, "summary": summary},
        {"model": "base", "pair": "en_de", "seed": 2, "score": second, "summary": summary},
    ]
    ours = table2(runs).iloc[0]  # two seeds, one row
    assert ours.seeds == "1 2" and ours.sacrebleu == pytest.approx(27.6)
    assert ours.sacrebleu_ci95 == pytest.approx(0.6) and ours.sacrebleu_std == pytest.approx(
        0.7071, abs=1e-4
    )
    assert ours.sacrebleu_per_seed == "1:27.10 2:28.10"
    assert (table2(runs).source == "ours").sum() == 1
    with pytest.raises(UserError, match="seed 1 given twice"):
        table2([runs[0], runs[0]])
    view = markdown_view(table2(runs))
    assert view.iloc[0].sacrebleu == "27.60 ±0.60 (sd 0.71)" and "sacrebleu_ci95" not in view
    assert "sacrebleu_per_seed" in view  # several seeds: per-seed values stay


def test_table3_deltas_and_p_values(results, tmp_path):
    _, score, summary = results
    refs = [f"the house number {i} is big and green" for i in range(60)]
    (tmp_path / "ref").write_text("".join(r + "\n" for r in refs))
    hyps = {
        "base": [r.replace("big", "small").replace("green", "red") for r in refs],
        "C4": refs,  # perfect: far better than base
        "D1": [r.replace("big", "small").replace("green", "red") for r in refs],  # base's output
    }
    translations = {}
    for row, lines in hyps.items():
        (tmp_path / f"{row}.txt").write_text("".join(line + "\n" for line in lines))
        translations[row] = {1: str(tmp_path / f"{row}.txt")}
        run = [{"seed": 1, "score": score, "summary": summary}]
        write_table(table3_row(row, run), tmp_path / f"{row}.csv")
    table = table3([str(tmp_path / f"{row}.csv") for row in hyps])
    table.loc[table.row == "C4", "bleu_dev"] = 100.0  # as its score file would say
    table = add_deltas(table, translations, tmp_path / "ref", "en", 200, 12345).set_index("row")
    assert pd.isna(table.loc["base", "bleu_dev_delta"])
    assert table.loc["C4", "bleu_dev_delta"] == pytest.approx(100.0 - 27.9)
    assert table.loc["C4", "bleu_dev_p"] < 0.05 and table.loc["D1", "sacrebleu_dev_p"] == 1.0
    assert table.loc["D1", "ppl_dev_delta"] == 0.0
    cells = markdown_view(table.reset_index()).set_index("row")
    assert cells.loc["C4", "bleu_dev_delta"].startswith("**+72.10 (p ")
    assert cells.loc["D1", "sacrebleu_dev_delta"] == "+0.00 (p 1.000)"
    plot_deltas(table.reset_index(), BASE, tmp_path / "deltas.png")
    assert (tmp_path / "deltas.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(UserError, match="no dev translation of row C4 with seed 1"):
        add_deltas(
            table3([str(tmp_path / "C4.csv"), str(tmp_path / "base.csv")]),
            {"base": translations["base"]},
            tmp_path / "ref",
            "en",
            200,
            1,
        )
