"""Text preparation: normalization of every line, and the counted filters of training pairs.

Normalization (always, both sides):

1. Unicode normalization (NFC by default: canonical, so no visible change;
   NFKC also folds compatibility characters such as ligatures and full-width forms);
2. Moses punctuation normalization (sacremoses ``MosesPunctNormalizer``, the
   port of ``normalize-punctuation.perl``, for the side's language);
3. removal of non-printing characters (Unicode category C: control, format,
   private-use, unassigned; as Moses' ``remove-non-printing-char.perl``), with
   every run of whitespace, including line and paragraph separators, made one space.

Filters (training data only; ``filter=False`` for dev/test keeps every line
so references stay aligned), applied in this order, each pair counted under
the first that removes it:

- ``empty``: either side empty after normalization;
- ``too_long``: either side longer than ``max_len`` whitespace tokens;
- ``ratio``: the longer side has more than ``max_ratio`` times the tokens of the shorter.

Nothing is dropped silently: the report counts pairs in, out and per reason,
and how many lines normalization changed.
"""

from __future__ import annotations

import itertools
import os
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sacremoses import MosesPunctNormalizer

from transformer_core.data.fetch import open_text
from transformer_core.errors import UserError
from transformer_core.io import atomic_open

FILTERS = ("empty", "too_long", "ratio")


@dataclass(frozen=True)
class PrepareSettings:
    src_lang: str = "en"
    tgt_lang: str = "de"
    max_len: int = 250
    max_ratio: float = 1.5
    filter: bool = True
    unicode_form: str = "NFC"

    def __post_init__(self) -> None:
        if self.unicode_form not in ("NFC", "NFKC"):
            raise UserError(f"unicode_form must be NFC or NFKC, not {self.unicode_form!r}")
        if self.max_len < 1:
            raise UserError(f"max_len must be at least 1, got {self.max_len}")
        if self.max_ratio < 1:
            raise UserError(f"max_ratio must be at least 1, got {self.max_ratio}")


class Normalizer:
    """Line normalization for one language (steps 1-3 of the module docstring)."""

    def __init__(self, lang: str, unicode_form: str = "NFC") -> None:
        self.unicode_form = unicode_form
        self.moses = MosesPunctNormalizer(lang=lang)
        self.removed_chars = 0

    def __call__(self, line: str) -> str:
        text = unicodedata.normalize(self.unicode_form, line)
        text = self.moses.normalize(text)
        if text.isprintable():  # fast path: no category C or separator characters but " "
            return " ".join(text.split())
        kept = [
            " " if ch.isspace() else ch
            for ch in text
            if ch.isspace() or unicodedata.category(ch)[0] != "C"
        ]
        self.removed_chars += len(text) - len(kept)
        return " ".join("".join(kept).split())


def reject_reason(src: str, tgt: str, max_len: int, max_ratio: float) -> str | None:
    """The first filter that removes the pair (``FILTERS``), or None to keep it."""
    n_src, n_tgt = len(src.split()), len(tgt.split())
    if n_src == 0 or n_tgt == 0:
        return "empty"
    if n_src > max_len or n_tgt > max_len:
        return "too_long"
    if max(n_src, n_tgt) > max_ratio * min(n_src, n_tgt):
        return "ratio"
    return None


def _count_rest(lines) -> int:
    return sum(1 for _ in lines)


def prepare_corpus(
    src_in: str | os.PathLike,
    tgt_in: str | os.PathLike,
    src_out: str | os.PathLike,
    tgt_out: str | os.PathLike,
    settings: PrepareSettings,
) -> dict[str, Any]:
    """Normalize (and filter) a parallel corpus, streaming; return the report."""
    src_in, tgt_in = Path(src_in), Path(tgt_in)
    for path in (src_in, tgt_in):
        if not path.is_file():
            raise UserError(f"{path}: no such file")
    norm_src = Normalizer(settings.src_lang, settings.unicode_form)
    norm_tgt = Normalizer(settings.tgt_lang, settings.unicode_form)
    removed: Counter[str] = Counter(dict.fromkeys(FILTERS, 0))
    changed = Counter(src=0, tgt=0)
    pairs_in = pairs_out = 0
    with (
        open_text(src_in) as src_lines,
        open_text(tgt_in) as tgt_lines,
        atomic_open(src_out) as out_src,
        atomic_open(tgt_out) as out_tgt,
    ):
        for raw_src, raw_tgt in itertools.zip_longest(src_lines, tgt_lines):
            if raw_src is None or raw_tgt is None:
                rest = 1 + _count_rest(tgt_lines if raw_src is None else src_lines)
                n_src = pairs_in + (rest if raw_tgt is None else 0)
                n_tgt = pairs_in + (rest if raw_src is None else 0)
                raise UserError(
                    f"source and target differ in length: {src_in} has {n_src} lines, {tgt_in} has {n_tgt}"
                )
            pairs_in += 1
            raw_src, raw_tgt = raw_src.rstrip("\n"), raw_tgt.rstrip("\n")
            src, tgt = norm_src(raw_src), norm_tgt(raw_tgt)
            changed["src"] += src != raw_src
            changed["tgt"] += tgt != raw_tgt
            if settings.filter:
                reason = reject_reason(src, tgt, settings.max_len, settings.max_ratio)
                if reason is not None:
                    removed[reason] += 1
                    continue
            out_src.write(src + "\n")
            out_tgt.write(tgt + "\n")
            pairs_out += 1
    return {
        "inputs": {"src": str(src_in), "tgt": str(tgt_in)},
        "outputs": {"src": str(src_out), "tgt": str(tgt_out)},
        "settings": asdict(settings),
        "pairs_in": pairs_in,
        "pairs_out": pairs_out,
        "removed": dict(removed),
        "removed_total": pairs_in - pairs_out,
        "lines_changed_by_normalization": dict(changed),
        "nonprinting_chars_removed": {"src": norm_src.removed_chars, "tgt": norm_tgt.removed_chars},
    }


def summary(report: dict[str, Any]) -> str:
    """One human line for stderr."""
    removed = report["removed"]
    share = report["removed_total"] / report["pairs_in"] if report["pairs_in"] else 0.0
    reasons = ", ".join(f"{k} {removed[k]}" for k in FILTERS)
    return (
        f"prepare {report['inputs']['src']} / {report['inputs']['tgt']}: {report['pairs_in']} pairs in, "
        f"{report['pairs_out']} out, {report['removed_total']} removed ({share:.2%}: {reasons}); "
        f"normalization changed {report['lines_changed_by_normalization']['src']} source and "
        f"{report['lines_changed_by_normalization']['tgt']} target lines"
    )
