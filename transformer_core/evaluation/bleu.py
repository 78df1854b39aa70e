"""BLEU three ways: the paper's tokenized score, sacreBLEU 13a, and the Multi30k literature's
score on lowercased, Moses-tokenized text.

The paper's BLEU numbers were made by tensor2tensor's ``get_ende_bleu.sh``.
``paper_bleu`` computes exactly what that script chain prints:

- hypothesis: Moses ``replace-unicode-punctuation.perl``, ``tokenizer.perl -l de``
  (default XML escaping), then hyphen compounds split as "a ##AT##-##AT## b";
- reference: the same tokenization and ##AT## splitting, without the punctuation
  step (the script takes an already tokenized reference);
- Moses ``multi-bleu.perl``: case-sensitive corpus BLEU on whitespace tokens.

The tokenizer is the one of 2017, before Moses' "split final dots
unconditionally" change of 2018-11-07. tests/fixtures/bleu_moses/ records which
Moses scripts were run and holds, for every shared system output, the md5 of each
intermediate file and the line multi-bleu.perl printed; tests/unit/test_bleu_moses.py
checks that this module reproduces them byte for byte.

That score is not comparable across papers; sacreBLEU's 13a tokenization of
the detokenized text, with its signature, is (``sacrebleu_13a``). Every test
set gets both (docs/recipe.md, Decoding and scoring).

The multimodal-MT literature on Multi30k scores differently again: hypotheses and references
lowercased, punctuation-normalized and Moses-tokenized as the multi30k dataset's
``task1-tokenize.sh`` makes its official ``data/task1/tok`` references (``data.moses``), then
multi-bleu.perl (``lowercased_tokenized_bleu``). Every score file carries it too, as
``bleu_lowercased_tokenized``, so that a Multi30k model is compared with that literature.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from transformer_core.errors import UserError
from transformer_core.files import read_lines

MAX_ORDER = 4

# multi-bleu.perl reads bytes and splits with Perl's `split`: ASCII whitespace only.
_PERL_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
# get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g' on bytes,
# hence ASCII \S; matches do not overlap, so "a-b-c" -> "a ##AT##-##AT## b-c".
_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)", re.ASCII)

# replace-unicode-punctuation.perl, rule for rule. It leaves the German low quote
# „ alone, and it turns the full-width digit one into a double quote (a slip in
# the script, kept because the paper's numbers went through it). sacremoses'
# port differs on those two points: "１" -> "1", and it also eats tabs and other
# white space after "。" and "．", where the script eats only spaces.
_UNICODE_PUNCTUATION = str.maketrans(
    {
        "，": ",", "、": ",", "”": '"', "“": '"', "∶": ":", "：": ":", "？": "?",
        "《": '"', "》": '"', "）": ")", "！": "!", "（": "(", "；": ";", "１": '"',
        "」": '"', "「": '"', "０": "0", "２": "2", "３": "3", "４": "4", "５": "5",
        "６": "6", "７": "7", "８": "8", "９": "9", "～": "~", "’": "'", "…": "...",
        "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%",
    }
)  # fmt: skip
_FULL_STOPS = re.compile("[。．] *")

# tokenizer.perl prints a line that is empty or white space (Perl's \s: Python's
# minus \x1c-\x1f) unchanged; sacremoses returns "".
_PERL_BLANK = re.compile(r"[^\S\x1c-\x1f]*")
# tokenizer.perl deletes \x1c-\x1f; sacremoses first turns them into spaces,
# because Python's \s counts them as white space.
_PYTHON_ONLY_SPACE = dict.fromkeys(range(0x1C, 0x20))


@dataclass(frozen=True)
class BleuStats:
    """Corpus BLEU with the numbers multi-bleu.perl and sacreBLEU print beside it.

    ``bleu`` is in [0, 100]; ``counts[n-1]`` are the clipped n-gram matches and
    ``totals[n-1]`` the hypothesis n-grams, for n = 1..4.
    """

    bleu: float
    counts: tuple[int, ...]
    totals: tuple[int, ...]
    bp: float
    ratio: float
    hyp_len: int
    ref_len: int

    @property
    def precisions(self) -> tuple[float, ...]:
        """Modified n-gram precisions in percent (0 where there is no n-gram)."""
        return tuple(
            100.0 * c / t if t else 0.0 for c, t in zip(self.counts, self.totals, strict=True)
        )

    def as_dict(self) -> dict:
        return {**asdict(self), "precisions": list(self.precisions)}

    def __str__(self) -> str:
        precisions = "/".join(f"{p:.1f}" for p in self.precisions)
        return (
            f"BLEU = {self.bleu:.2f}, {precisions} (BP={self.bp:.3f}, ratio={self.ratio:.3f}, "
            f"hyp_len={self.hyp_len}, ref_len={self.ref_len})"
        )


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def multi_bleu(hyps: Sequence[str], refs: Sequence[str]) -> BleuStats:
    """Corpus BLEU on already tokenized lines, with multi-bleu.perl's semantics.

    One reference per line; tokens are split on ASCII whitespace; case matters;
    clipped n-gram counts and lengths are summed over the corpus; the brevity
    penalty is exp(1 - ref_len / hyp_len) when the hypothesis is shorter; no
    smoothing, so the score is 0 as soon as one order has no match.
    """
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    counts = [0] * MAX_ORDER
    totals = [0] * MAX_ORDER
    hyp_len = ref_len = 0
    for hyp, ref in zip(hyps, refs, strict=True):
        hyp_tokens = [t for t in _PERL_WHITESPACE.split(hyp) if t]
        ref_tokens = [t for t in _PERL_WHITESPACE.split(ref) if t]
        hyp_len += len(hyp_tokens)
        ref_len += len(ref_tokens)
        for n in range(1, MAX_ORDER + 1):
            hyp_ngrams = _ngrams(hyp_tokens, n)
            ref_ngrams = _ngrams(ref_tokens, n)
            totals[n - 1] += sum(hyp_ngrams.values())
            counts[n - 1] += sum(min(c, ref_ngrams[g]) for g, c in hyp_ngrams.items())
    if ref_len == 0 or hyp_len == 0:
        # multi-bleu.perl prints 0 (empty reference) or divides by zero (empty output).
        return BleuStats(0.0, tuple(counts), tuple(totals), 0.0, 0.0, hyp_len, ref_len)
    bp = 1.0 if hyp_len >= ref_len else math.exp(1.0 - ref_len / hyp_len)
    if min(counts) == 0:
        bleu = 0.0
    else:
        log_precision = (
            sum(math.log(c / t) for c, t in zip(counts, totals, strict=True)) / MAX_ORDER
        )
        bleu = 100.0 * bp * math.exp(log_precision)
    return BleuStats(bleu, tuple(counts), tuple(totals), bp, hyp_len / ref_len, hyp_len, ref_len)


def split_compounds(line: str) -> str:
    """Put hyphenated compounds in "##AT##" form: "rich-text" -> "rich ##AT##-##AT## text"."""
    return _COMPOUND_HYPHEN.sub(r"\1 ##AT##-##AT## \2", line)


def replace_unicode_punctuation(line: str) -> str:
    """Moses' replace-unicode-punctuation.perl, the first step on the hypothesis."""
    return _FULL_STOPS.sub(". ", line.translate(_UNICODE_PUNCTUATION))


