"""The data stage's settings: how ``prepare`` normalizes and filters a parallel corpus, how
``spm train`` trains the BPE model, how ``treebank`` linearizes trees."""

from __future__ import annotations

from dataclasses import dataclass

from transformer_core.parsing.trees import LINEARIZATIONS
from transformer_core.settings.fields import (
    SPM_SAMPLE_SIZE,
    option,
    parse_seed,
    require_declared,
)


@dataclass(frozen=True)
class SentencePieceSettings:
    """How ``transformer-core spm train`` trains the joint BPE model (``data/bpe.py``) beyond
    its vocabulary size; the flags of ``spm train`` are these fields'."""

    sample_size: int = option(
        SPM_SAMPLE_SIZE,
        "--sample-size",
        "train on at most this many random lines (bounds sentencepiece's memory)",
        config="spm_sample_size",
        minimum=1,
        doc="left out: 10 million",
    )
    seed: int = option(0, "--seed", "seed of the line sample", type=parse_seed)
    character_coverage: float = option(
        1.0, "--character-coverage", "sentencepiece's character_coverage"
    )
    split_by_unicode_script: bool = option(
        True,
        "--split-by-unicode-script",
        "sentencepiece's split_by_unicode_script: no piece mixes scripts (off lets a tree's "
        "bracket and label, '(NP', be one piece)",
    )

    def __post_init__(self) -> None:
        require_declared(self, lambda f: f.metadata["flag"])


@dataclass(frozen=True)
class TreebankSettings:
    """How ``transformer-core treebank`` writes its trees as token sequences (Table 4; the
    workflow's table4.linearization); the flag of every ``treebank`` action is this field's."""

    linearization: str = option(
        "xx",
        "--linearization",
        "the trees' leaf tokens: xx - XX for every tag (Vinyals et al. 2015), tags - each "
        "word's part-of-speech tag (tensor2tensor's wsj_parsing), words - each word itself",
        choices=LINEARIZATIONS,
    )


UNICODE_FORMS = ("NFC", "NFKC")


@dataclass(frozen=True)
class PrepareSettings:
    """How ``transformer-core prepare`` normalizes a parallel corpus and filters its training
    pairs (``data/prepare.py``); the flags of ``prepare`` are these fields'."""

    src_lang: str = option("en", "--src-lang", "source language (Moses punctuation rules)")
    tgt_lang: str = option("de", "--tgt-lang", "target language (Moses punctuation rules)")
    max_len: int = option(
        250, "--max-len", "drop pairs with a side longer than this (tokens)", minimum=1
    )
    max_ratio: float = option(
        1.5, "--max-ratio", "drop pairs whose token-length ratio exceeds this", minimum=1
    )
    filter: bool = option(
        True,
        "--filter",
        "drop empty, too long and unbalanced pairs; --no-filter only normalizes and keeps "
        "every line (dev/test, so references never lose lines)",
        doc="the removed pairs are counted. Left out: true (multi30k_tiny.yaml sets false: its "
        "source trained on all 29,000 pairs)",
    )
    unicode_form: str = option(
        "NFC", "--unicode-form", "unicode normalization form", choices=UNICODE_FORMS
    )
    lowercase: bool = option(
        False,
        "--lowercase",
        "lowercase every line before normalizing it (the Multi30k literature's text, with "
        "--tokenize)",
        doc="left out: false, as the paper (multi30k_tiny.yaml sets it)",
    )
    tokenize: bool = option(
        False,
        "--tokenize",
        "Moses-tokenize every line after normalizing it, escaped, hyphens kept (the Multi30k "
        "dataset's task1-tokenize.sh); `translate --detokenize` turns outputs back into text",
        doc="then every decode is detokenized before it is written and scored. Left out: false, "
        "as the paper (multi30k_tiny.yaml sets it)",
    )

    def __post_init__(self) -> None:
        require_declared(self, lambda f: f.metadata["flag"])
