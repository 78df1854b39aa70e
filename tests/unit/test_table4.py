"""Table 4 from result files: EVALB scores of our runs beside the paper's rows, 'not run' rows, CLI."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from transformer_core.errors import UserError
from transformer_core.paper import TABLE4
from transformer_core.parsing.evalb import evalb
from transformer_core.tables.table4 import TABLE4_COLUMNS, table4

GOLD = [
    "(TOP (S (NP (DT the) (NN dog)) (VP (VBD barked) (PP (IN at) (NP (DT the) (NN cat)))) (. .)))",
    "(TOP (S (NP (PRP she)) (VP (VBD slept)) (. .)))",
]
TEST = [  # the PP labelled NP: 4 of 5 brackets right in the first sentence, 3 of 3 in the second
    "(TOP (S (NP (DT the) (NN dog)) (VP (VBD barked) (NP (IN at) (NP (DT the) (NN cat)))) (. .)))",
    "(TOP (S (NP (PRP she)) (VP (VBD slept)) (. .)))",
]


def write(path, data):
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def run_files(tmp_path):
    scores = write(tmp_path / "evalb.json", evalb(GOLD, TEST).as_dict())
    summary = write(
        tmp_path / "summary.json",
        {"wall_seconds": 1800, "device": "NVIDIA H200", "devices": 1, "steps": 100000},
    )
    return tmp_path, scores, summary


def test_our_row_beside_the_papers_and_not_run_rows(run_files):
    _, scores, summary = run_files
    table = table4(
        [{"setting": "wsj_only", "seed": "1", "evalb": scores, "summary": summary}], "wsj"
    )
    assert list(table.columns) == TABLE4_COLUMNS
    assert list(zip(table.parser, table.training, strict=True)) == [
        (r.parser, r.training) for r in TABLE4
    ]
    ours = table[table.source == "ours"].set_index("training")
    run = ours.loc["WSJ only, discriminative"]
    # 8 gold and 8 test brackets (TOP and punctuation are not counted), 7 match
    assert run.status == "run" and run.treebank == "wsj" and run.paper_f1 == 91.3
    assert run.recall == pytest.approx(87.5) and run.f1 == pytest.approx(87.5)
    assert run.f1_len_le_40 == run.f1 and run.test_sentences == 2 and run.steps == 100000
    assert run.train_hours == 0.5 and run.device == "NVIDIA H200" and run.devices == 1
    semi = ours.loc["semi-supervised"]
    assert semi.status == "not run" and semi.paper_f1 == 92.7 and pd.isna(semi.f1)
    literature = table[table.source == "paper"]
    assert len(literature) == 10 and literature.status.isna().all()
    assert literature.paper_f1.tolist()[:4] == [88.3, 90.4, 90.4, 91.7]


def test_both_settings_and_short_sentences(run_files):
    tmp_path, scores, summary = run_files
    long_gold = "(TOP (S " + " ".join(f"(NN w{i})" for i in range(45)) + "))"
    long_test = "(TOP (NP " + " ".join(f"(NN w{i})" for i in range(45)) + "))"
    mixed = write(tmp_path / "mixed.json", evalb([*GOLD, long_gold], [*TEST, long_test]).as_dict())
    table = table4(
        [
            {"setting": "semi_supervised", "seed": "1", "evalb": mixed, "summary": summary},
            {"setting": "wsj_only", "seed": "1", "evalb": scores, "summary": summary},
        ],
        "nltk",
    )
    ours = table[table.source == "ours"].set_index("training")
    assert (ours.status == "run").all() and (ours.treebank == "nltk").all()
    semi = ours.loc["semi-supervised"]
    assert semi.f1_len_le_40 == pytest.approx(87.5)  # the 45-word sentence is left out
    assert semi.f1 == pytest.approx(100 * 7 / 9) and semi.test_sentences == 3


def test_seeds_make_one_row_with_the_mean_beside_each_value(run_files):
    tmp_path, scores, summary = run_files
    flat = [
        "(TOP (S (NP (DT the) (NN dog)) (VBD barked) (IN at) (DT the) (NN cat) (. .)))",
        TEST[1],
    ]
    worse = write(tmp_path / "worse.json", evalb(GOLD, flat).as_dict())
    slower = write(
        tmp_path / "slower.json",
        {"wall_seconds": 3600, "device": "NVIDIA H200", "devices": 1, "steps": 100000},
    )
    table = table4(
        [
            {"setting": "wsj_only", "seed": "1", "evalb": scores, "summary": summary},
            {"setting": "wsj_only", "seed": "2", "evalb": worse, "summary": slower},
        ],
        "wsj",
    )
    run = table[table.source == "ours"].set_index("training").loc["WSJ only, discriminative"]
    one, two = (evalb(GOLD, t).as_dict()["all"]["f1"] for t in (TEST, flat))
    assert one == pytest.approx(87.5) and two < one
    assert run.seeds == "1 2" and run.f1 == pytest.approx((one + two) / 2)
    assert run.f1_per_seed == f"1:{one:.2f} 2:{two:.2f}" and run.f1_std > 0
    assert run.train_hours == 0.75


def test_an_empty_short_sentence_f1_stays_empty(run_files):
    tmp_path, _, summary = run_files
    totals = {"f1": 50.0, "recall": 50.0, "precision": 50.0, "valid_sentences": 2}
    short = {**totals, "f1": None}  # EVALB's nan: no bracket in the sentences of <= 40 words
    scores = write(tmp_path / "e.json", {"all": totals, "cutoff_len": 40, "len<=40": short})
    table = table4(
        [{"setting": "wsj_only", "seed": s, "evalb": scores, "summary": summary} for s in "12"],
        "wsj",
    )
    run = table[table.source == "ours"].iloc[0]
    assert run.f1 == 50.0 and pd.isna(run.f1_len_le_40)


def test_errors_name_the_problem(run_files):
    tmp_path, scores, summary = run_files
    with pytest.raises(UserError, match="unknown setting 'multi_task'"):
        table4([{"setting": "multi_task", "seed": "1", "evalb": scores, "summary": summary}], "wsj")
    with pytest.raises(UserError, match="seed 1 given twice for wsj_only"):
        table4(
            [{"setting": "wsj_only", "seed": "1", "evalb": scores, "summary": summary}] * 2, "wsj"
        )
    with pytest.raises(UserError, match="missing.json"):
        table4(
            [
                {
                    "setting": "wsj_only",
                    "seed": "1",
                    "evalb": str(tmp_path / "missing.json"),
                    "summary": summary,
                }
            ],
            "wsj",
        )
    bleu = write(tmp_path / "score.json", {"bleu_paper_style": 27.3})
    with pytest.raises(UserError, match="lacks key.*all"):
        table4([{"setting": "wsj_only", "seed": "1", "evalb": bleu, "summary": summary}], "wsj")
    other = json.loads((tmp_path / "evalb.json").read_text()) | {"cutoff_len": 100}
    with pytest.raises(UserError, match="cutoff_len is 100"):
        table4(
            [
                {
                    "setting": "wsj_only",
                    "seed": "1",
                    "evalb": write(tmp_path / "o.json", other),
                    "summary": summary,
                }
            ],
            "wsj",
        )


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", "table4", *args], capture_output=True, text=True
    )


def test_cli_writes_csv_and_markdown(run_files):
    tmp_path, scores, summary = run_files
    out, md = tmp_path / "table4.csv", tmp_path / "table4.md"
    proc = cli(
        "--result",
        "wsj_only",
        "1",
        scores,
        summary,
        "--treebank",
        "smoke",
        "--out",
        str(out),
        "--markdown",
        str(md),
    )
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(out)
    assert table.shape == (12, len(TABLE4_COLUMNS))
    assert table.status.tolist().count("not run") == 1 and table.status.tolist().count("run") == 1
    text = md.read_text()
    assert (
        "| ours | Transformer (4 layers) | WSJ only, discriminative | run | smoke | 1 | 87.50 |"
        in text
    )
    assert "| 2 | 91.30 | 100000 | 0.50 | NVIDIA H200 | 1 |" in text  # counts stay integers
    assert "f1_per_seed" not in text  # one seed: no per-seed column to read
    assert "not comparable with our F1" in text and "beam 21, alpha 0.3" in text
    assert "| paper_f1 (paper, WSJ section 23) |" in text  # issue 31: labelled as the paper's
    wsj = cli(
        "--result",
        "wsj_only",
        "1",
        scores,
        summary,
        "--treebank",
        "wsj",
        "--out",
        str(out),
        "--markdown",
        str(md),
    )
    assert (
        wsj.returncode == 0
        and "not comparable" not in md.read_text()
        and "empty f1" not in md.read_text()
    )
    assert "repair output that is not a well-formed tree" in md.read_text()
    # The note says how the rows decoded: the workflow passes table4.decode's search.
    constrained = cli(
        "--result", "wsj_only", "1", scores, summary, "--treebank", "nltk", "--out", str(out),
        "--markdown", str(md), "--beam", "21", "--alpha", "2.0", "--tree-constraint", "words",
    )  # fmt: skip
    assert constrained.returncode == 0, constrained.stderr
    note = md.read_text()
    assert "beam 21, alpha 2 and a maximum output length of input + 300" in note
    assert "tree constraint, linearization words" in note and "repair" not in note
    # a flat prediction (what delinearize makes of an empty output) has no bracket EVALB counts
    nothing = write(
        tmp_path / "nothing.json", evalb(GOLD[1:], ["(TOP (PRP she) (VBD slept) (. .))"]).as_dict()
    )
    assert (
        cli(
            "--result",
            "wsj_only",
            "1",
            nothing,
            summary,
            "--treebank",
            "wsj",
            "--out",
            str(out),
            "--markdown",
            str(md),
        ).returncode
        == 0
    )
    assert pd.read_csv(out).f1.isna().all() and "empty f1 in a row that ran" in md.read_text()


def test_cli_without_results_and_with_a_missing_file(tmp_path):
    out = tmp_path / "table4.csv"
    assert cli("--treebank", "wsj", "--out", str(out)).returncode == 0
    assert pd.read_csv(out).status.tolist().count("not run") == 2
    proc = cli(
        "--result",
        "wsj_only",
        "1",
        str(tmp_path / "none.json"),
        str(tmp_path / "s.json"),
        "--treebank",
        "wsj",
        "--out",
        str(out),
    )
    assert proc.returncode == 2 and "none.json" in proc.stderr and "Traceback" not in proc.stderr