def _moses_tokenizer(lang: str):
    """sacremoses' MosesTokenizer, splitting off the same characters as tokenizer.perl.

    tokenizer.perl pads every character outside Perl's \\p{IsAlnum} (Alphabetic
    or decimal digit) with spaces. sacremoses uses its own table of those
    characters, which lacks CJK ideographs, Hangul and many other letters, so it
    would turn "中国" into "中 国"; the regex module's properties have them. Over
    every character of Unicode 14 this agrees with Perl 5.36 but for 38 combining
    signs (U+0363-U+036F, U+1DD3-U+1DE6, ...) that later Unicode calls Alphabetic.
    """
    import regex
    from sacremoses import MosesTokenizer

    class Tokenizer(MosesTokenizer):
        PAD_NOT_ISALNUM = regex.compile(r"([^\p{Alphabetic}\p{Nd}\s.'`,\-])"), r" \1 "

    return Tokenizer(lang=lang)


class PaperTokenizer:
    """The tokenization of get_ende_bleu.sh: tokenizer.perl -l LANG, then ##AT## compounds.

    ``moses`` is tokenizer.perl as of 2017, with its default escaping of
    ``& | < > ' " [ ]`` (t2t passed no ``-no-escape``); it keeps the final dot
    of a line on a non-breaking prefix ("5 Mio."), as tokenizer.perl did before
    2018-11-07. Calling the object adds the ##AT## compound split.
    """

    def __init__(self, lang: str = "de"):
        self.lang = lang
        self._tokenizer = _moses_tokenizer(lang)

    def moses(self, line: str) -> str:
        """One line through tokenizer.perl -l LANG."""
        if _PERL_BLANK.fullmatch(line):
            return line
        line = line.translate(_PYTHON_ONLY_SPACE)
        return self._tokenizer.tokenize(line, return_str=True, escape=True)

    def __call__(self, line: str) -> str:
        return split_compounds(self.moses(line))


