"""Paper-style BLEU against the real Moses perl chain of get_ende_bleu.sh.

tests/fixtures/bleu_moses/perl_chain.json holds what the perl scripts produced on
every file in shared/data/system_outputs: the md5 of each intermediate file and
the line multi-bleu.perl printed (the fixture names the Moses commits). The
scripts themselves are not in the repository. The tests that read the system
outputs skip when ../shared/data (or $TRANSFORMER_CORE_SHARED_DATA) is absent.

The unit tests below pin the known differences between sacremoses and the perl
scripts; each expected string is what the perl scripts printed for that input.
"""

import hashlib
import json
from pathlib import Path

import pytest
from conftest import ROOT
from sacremoses import MosesPunctNormalizer, MosesTokenizer
from shared_data import SHARED_DATA

from transformer_core.evaluation.bleu import (
    PaperTokenizer,
    paper_bleu,
    replace_unicode_punctuation,
    split_compounds,
)
from transformer_core.files import read_lines

FIXTURE = json.loads(
    (ROOT / "tests" / "fixtures" / "bleu_moses" / "perl_chain.json").read_text("utf-8")
)
DATA = SHARED_DATA / "system_outputs"

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared test data not found at {DATA}")


def _md5(lines: list[str]) -> str:
    return hashlib.md5("".join(f"{line}\n" for line in lines).encode("utf-8")).hexdigest()


@needs_data
@pytest.mark.parametrize("path", sorted(FIXTURE["references"]))
def test_reference_tokenization_is_byte_identical(path):
    expected = FIXTURE["references"][path]
    tokenizer = PaperTokenizer(expected["lang"])
    tok = [tokenizer.moses(line) for line in read_lines(DATA / path)]
    assert _md5(tok) == expected["tok_md5"]
    assert _md5([split_compounds(line) for line in tok]) == expected["atat_md5"]


@needs_data
@pytest.mark.parametrize("system", FIXTURE["systems"], ids=lambda s: Path(s["hyp"]).name)
def test_hypothesis_chain_and_bleu_match_perl(system):
    hyps = read_lines(DATA / system["hyp"])
    tokenizer = PaperTokenizer(system["lang"])
    punct = [replace_unicode_punctuation(line) for line in hyps]
    tok = [tokenizer.moses(line) for line in punct]
    assert _md5(punct) == system["punct_md5"]
    assert _md5(tok) == system["tok_md5"]
    assert _md5([split_compounds(line) for line in tok]) == system["atat_md5"]
    refs = read_lines(DATA / system["ref"])
    # The whole line multi-bleu.perl printed: BLEU to 0.01, precisions, BP, lengths.
    assert str(paper_bleu(hyps, refs, system["lang"])) == system["multi_bleu"]


# --- known differences between sacremoses and the perl scripts, and how they are handled ---


def test_low_quote_is_left_alone_and_only_the_hypothesis_is_normalized():
    # replace-unicode-punctuation.perl has no rule for „: it stays, where a mapping to " would
    # differ from the script.
    assert replace_unicode_punctuation("„Endlich“ ging es…") == '„Endlich" ging es...'
    hyp = PaperTokenizer("de")(replace_unicode_punctuation("„Endlich“ ging es bergauf."))
    assert hyp == "„ Endlich &quot; ging es bergauf ."
    # The reference keeps its typographic quotes.
    assert PaperTokenizer("de")("„Endlich“ ging es.") == "„ Endlich “ ging es ."


def test_fullwidth_one_becomes_a_quote_as_in_the_perl_script():
    assert replace_unicode_punctuation("１２") == '"2'
    assert MosesPunctNormalizer("de").replace_unicode_punct("１２") == "12"


def test_only_spaces_after_ideographic_full_stop_are_eaten():
    assert replace_unicode_punctuation("Ende。\tDa") == "Ende. \tDa"
    assert MosesPunctNormalizer("de").replace_unicode_punct("Ende。\tDa") == "Ende. Da"


def test_blank_line_is_printed_unchanged():
    assert PaperTokenizer("de").moses("  ") == "  "
    assert MosesTokenizer("de").tokenize("  ", return_str=True) == ""


def test_control_characters_1c_to_1f_are_deleted_not_spaced():
    assert PaperTokenizer("de").moses("a\x1fb c") == "ab c"
    assert MosesTokenizer("de").tokenize("a\x1fb c", return_str=True) == "a b c"


def test_letters_missing_from_sacremoses_alnum_table_stay_in_their_word():
    assert PaperTokenizer("de").moses("中国 ist groß.") == "中国 ist groß ."
    assert MosesTokenizer("de").tokenize("中国 ist groß.", return_str=True) == "中 国 ist groß ."


def test_known_gap_number_table_in_comma_rule():
    # Not handled: sacremoses' IsN, IsAlpha and IsLower tables (comma, apostrophe and
    # non-breaking-prefix rules) lack characters Perl has. tokenizer.perl gives "〇,5".
    assert PaperTokenizer("de").moses("〇,5") == "〇 , 5"


def test_final_dot_after_prefix_kept_as_before_2018_11_07():
    # tokenizer.perl after moses-smt/mosesdecoder#204 (2018-11-07) gives "5 Mio ."
    assert PaperTokenizer("de").moses("Das kostet 5 Mio.") == "Das kostet 5 Mio."
