"""EVALB re-implementation: EVALB's own fixtures, COLLINS.prm semantics, the evalb CLI."""

import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest
from shared_data import SHARED_DATA

from transformer_core.errors import UserError
from transformer_core.files import read_lines
from transformer_core.parsing.evalb import EvalbError, EvalbParams, evalb, score_sentence

SHARED = SHARED_DATA
EVALB_DIR = SHARED / "ptb" / "evalb"
needs_fixtures = pytest.mark.skipif(
    not EVALB_DIR.is_dir(), reason=f"EVALB fixtures not found at {EVALB_DIR}"
)
COLLINS = EvalbParams()


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", *args], capture_output=True, text=True
    )


# --- EVALB's own regression fixtures ----------------------------------------------------


@needs_fixtures
def test_sample_fixture_reproduced_exactly():
    result = evalb(
        read_lines(EVALB_DIR / "sample_sample.gld"),
        read_lines(EVALB_DIR / "sample_sample.tst"),
        EvalbParams.read(EVALB_DIR / "sample_sample.prm"),
    )
    expected = (EVALB_DIR / "sample_sample.rsl").read_text()
    # The fixture predates the "Bracketing FMeasure" lines that EVALB prints since.
    ours = "".join(
        line
        for line in result.report().splitlines(True)
        if not line.startswith("Bracketing FMeasure")
    )
    assert ours == expected
    assert (result.all.match, result.all.gold_brackets, result.all.test_brackets) == (86, 98, 95)
    assert f"{result.all.recall:.2f} {result.all.precision:.2f}" == "87.76 90.53"
    assert result.error_messages() == [
        "12 : Words unmatch (is|was)",
        "13 : Length unmatch (4|5)",
        "16 : Length unmatch (4|5)",
        "17 : Length unmatch (4|6)",
        "20 : Words unmatch (this|That)",
    ]


@needs_fixtures
def test_bug_fixture_matches_rsl_new_with_quote_labels():
    result = evalb(
        read_lines(EVALB_DIR / "bug_bug.gld"),
        read_lines(EVALB_DIR / "bug_bug.tst"),
        EvalbParams.read(EVALB_DIR / "new.prm"),
    )
    # rsl-new lost its leading spaces; compare the fields of every line.
    expected = [line.split() for line in (EVALB_DIR / "bug_bug.rsl-new").read_text().splitlines()]
    assert [line.split() for line in result.report().splitlines()] == expected
    assert f"{result.all.f1:.2f}" == "60.17" and result.error_messages() == []


@needs_fixtures
def test_bug_fixture_without_quote_labels_is_all_length_errors():
    params = replace(EvalbParams.read(EVALB_DIR / "new.prm"), quote_labels=())
    result = evalb(
        read_lines(EVALB_DIR / "bug_bug.gld"), read_lines(EVALB_DIR / "bug_bug.tst"), params
    )
    assert [r.status for r in result.sentences] == [1] * 5
    assert math.isnan(result.all.f1) and "FMeasure       =    nan" in result.report()


@needs_fixtures
def test_collins_prm_file_equals_the_builtin_defaults():
    assert EvalbParams.read(EVALB_DIR / "COLLINS.prm") == COLLINS


# --- COLLINS.prm semantics on small cases ------------------------------------------------


def _one(gold, test, params=COLLINS):
    return score_sentence(1, gold, test, params)


def test_punctuation_top_and_function_tags_are_ignored():
    gold = "(TOP (S (NP-SBJ-1 (DT The) (NN dog)) (, ,) (VP (VBD barked)) (. .)))"
    test = "(S (NP (DT The) (NN dog)) (, ,) (VP (VBD barked)) (. .))"
    r = _one(gold, test)
    assert (r.match, r.gold_brackets, r.test_brackets, r.words, r.length) == (3, 3, 3, 3, 5)


def test_advp_and_prt_are_equivalent_but_labels_matter_otherwise():
    gold = "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))"
    assert _one(gold, gold.replace("(PRT", "(ADVP")).match == 4
    r = _one(gold, gold.replace("(PRT", "(NP"))
    assert (r.match, r.gold_brackets) == (3, 4)
    assert _one(gold, gold.replace("(PRT", "(NP"), replace(COLLINS, labeled=False)).match == 4


