"""Moses tokenization of running text and its inverse, as the Multi30k literature prepares
and scores its text (the multi30k dataset's ``scripts/task1-tokenize.sh``: lowercase,
``normalize-punctuation.perl``, ``tokenizer.perl``).

The tokenizer is sacremoses' port of ``tokenizer.perl`` with its defaults: XML escaping
(``&quot;``, ``&apos;``, ...) and no aggressive splitting of hyphens. Applied after lowercasing
and Moses punctuation normalization to the raw Multi30k files, it rebuilds the dataset's
official ``data/task1/tok/*.lc.norm.tok.*`` files byte for byte (test_2016_flickr: 12,103
German tokens). ``detokenize`` is its inverse on those files: detokenized and tokenized again,
every line of Multi30k's train, val and test_2016_flickr German comes back unchanged.
"""

from __future__ import annotations

from functools import cache

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer


@cache
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@cache
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


@cache
def _normalizer(lang: str) -> MosesPunctNormalizer:
    return MosesPunctNormalizer(lang=lang)


def tokenize(line: str, lang: str) -> str:
    """``tokenizer.perl -l LANG`` of one line: escaped, hyphens kept."""
    return _tokenizer(lang).tokenize(
        line, escape=True, aggressive_dash_splits=False, return_str=True
    )


def detokenize(line: str, lang: str) -> str:
    """Running text of one line ``tokenize`` made: unescaped, ``detokenizer.perl -l LANG``."""
    return _detokenizer(lang).detokenize(line.split(), unescape=True)


def lowercased_tokenized(line: str, lang: str) -> str:
    """The Multi30k literature's form of a line: lowercased, punctuation-normalized
    (``normalize-punctuation.perl -l LANG``), tokenized (``tokenize``)."""
    return tokenize(_normalizer(lang).normalize(line.lower()), lang)