def paper_tokenized(
    hyps: Sequence[str], refs: Sequence[str], lang: str = "de"
) -> tuple[list[str], list[str]]:
    """Hypotheses and references as get_ende_bleu.sh hands them to multi-bleu.perl.

    Only the hypothesis goes through replace-unicode-punctuation.perl, as in the
    script, so typographic quotes of the reference are compared as they are.
    """
    tokenize = PaperTokenizer(lang)
    return [tokenize(replace_unicode_punctuation(h)) for h in hyps], [tokenize(r) for r in refs]


def paper_bleu(hyps: Sequence[str], refs: Sequence[str], lang: str = "de") -> BleuStats:
    """What get_ende_bleu.sh prints for detokenized hypotheses and references."""
    return multi_bleu(*paper_tokenized(hyps, refs, lang))


def lowercased_tokenized(
    hyps: Sequence[str], refs: Sequence[str], lang: str = "de"
) -> tuple[list[str], list[str]]:
    """Hypotheses and references as the Multi30k literature scores them: lowercased,
    punctuation-normalized, Moses-tokenized (``data.moses.lowercased_tokenized``)."""
    from transformer_core.data.moses import lowercased_tokenized as form

    return [form(h, lang) for h in hyps], [form(r, lang) for r in refs]


def lowercased_tokenized_bleu(
    hyps: Sequence[str], refs: Sequence[str], lang: str = "de"
) -> BleuStats:
    """multi-bleu.perl on ``lowercased_tokenized`` text: the Multi30k literature's BLEU (its
    references are the multi30k dataset's ``tok/*.lc.norm.tok.*`` files)."""
    return multi_bleu(*lowercased_tokenized(hyps, refs, lang))


def sacrebleu_13a(hyps: Sequence[str], refs: Sequence[str]) -> tuple[BleuStats, str]:
    """sacreBLEU's default corpus BLEU (13a, cased, exp smoothing) and its signature."""
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    score = metric.corpus_score(list(hyps), [list(refs)])
    ratio = score.sys_len / score.ref_len if score.ref_len else 0.0
    stats = BleuStats(
        score.score,
        tuple(score.counts),
        tuple(score.totals),
        score.bp,
        ratio,
        score.sys_len,
        score.ref_len,
    )
    return stats, str(metric.get_signature())


def read_pair(hyp_path: str | os.PathLike, ref_path: str | os.PathLike) -> tuple[list, list]:
    """The lines of a hypothesis file and its reference; different line counts are an error."""
    hyps, refs = read_lines(hyp_path), read_lines(ref_path)
    if len(hyps) != len(refs):
        raise UserError(
            f"line counts differ: hypothesis {hyp_path}: {len(hyps)}, "
            f"reference {ref_path}: {len(refs)}"
        )
    return hyps, refs


def score_files(hyp_path: str | os.PathLike, ref_path: str | os.PathLike, lang: str = "de") -> dict:
    """Both BLEU variants of a hypothesis file against a reference file, as a JSON-ready dict.

    The flat ``counts``/``bp``/``ratio``/``hyp_len``/``ref_len`` fields belong to
    the paper-style score; ``sacrebleu_stats`` and ``bleu_lowercased_tokenized_stats`` hold
    the same fields for sacreBLEU and for the Multi30k literature's score.
    Their bootstrap intervals are ``significance.score_intervals``'s.
    """
    return score_lines(*read_pair(hyp_path, ref_path), lang, hyp_path, ref_path)


def score_lines(
    hyps: list[str],
    refs: list[str],
    lang: str,
    hyp_path: str | os.PathLike,
    ref_path: str | os.PathLike,
) -> dict:
    """``score_files`` of lines already read (a pipe can be read only once)."""
    paper = paper_bleu(hyps, refs, lang)
    sacre, signature = sacrebleu_13a(hyps, refs)
    lowercased = lowercased_tokenized_bleu(hyps, refs, lang)
    return {
        "hyp": str(hyp_path),
        "ref": str(ref_path),
        "lang": lang,
        "n_lines": len(hyps),
        "bleu_paper_style": paper.bleu,
        "sacrebleu": sacre.bleu,
        "sacrebleu_signature": signature,
        "counts": list(paper.counts),
        "totals": list(paper.totals),
        "precisions": list(paper.precisions),
        "bp": paper.bp,
        "ratio": paper.ratio,
        "hyp_len": paper.hyp_len,
        "ref_len": paper.ref_len,
        "sacrebleu_stats": sacre.as_dict(),
        "bleu_lowercased_tokenized": lowercased.bleu,
        "bleu_lowercased_tokenized_stats": lowercased.as_dict(),
    }