def test_traces_do_not_count_for_brackets_or_length():
    gold = "(S (NP (-NONE- *)) (NP (PRP He)) (VP (VBD left)))"
    r = _one(gold, "(S (NP (PRP He)) (VP (VBD left)))")
    assert (r.match, r.gold_brackets, r.length, r.status) == (3, 3, 2, 0)


def test_crossing_brackets_and_tagging():
    gold = "(S (NP (DT a) (NN b)) (VP (VBD c) (NP (DT d))))"
    test = "(S (DT a) (X (NN b) (VBD c)) (NP (DT d)))"
    r = _one(gold, test)
    # X = [1,3) crosses NP = [0,2) and VP = [2,4): one crossing test bracket.
    assert (r.match, r.gold_brackets, r.test_brackets, r.crossing) == (2, 4, 3, 1)
    assert r.correct_tags == 4


def test_each_gold_bracket_matches_one_test_bracket():
    r = _one("(S (NP (NP (DT a))) (VP (VBD b)))", "(S (NP (DT a)) (VP (VBD b)))")
    assert (r.match, r.gold_brackets, r.test_brackets) == (3, 4, 3)


def test_skip_and_error_sentences_are_not_counted():
    result = evalb(
        ["(S (NP (DT a)) (VP (VBD b)))"] * 3,
        ["", "(S (NP (DT a)) (VP (VBD c)))", "(S (NP (DT a)) (VP (VBD b)))"],
    )
    assert [r.status for r in result.sentences] == [2, 1, 0]
    assert (result.all.skipped, result.all.errors, result.all.valid) == (1, 1, 1)
    assert result.all.gold_brackets == 3 and result.all.f1 == 100.0


def test_cutoff_length_statistics():
    short, long = "(S (NP (DT a)))", "(S " + " ".join(["(NP (DT a))"] * 41) + ")"
    result = evalb([short, long], [short, long])
    assert (result.all.sentences, result.cutoff.sentences) == (2, 1)
    assert "-- len<=40 --" in result.report()


def test_evalb_gives_up_after_max_error_errors():
    gold, bad = "(S (NP (DT a)))", "(S (NP (DT b)))"
    evalb([gold] * 11, [bad] * 11)  # 11 errors: EVALB goes on
    with pytest.raises(EvalbError, match="MAX_ERROR=10.*line 12: Words unmatch"):
        evalb([gold] * 12, [bad] * 12)


def test_prm_errors_name_file_and_line(tmp_path):
    prm = tmp_path / "bad.prm"
    prm.write_text("# comment\nLABELED 1\nEQ_LABEL ADVP\n")
    with pytest.raises(UserError, match="bad.prm:3: EQ_LABEL needs two values"):
        EvalbParams.read(prm)
    prm.write_text("CUTOF_LEN 40\n")
    with pytest.raises(UserError, match="bad.prm:1: unknown EVALB parameter 'CUTOF_LEN'"):
        EvalbParams.read(prm)


# --- the evalb command ------------------------------------------------------------------


@needs_fixtures
def test_evalb_cli_report_and_json(tmp_path):
    report, summary = tmp_path / "report.txt", tmp_path / "f1.json"
    proc = _cli(
        "evalb",
        "--gold", str(EVALB_DIR / "sample_sample.gld"),
        "--test", str(EVALB_DIR / "sample_sample.tst"),
        "--prm", str(EVALB_DIR / "sample_sample.prm"),
        "--out", str(report),
        "--json", str(summary),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == report.read_text()
    assert "Bracketing Recall         =  87.76" in proc.stdout
    assert "12 : Words unmatch (is|was)" in proc.stderr
    numbers = json.loads(summary.read_text())
    assert round(numbers["all"]["precision"], 2) == 90.53
    assert round(numbers["len<=40"]["recall"], 2) == 81.25


def test_evalb_cli_line_mismatch(tmp_path):
    gold, test = tmp_path / "g", tmp_path / "t"
    gold.write_text("(S (NP (DT a)))\n(S (NP (DT a)))\n")
    test.write_text("(S (NP (DT a)))\n")
    proc = _cli("evalb", "--gold", str(gold), "--test", str(test))
    assert proc.returncode == 2
    assert f"gold {gold}: 2, test {test}: 1" in proc.stderr and "Traceback" not in proc.stderr
