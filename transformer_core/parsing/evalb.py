"""Bracket scoring as EVALB (Sekine & Collins) does it, for Table 4's F1.

This re-implements ``evalb.c`` line by line where it matters for the numbers:
trees are read one per line; preterminals whose tag is a DELETE_LABEL are
removed with their word (punctuation under COLLINS.prm); constituent labels
lose everything from the first '-' or '=' (function tags); brackets that are
empty or carry a DELETE_LABEL (TOP) are not counted; EQ_LABEL pairs (ADVP,
PRT) match each other; a gold bracket matches at most one test bracket with
the same span (and label when LABELED is 1); sentences whose test line is
empty are skipped and those whose words differ are errors, neither counted.
Statistics are given for all sentences and for those of length <= CUTOFF_LEN,
where length counts every word except DELETE_LABEL_FOR_LENGTH ones.
QUOTE_LABEL (new.prm) re-inserts a quote that one side deleted and the other
tagged otherwise, as EVALB's bug fix does (bug_bug.rsl-new).

The printed report reproduces EVALB's own expected output for its fixture
(``sample_sample.rsl``) character for character, plus the "Bracketing
FMeasure" lines that later EVALB versions print. Unlike evalb.c it has no
fixed limits (5000 bytes per line, 200 words or brackets per sentence), and a
mismatched file length is the caller's error rather than a partial report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from transformer_core.parsing.evalb_read import (
    EvalbError,
    EvalbParams,
    fix_quote,
    massage,
    read_line,
)

# --- per-sentence and corpus statistics --------------------------------------------------


class _BracketRates:
    """Labeled recall and precision in percent, from ``match``, ``gold_brackets``, ``test_brackets``."""

    match: int
    gold_brackets: int
    test_brackets: int

    @property
    def recall(self) -> float:
        return 100.0 * self.match / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.match / self.test_brackets if self.test_brackets else 0.0


@dataclass
class SentenceResult(_BracketRates):
    """One row of EVALB's table. status: 0 scored, 1 error, 2 skipped (empty test line)."""

    line: int
    length: int
    status: int
    match: int
    gold_brackets: int
    test_brackets: int
    crossing: int
    words: int
    correct_tags: int
    errors: list[str] = field(default_factory=list)

    def row(self) -> str:
        accuracy = 100.0 * self.correct_tags / self.words if self.words else 0.0
        return (
            f"{self.line:4d}  {self.length:3d}    {self.status:d}  "
            f"{self.recall:6.2f} {self.precision:6.2f}   {self.match:3d}    "
            f"{self.gold_brackets:3d}  {self.test_brackets:3d}    {self.crossing:3d}"
            f"   {self.words:4d}  {self.correct_tags:4d}   {accuracy:6.2f}"
        )


def score_sentence(
    line_number: int, gold_line: str, test_line: str, params: EvalbParams
) -> SentenceResult:
    """EVALB's calc_result for one pair of lines."""
    gold = read_line(gold_line, params)
    test = read_line(test_line, params)
    errors = gold.errors + test.errors

    def unscored(status: int, why: str | None = None) -> SentenceResult:
        if why:
            errors.append(why)
        # evalb's fixture prints the gold word count on such rows; nothing is added to the totals.
        return SentenceResult(
            line_number, gold.length, status, 0, 0, 0, 0, len(gold.terminals), 0, errors
        )

    if not test.terminals:
        return unscored(2)
    if len(gold.terminals) != len(test.terminals):
        fix_quote(gold, test, params)
        if len(gold.terminals) != len(test.terminals):
            return unscored(1, f"Length unmatch ({len(gold.terminals)}|{len(test.terminals)})")
    for (gold_word, _), (test_word, _) in zip(gold.terminals, test.terminals, strict=True):
        if not params.word_eq(gold_word, test_word):
            return unscored(1, f"Words unmatch ({gold_word}|{test_word})")

    gold_count = massage(gold, params)
    test_count = massage(test, params)
    match = 0
    for g in gold.brackets:
        if g.result == 5:
            continue
        for t in test.brackets:
            if t.result == 0 and (g.start, g.end) == (t.start, t.end):
                if not params.labeled or params.label_eq(g.label, t.label):
                    g.result = t.result = 1
                    match += 1
                    break
    crossing = 0
    for t in test.brackets:
        if t.result == 5:
            continue
        for g in gold.brackets:
            if g.result != 5 and (
                (g.start < t.start < g.end < t.end) or (t.start < g.start < t.end < g.end)
            ):
                crossing += 1
                break
    correct_tags = sum(
        params.label_eq(g_tag, t_tag)
        for (_, g_tag), (_, t_tag) in zip(gold.terminals, test.terminals, strict=True)
    )
    return SentenceResult(
        line_number,
        gold.length,
        1 if errors else 0,
        match,
        gold_count,
        test_count,
        crossing,
        len(gold.terminals),
        correct_tags,
        errors,
    )


