"""Reading EVALB's input: the parameter file's settings and one line of bracketed text.

The reading half of ``evalb.py`` (which scores and prints): ``EvalbParams`` (COLLINS.prm by
default), and ``read_line`` / ``fix_quote`` / ``massage``, which turn one line into the
words and brackets that are compared, as ``evalb.c``'s read_line, fix_quote and massage_data
do (see ``evalb.py`` for the rules they implement).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from transformer_core.errors import UserError

_C_SPACE = frozenset(" \t\n\v\f\r")  # C isspace() in the "C" locale
_QUOTE_WORDS = ("'", '"', "/")


class EvalbError(UserError):
    """EVALB gives up: more errors than MAX_ERROR allows."""


@dataclass(frozen=True)
class EvalbParams:
    """The settings of an EVALB parameter file (.prm); the defaults are COLLINS.prm."""

    labeled: bool = True
    cutoff_len: int = 40
    max_error: int = 10
    delete_labels: tuple[str, ...] = ("TOP", "-NONE-", ",", ":", "``", "''", ".")
    delete_labels_for_length: tuple[str, ...] = ("-NONE-",)
    quote_labels: tuple[str, ...] = ()
    eq_labels: tuple[tuple[str, str], ...] = (("ADVP", "PRT"),)
    eq_words: tuple[tuple[str, str], ...] = ()

    @classmethod
    def read(cls, path: str | os.PathLike) -> EvalbParams:
        """Parse a .prm file the way evalb.c does; unknown keys are an error here."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"{path}: no such parameter file") from None
        values: dict[str, list] = {
            "DELETE_LABEL": [],
            "DELETE_LABEL_FOR_LENGTH": [],
            "QUOTE_LABEL": [],
            "EQ_LABEL": [],
            "EQ_WORD": [],
        }
        scalars: dict[str, int] = {}
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.rstrip()
            if line.startswith("#") or len(line) < 3:
                continue
            key, *rest = line.split(None, 1)
            value = rest[0].strip() if rest else ""
            where = f"{path}:{number}"
            if not value:
                raise UserError(f"{where}: {key} has no value")
            if key in ("DEBUG", "MAX_ERROR", "CUTOFF_LEN", "LABELED"):
                try:
                    scalars[key] = int(value.split()[0])
                except ValueError:
                    raise UserError(f"{where}: {key} needs an integer, not {value!r}") from None
            elif key in ("DELETE_LABEL", "DELETE_LABEL_FOR_LENGTH", "QUOTE_LABEL"):
                values[key].append(value)
            elif key in ("EQ_LABEL", "EQ_WORD"):
                pair = value.split()
                if len(pair) != 2:
                    raise UserError(f"{where}: {key} needs two values, not {value!r}")
                values[key].append(tuple(pair))
            else:
                raise UserError(f"{where}: unknown EVALB parameter {key!r}")
        default = cls()
        return cls(
            labeled=bool(scalars.get("LABELED", 1)),
            cutoff_len=scalars.get("CUTOFF_LEN", default.cutoff_len),
            max_error=scalars.get("MAX_ERROR", default.max_error),
            delete_labels=tuple(values["DELETE_LABEL"]),
            delete_labels_for_length=tuple(values["DELETE_LABEL_FOR_LENGTH"]),
            quote_labels=tuple(values["QUOTE_LABEL"]),
            eq_labels=tuple(values["EQ_LABEL"]),
            eq_words=tuple(values["EQ_WORD"]),
        )

    def label_eq(self, a: str, b: str) -> bool:
        return a == b or (a, b) in self.eq_labels or (b, a) in self.eq_labels

    def word_eq(self, a: str, b: str) -> bool:
        return a == b or (a, b) in self.eq_words or (b, a) in self.eq_words


# --- one line of bracketed text, read as evalb.c's read_line does ---------------------------


@dataclass
class Bracket:
    start: int
    end: int
    label: str
    result: int = 0  # 0 unmatched, 1 matched, 5 not counted (empty or deleted label)


