"""BLEU: multi-bleu semantics, the paper-style text pipeline, sacreBLEU 13a, the score CLI.

Reference values come from shared/data/README.md section 5 (multi-bleu.perl
and sacreBLEU run on the same files); those tests skip when ../shared/data
(or $TRANSFORMER_CORE_SHARED_DATA) is absent.
"""

import json
import random
import subprocess
import sys

import pytest
from sacrebleu.metrics import BLEU
from shared_data import SHARED_DATA

from transformer_core.evaluation.bleu import (
    PaperTokenizer,
    multi_bleu,
    paper_bleu,
    replace_unicode_punctuation,
    sacrebleu_13a,
    split_compounds,
)
from transformer_core.files import read_lines

SHARED = SHARED_DATA
DATA = SHARED / "system_outputs"
TED = DATA / "compare_mt_ted"
WMT17 = DATA / "wmt17_newstest2017_ende"

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared test data not found at {DATA}")


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", *args], capture_output=True, text=True
    )


# --- multi-bleu semantics ---------------------------------------------------------------


def test_perfect_match_is_100():
    stats = multi_bleu(["a b c d e", "f g h i"], ["a b c d e", "f g h i"])
    assert stats.bleu == pytest.approx(100.0)
    assert stats.counts == (9, 7, 5, 3) and stats.totals == (9, 7, 5, 3)
    assert stats.bp == 1.0 and stats.ratio == 1.0


def test_zero_when_one_order_has_no_match():
    # 3-gram and 4-gram precision are 0: multi-bleu prints 0, no smoothing.
    stats = multi_bleu(["a b x c d"], ["a b y c d"])
    assert stats.counts[2:] == (0, 0)
    assert stats.bleu == 0.0


def test_clipping_and_brevity_penalty_by_hand():
    stats = multi_bleu(["the cat the cat sat on"], ["the cat sat on the mat"])
    # unigrams: the x2 (ref has 2), cat x2 (ref 1), sat, on -> 2 + 1 + 1 + 1 = 5 of 6
    assert stats.counts[0] == 5 and stats.totals[0] == 6
    # equal lengths: no penalty
    assert stats.bp == 1.0
    short = multi_bleu(["the cat sat on"], ["the cat sat on the mat"])
    assert short.counts == (4, 3, 2, 1)
    assert short.bp == pytest.approx(2.718281828459045 ** (1 - 6 / 4))
    assert short.bleu == pytest.approx(100 * short.bp)


def test_case_sensitive_and_ascii_whitespace_only():
    assert multi_bleu(["The cat sat on"], ["the cat sat on"]).counts[0] == 3
    # Perl's split leaves a no-break space inside its token.
    assert multi_bleu(["a\u00a0b c d e"], ["a b c d e"]).hyp_len == 4


def test_empty_output_scores_zero():
    stats = multi_bleu(["", ""], ["a b", "c d"])
    assert stats.bleu == 0.0 and stats.hyp_len == 0 and stats.ref_len == 4


def test_agrees_with_sacrebleu_without_tokenization_or_smoothing():
    rng = random.Random(0)
    vocab = "a b c d e f".split()
    hyps = [" ".join(rng.choices(vocab, k=rng.randint(1, 12))) for _ in range(50)]
    refs = [" ".join(rng.choices(vocab, k=rng.randint(1, 12))) for _ in range(50)]
    ours = multi_bleu(hyps, refs)
    theirs = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(hyps, [refs])
    assert ours.bleu == pytest.approx(theirs.score)
    assert list(ours.counts) == theirs.counts and list(ours.totals) == theirs.totals
    assert ours.bp == pytest.approx(theirs.bp)


# --- paper-style text pipeline ------------------------------------------------------------


def test_compound_splitting_like_the_perl_one_liner():
    assert split_compounds("rich-text format") == "rich ##AT##-##AT## text format"
    # Matches do not overlap, as in perl's s{}{}g: the second hyphen stays.
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    assert split_compounds("a - b") == "a - b"
    assert split_compounds("28-jähriger") == "28 ##AT##-##AT## jähriger"


def test_paper_tokenizer_escapes_and_splits_compounds():
    # Expected strings are what the perl chain printed (tests/unit/test_bleu_moses.py has more).
    tokenize = PaperTokenizer("de")
    assert tokenize(replace_unicode_punctuation("Ein 28-jähriger Koch, sagte er…")) == (
        "Ein 28 ##AT##-##AT## jähriger Koch , sagte er ..."
    )
    assert tokenize("A&B <c> [d] |e| 'f'") == (
        "A &amp; B &lt; c &gt; &#91; d &#93; &#124; e &#124; &apos; f &apos;"
    )