@dataclass
class Totals(_BracketRates):
    """EVALB's summary block for a set of sentences."""

    sentences: int = 0
    errors: int = 0
    skipped: int = 0
    match: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    complete: int = 0
    words: int = 0
    crossing: int = 0
    no_crossing: int = 0
    two_or_less_crossing: int = 0
    correct_tags: int = 0

    def add(self, r: SentenceResult) -> None:
        self.sentences += 1
        if r.status == 1:
            self.errors += 1
            return
        if r.status == 2:
            self.skipped += 1
            return
        self.match += r.match
        self.gold_brackets += r.gold_brackets
        self.test_brackets += r.test_brackets
        self.complete += r.gold_brackets == r.test_brackets == r.match
        self.words += r.words
        self.crossing += r.crossing
        self.no_crossing += r.crossing == 0
        self.two_or_less_crossing += r.crossing <= 2
        self.correct_tags += r.correct_tags

    @property
    def valid(self) -> int:
        return self.sentences - self.errors - self.skipped

    @property
    def f1(self) -> float:
        """2PR/(P+R) from the unrounded percentages; NaN when both are 0, as EVALB prints."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else math.nan

    @property
    def tagging_accuracy(self) -> float:
        return 100.0 * self.correct_tags / self.words if self.words else 0.0

    def summary_lines(self) -> list[str]:
        valid = self.valid

        def per_sentence(count: int, scale: float = 100.0) -> float:
            return scale * count / valid if valid else 0.0

        return [
            f"Number of sentence        = {self.sentences:6d}",
            f"Number of Error sentence  = {self.errors:6d}",
            f"Number of Skip  sentence  = {self.skipped:6d}",
            f"Number of Valid sentence  = {valid:6d}",
            f"Bracketing Recall         = {self.recall:6.2f}",
            f"Bracketing Precision      = {self.precision:6.2f}",
            f"Bracketing FMeasure       = {self.f1:6.2f}",
            f"Complete match            = {per_sentence(self.complete):6.2f}",
            f"Average crossing          = {per_sentence(self.crossing, 1.0):6.2f}",
            f"No crossing               = {per_sentence(self.no_crossing):6.2f}",
            f"2 or less crossing        = {per_sentence(self.two_or_less_crossing):6.2f}",
            f"Tagging accuracy          = {self.tagging_accuracy:6.2f}",
        ]

    def as_dict(self) -> dict:
        return {
            "sentences": self.sentences,
            "error_sentences": self.errors,
            "skipped_sentences": self.skipped,
            "valid_sentences": self.valid,
            "matched_brackets": self.match,
            "gold_brackets": self.gold_brackets,
            "test_brackets": self.test_brackets,
            "recall": self.recall,
            "precision": self.precision,
            "f1": None if math.isnan(self.f1) else self.f1,
            "complete_match": 100.0 * self.complete / self.valid if self.valid else 0.0,
            "average_crossing": self.crossing / self.valid if self.valid else 0.0,
            "tagging_accuracy": self.tagging_accuracy,
        }


@dataclass
class EvalbResult:
    sentences: list[SentenceResult]
    all: Totals
    cutoff: Totals
    cutoff_len: int

    def report(self) -> str:
        """EVALB's stdout: the per-sentence table, the totals row, the summary."""
        rule = "=" * 76
        lines = [
            "  Sent.                        Matched  Bracket   Cross        Correct Tag",
            " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy",
            rule,
        ]
        lines += [r.row() for r in self.sentences]
        lines.append(rule)
        t = self.all
        totals = ""
        if t.gold_brackets > 0 and t.test_brackets > 0:
            # Column widths and the no-crossing count in the "Cross" column are those of
            # EVALB's expected outputs (sample_sample.rsl, bug_bug.rsl-new).
            totals = (
                f"                {t.recall:6.2f} {t.precision:6.2f} {t.match:6d} "
                f"{t.gold_brackets:6d} {t.test_brackets:4d}  {t.no_crossing:5d}"
            )
        totals += f"  {t.words:5d} {t.correct_tags:5d}   {t.tagging_accuracy:6.2f}"
        lines += [totals, "=== Summary ===", "", "-- All --"]
        lines += self.all.summary_lines()
        lines += ["", f"-- len<={self.cutoff_len} --"]
        lines += self.cutoff.summary_lines()
        return "\n".join(lines) + "\n"

    def error_messages(self) -> list[str]:
        """The messages evalb.c writes to stderr, as ``LINE : message``."""
        return [f"{r.line} : {message}" for r in self.sentences for message in r.errors]

    def as_dict(self) -> dict:
        return {
            "all": self.all.as_dict(),
            f"len<={self.cutoff_len}": self.cutoff.as_dict(),
            "cutoff_len": self.cutoff_len,
        }


def evalb(
    gold_lines: Sequence[str], test_lines: Sequence[str], params: EvalbParams | None = None
) -> EvalbResult:
    """Score test trees against gold trees, one tree per line, as EVALB does.

    Raises EvalbError, as evalb.c exits, once more than MAX_ERROR + 1 errors occurred.
    """
    params = params or EvalbParams()
    if len(gold_lines) != len(test_lines):
        raise ValueError(f"{len(gold_lines)} gold lines but {len(test_lines)} test lines")
    results: list[SentenceResult] = []
    all_totals, cutoff_totals = Totals(), Totals()
    error_count = 0
    for number, (gold_line, test_line) in enumerate(
        zip(gold_lines, test_lines, strict=True), start=1
    ):
        result = score_sentence(number, gold_line, test_line, params)
        for message in result.errors:
            if error_count > params.max_error:
                raise EvalbError(
                    f"EVALB stops after more than MAX_ERROR={params.max_error} errors; "
                    f"line {number}: {message} (raise MAX_ERROR in a .prm file to go on)"
                )
            error_count += 1
        results.append(result)
        all_totals.add(result)
        if result.length <= params.cutoff_len:
            cutoff_totals.add(result)
    return EvalbResult(results, all_totals, cutoff_totals, params.cutoff_len)