@dataclass
class QuoteTerm:
    word: str
    label: str
    index: int  # where the word is (or would be, if deleted) among the kept words
    bracket: int  # number of brackets opened before it
    ends: list[int]  # the brackets open around it


@dataclass
class Sentence:
    terminals: list[list[str]] = field(default_factory=list)  # [word, tag]
    brackets: list[Bracket] = field(default_factory=list)
    quotes: list[QuoteTerm] = field(default_factory=list)
    length: int = 0
    errors: list[str] = field(default_factory=list)


def read_line(line: str, params: EvalbParams) -> Sentence:
    sent = Sentence()
    stack: list[int] = []
    n = len(line)
    p = 0

    def atom(i: int) -> int:
        while i < n and line[i] not in _C_SPACE and line[i] not in "()":
            i += 1
        return i

    while p < n:
        c = line[p]
        if c in _C_SPACE:
            p += 1
        elif c == "(":
            end = atom(p + 1)
            label, p = line[p + 1 : end], end
            if p < n and line[p] in _C_SPACE:
                q = p + 1
                while q < n and line[q] in _C_SPACE:
                    q += 1
                word_end = atom(q)
                word, q = line[q:word_end], word_end
                closes = q < n and line[q] == ")"
                if closes:
                    if label not in params.delete_labels_for_length:
                        sent.length += 1
                    if label in params.quote_labels and word in _QUOTE_WORDS:
                        sent.quotes.append(
                            QuoteTerm(
                                word, label, len(sent.terminals), len(sent.brackets), list(stack)
                            )
                        )
                    if label not in params.delete_labels:
                        sent.terminals.append([word, label])
                    p = q + 1
                    continue
                if not (q < n and line[q] == "("):
                    sent.errors.append("More than two elements in a bracket")
                    p = q  # evalb.c loops on the stray word; skip it instead
            stack.append(len(sent.brackets))
            sent.brackets.append(Bracket(len(sent.terminals), -1, label))
        elif c == ")":
            if stack:
                sent.brackets[stack.pop()].end = len(sent.terminals)
            else:
                sent.errors.append("Bracketing unbalance (too many close bracket)")
            p += 1
        else:
            sent.errors.append("Reading sentence")
            p = atom(p)
    if stack:
        sent.errors.append("Bracketing is unbalanced (too many open bracket)")
    return sent


def fix_quote(gold: Sentence, test: Sentence, params: EvalbParams) -> None:
    """Re-insert a quote one side deleted (tag `` or '') and the other kept (e.g. as POS)."""

    def deleted(label: str) -> bool:
        return label in params.delete_labels

    for i, quote2 in enumerate(test.quotes):
        index = quote2.index  # read once, as evalb.c does, before the shifts below
        for j, quote1 in enumerate(gold.quotes):
            if quote1.index != index or quote1.label == quote2.label:
                continue
            if deleted(quote1.label) and not deleted(quote2.label):
                reinsert(quote1, gold)
                for later in gold.quotes[j:]:
                    later.index += 1
            elif deleted(quote2.label) and not deleted(quote1.label):
                reinsert(quote2, test)
                for later in test.quotes[i:]:
                    later.index += 1


def reinsert(quote: QuoteTerm, sent: Sentence) -> None:
    sent.terminals.insert(quote.index, [quote.word, quote.label])
    for bracket in sent.brackets[quote.bracket :]:
        bracket.start += 1
        bracket.end += 1
    for k in quote.ends:
        sent.brackets[k].end += 1


def massage(sent: Sentence, params: EvalbParams) -> int:
    """Mark uncounted brackets; strip function tags; return the number counted."""
    counted = 0
    for bracket in sent.brackets:
        bracket.result = 0
        if bracket.start == bracket.end:
            bracket.result = 5
            continue
        for sep in "-=":
            bracket.label = bracket.label.split(sep, 1)[0]
        if any(params.label_eq(bracket.label, d) for d in params.delete_labels):
            bracket.result = 5
        else:
            counted += 1
    return counted
