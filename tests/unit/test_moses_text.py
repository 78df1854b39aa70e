"""The Multi30k literature's text and score: lowercased, punctuation-normalized,
Moses-tokenized (data/moses.py), its inverse, and BLEU on it (evaluation/bleu.py), on the real
test_2016_flickr reference where the shared data is there."""

import gzip

import pytest
from shared_data import SHARED_DATA

from transformer_core.data.moses import detokenize, lowercased_tokenized, tokenize
from transformer_core.evaluation.bleu import (
    lowercased_tokenized_bleu,
    multi_bleu,
    score_lines,
)

MULTI30K = SHARED_DATA / "multi30k"
needs_multi30k = pytest.mark.skipif(
    not (MULTI30K / "test_2016_flickr.de.gz").exists(),
    reason=f"Multi30k not found under {MULTI30K} (shared test data absent)",
)


def _raw(name: str) -> list[str]:
    with gzip.open(MULTI30K / name, "rt", encoding="utf-8") as lines:
        return lines.read().splitlines()


@needs_multi30k
def test_the_reference_is_the_official_tokenized_file_and_scores_itself_100():
    raw = _raw("test_2016_flickr.de.gz")
    tokens = [lowercased_tokenized(line, "de") for line in raw]
    # The multi30k dataset's data/task1/tok/test_2016_flickr.lc.norm.tok.de: 12,103 tokens
    # (the reflen of every published test2016 score), its first two lines these.
    assert sum(len(line.split()) for line in tokens) == 12103
    assert tokens[:2] == [
        "ein mann mit einem orangefarbenen hut , der etwas anstarrt .",
        "ein boston terrier läuft über saftig-grünes gras vor einem weißen zaun .",
    ]
    score = score_lines(raw, raw, "de", "hyp", "ref")
    assert score["bleu_lowercased_tokenized"] == pytest.approx(100.0)
    assert score["bleu_lowercased_tokenized_stats"]["ref_len"] == 12103


@needs_multi30k
@pytest.mark.parametrize("split", ["val", "test_2016_flickr"])
def test_detokenized_text_tokenizes_back_to_the_same_tokens(split):
    tokens = [lowercased_tokenized(line, "de") for line in _raw(f"{split}.de.gz")]
    assert [lowercased_tokenized(detokenize(t, "de"), "de") for t in tokens] == tokens


def test_the_score_ignores_case_and_tokenization_and_is_multi_bleu_on_the_tokens():
    refs = ['Ein Mann sagt "Hallo" zu einem Hund.', "Zwei Kinder spielen im Park."]
    hyps = ['ein mann sagt " hallo " zu einem hund .', "ZWEI Kinder spielen im Garten."]
    stats = lowercased_tokenized_bleu(hyps, refs)
    assert stats == multi_bleu(
        ["ein mann sagt &quot; hallo &quot; zu einem hund .", "zwei kinder spielen im garten ."],
        ["ein mann sagt &quot; hallo &quot; zu einem hund .", "zwei kinder spielen im park ."],
    )
    assert 0 < stats.bleu < 100


def test_tokenize_escapes_and_keeps_hyphens_and_detokenize_undoes_it():
    line = 'Ein "saftig-grünes" Feld & ein Haus.'
    assert tokenize(line, "de") == "Ein &quot; saftig-grünes &quot; Feld &amp; ein Haus ."
    assert detokenize(tokenize(line, "de"), "de") == line
