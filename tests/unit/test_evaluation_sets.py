"""Tables that say what they are (issue 31): the notes name the configuration's dev and test
sets, and the paper's columns are labelled as WMT14 values where the data is not WMT14."""

import subprocess
import sys

import pytest

from transformer_core.errors import ConfigError
from transformer_core.tables.evaluation_sets import (
    datasets_of,
    paper_labels,
    set_name,
    table2_notes,
    table3_notes,
)


def test_set_names_come_from_the_registry():
    data = datasets_of([("en_de", "multi30k_en_de"), ("wmt", "wmt14_en_de"), ("x", "smoke_en_fr")])
    assert set_name(data["en_de"], "dev") == "multi30k-val"
    assert set_name(data["en_de"], "test") == "multi30k-test_2016_flickr"
    assert set_name(data["wmt"], "dev") == "newstest2013"
    assert set_name(data["x"], "test") == "the generated test section of smoke_en_fr"
    with pytest.raises(ConfigError, match="wmt99"):
        datasets_of([("en_de", "wmt99")])


def test_multi30k_notes_name_its_sets_and_label_the_paper_columns():
    data = datasets_of([("en_de", "multi30k_en_de")])
    notes = " ".join(table3_notes("en_de", data["en_de"]))
    assert "on multi30k-val" in notes and "newstest2013" in notes  # the paper's, labelled
    assert "not comparable" in notes
    notes2 = " ".join(table2_notes(data))
    assert "multi30k-test_2016_flickr" in notes2 and "WMT14 newstest2014" in notes2
    assert paper_labels(data, ("paper_bleu",)) == {"paper_bleu": "paper_bleu (paper, WMT14)"}


def test_wmt14_notes_leave_the_paper_columns_as_they_are():
    data = datasets_of([("en_de", "wmt14_en_de"), ("en_fr", "wmt14_en_fr")])
    notes = table3_notes("en_de", data["en_de"])
    assert len(notes) == 1 and "on newstest2013" in notes[0]
    assert "not comparable" not in " ".join(table2_notes(data))
    assert paper_labels(data, ("paper_bleu",)) == {}
    # WMT14 data under another pair name is not the paper's EN-DE task
    assert paper_labels(datasets_of([("de_en", "wmt14_en_de")]), ("paper_bleu",))


def test_table3_command_writes_the_notes_and_labels(tmp_path):
    row = tmp_path / "base.csv"
    row.write_text(
        "row,N,d_model,d_ff,h,d_k,d_v,P_drop,eps_ls,positional,steps,train_precision,seeds,"
        "ppl_dev,ppl_dev_std,ppl_dev_per_seed,bleu_dev,bleu_dev_ci95,bleu_dev_std,"
        "bleu_dev_per_seed,sacrebleu_dev,sacrebleu_dev_ci95,sacrebleu_dev_std,"
        "sacrebleu_dev_per_seed,params_m,params_m_at_37k,paper_ppl,paper_bleu,paper_params\n"
        "base,3,256,1024,8,32,32,0.1,0.1,sinusoid,1600,bf16,1,6.4,,1:6.4,38.0,1.5,,1:38.0,"
        "37.9,1.5,,1:37.9,9.9,15.0,4.92,25.8,65\n"
    )
    md = tmp_path / "t3.md"
    command = [sys.executable, "-m", "transformer_core", "table3", "--rows", str(row)]
    outputs = ["--out", str(tmp_path / "t3.csv"), "--markdown", str(md)]
    subprocess.run([*command, "--dataset", "en_de", "multi30k_en_de", *outputs], check=True)
    text = md.read_text()
    assert "| paper_ppl (paper, WMT14) | paper_bleu (paper, WMT14) |" in text
    assert "on multi30k-val" in text and "PPL is per word piece, on newstest2013" not in text
    proc = subprocess.run(
        [*command, "--dataset", "en_de", "wmt99", *outputs], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "wmt99" in proc.stderr and "Traceback" not in proc.stderr