# --- real system outputs -----------------------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    "system, bleu, precisions, bp, ratio, hyp_len",
    [
        ("sys1", 22.44, (59.7, 30.3, 17.2, 10.1), 0.947, 0.948, 45672),
        ("sys2", 24.04, (58.7, 31.9, 19.3, 12.0), 0.936, 0.938, 45207),
    ],
)
def test_multi_bleu_on_compare_mt_tokenized(system, bleu, precisions, bp, ratio, hyp_len):
    stats = multi_bleu(read_lines(TED / f"ted.{system}.eng"), read_lines(TED / "ted.ref.eng"))
    assert round(stats.bleu, 2) == bleu
    assert tuple(round(p, 1) for p in stats.precisions) == precisions
    assert (round(stats.bp, 3), round(stats.ratio, 3)) == (bp, ratio)
    assert (stats.hyp_len, stats.ref_len) == (hyp_len, 48183)


@needs_data
@pytest.mark.parametrize("system, bleu", [("sys1", 21.71), ("sys2", 23.05)])
def test_sacrebleu_on_compare_mt_detokenized(system, bleu):
    stats, _ = sacrebleu_13a(
        read_lines(TED / f"ted.{system}.detok.eng"), read_lines(TED / "ted.ref.detok.eng")
    )
    assert round(stats.bleu, 2) == bleu


@pytest.fixture(scope="module")
def wmt17_refs():
    return read_lines(WMT17 / "newstest2017-ende.ref.de.gz")


@needs_data
@pytest.mark.parametrize(
    "system, bleu", [("LMU-nmt-reranked.4934", 27.11), ("C-3MA.4959", 22.67), ("online-F.0", 15.45)]
)
def test_sacrebleu_on_wmt17_submissions(system, bleu, wmt17_refs):
    stats, signature = sacrebleu_13a(
        read_lines(WMT17 / f"newstest2017.{system}.en-de.gz"), wmt17_refs
    )
    assert round(stats.bleu, 2) == bleu
    assert signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")


@needs_data
def test_uedin_detail_and_paper_style(wmt17_refs):
    hyps = read_lines(WMT17 / "newstest2017.uedin-nmt.4722.en-de.gz")
    stats, _ = sacrebleu_13a(hyps, wmt17_refs)
    assert str(stats) == (
        "BLEU = 28.30, 59.9/34.0/21.8/14.4 (BP=1.000, ratio=1.026, hyp_len=62873, ref_len=61287)"
    )
    # multi-bleu.perl after the perl chain printed 28.46 (tests/fixtures/bleu_moses).
    assert round(paper_bleu(hyps, wmt17_refs, "de").bleu, 2) == 28.46


# --- the score command -------------------------------------------------------------------


@needs_data
def test_score_cli_writes_both_variants(tmp_path, monkeypatch):
    hyps = read_lines(TED / "ted.sys1.detok.eng")[:300]
    refs = read_lines(TED / "ted.ref.detok.eng")[:300]
    hyp, ref, out = tmp_path / "hyp.txt", tmp_path / "ref.txt", tmp_path / "bleu.json"
    hyp.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    proc = _cli("score", "--hyp", str(hyp), "--ref", str(ref), "--out", str(out), "--lang", "en")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    paper = paper_bleu(hyps, refs, "en")
    sacre, signature = sacrebleu_13a(hyps, refs)
    assert result["bleu_paper_style"] == pytest.approx(paper.bleu)
    assert result["sacrebleu"] == pytest.approx(sacre.bleu)
    assert result["sacrebleu_signature"] == signature
    assert result["n_lines"] == 300
    assert result["counts"] == list(paper.counts) and result["bp"] == pytest.approx(paper.bp)
    assert (result["hyp_len"], result["ref_len"]) == (paper.hyp_len, paper.ref_len)
    assert result["ratio"] == pytest.approx(paper.ratio)
    assert result["sacrebleu_stats"]["counts"] == list(sacre.counts)
    # each variant's 95% interval, by sacreBLEU's bootstrap with its default seed
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    scored = BLEU().corpus_score(hyps, [refs], n_bootstrap=1000)
    assert result["sacrebleu_ci"]["resamples"] == 1000 and result["sacrebleu_ci"]["seed"] == 12345
    assert result["sacrebleu_ci"]["half_width"] == pytest.approx(scored._ci)
    assert result["bleu_paper_style_ci"]["score"] == pytest.approx(paper.bleu)
    assert 0 < result["bleu_paper_style_ci"]["half_width"] < 5


def test_score_cli_line_mismatch_names_both_files(tmp_path):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a b\nc d\n")
    ref.write_text("a b\n")
    out = tmp_path / "bleu.json"
    proc = _cli("score", "--hyp", str(hyp), "--ref", str(ref), "--out", str(out))
    assert proc.returncode == 2
    assert str(hyp) in proc.stderr and str(ref) in proc.stderr
    assert f"{hyp}: 2," in proc.stderr and f"{ref}: 1" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
