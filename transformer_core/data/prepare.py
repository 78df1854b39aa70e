"""Text preparation: normalization of every line, and the counted filters of training pairs.

Normalization (always, both sides):

1. Unicode normalization (NFC by default: canonical, so no visible change;
   NFKC also folds compatibility characters such as ligatures and full-width forms);
2. Moses punctuation normalization (sacremoses ``MosesPunctNormalizer``, the
   port of ``normalize-punctuation.perl``, for the side's language);
3. removal of non-printing characters (Unicode category C: control, format,
   private-use, unassigned; as Moses' ``remove-non-printing-char.perl``), with
   every run of whitespace, including line and paragraph separators, made one space.

Optionally (``PrepareSettings.lowercase`` and ``tokenize``: the Multi30k literature's text,
``data/moses.py``) the line is lowercased first and Moses-tokenized last.

Filters (training data only; ``filter=False`` for dev/test keeps every line
so references stay aligned), applied in this order, each pair counted under
the first that removes it:

- ``empty``: either side empty after normalization;
- ``too_long``: either side longer than ``max_len`` whitespace tokens;
- ``ratio``: the longer side has more than ``max_ratio`` times the tokens of the shorter.

Nothing is dropped silently: the report counts pairs in, out and per reason,
and how many lines normalization changed. ``prepare_shard`` does the same for one
shard of a training corpus (``transformer_core.data.shards``), whose reports add up
to the corpus's.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

from sacremoses import MosesPunctNormalizer

from transformer_core.data import moses
from transformer_core.data.fetch import open_text
from transformer_core.data.progress import Progress
from transformer_core.data.shards import Shard, parallel_lines
from transformer_core.files import atomic_open_all
from transformer_core.settings import PrepareSettings

FILTERS = ("empty", "too_long", "ratio")
CHUNK_LINES = 10_000


class Normalizer:
    """Line normalization for one language (steps 1-3 of the module docstring), after
    lowercasing where ``lowercase`` and followed by Moses tokenization where ``tokenize``."""

    def __init__(
        self, lang: str, unicode_form: str = "NFC", lowercase: bool = False, tokenize: bool = False
    ) -> None:
        self.lang = lang
        self.unicode_form = unicode_form
        self.lowercase = lowercase
        self.tokenize = tokenize
        self.moses = MosesPunctNormalizer(lang=lang)

    def clean(self, line: str) -> tuple[str, int]:
        """The normalized line and the number of non-printing characters removed."""
        text, removed = self._normalized(line.lower() if self.lowercase else line)
        return (moses.tokenize(text, self.lang) if self.tokenize and text else text), removed

    def _normalized(self, line: str) -> tuple[str, int]:
        text = unicodedata.normalize(self.unicode_form, line)
        text = self.moses.normalize(text)
        if text.isprintable():  # fast path: no category C or separator characters but " "
            return " ".join(text.split()), 0
        kept = [
            " " if ch.isspace() else ch
            for ch in text
            if ch.isspace() or unicodedata.category(ch)[0] != "C"
        ]
        return " ".join("".join(kept).split()), len(text) - len(kept)


# What the reader (``fetch.open_text``) puts where a file's bytes are not UTF-8: raw corpora
# (Common Crawl) hold a few such lines, kept and counted rather than failing the corpus.
REPLACEMENT = "\ufffd"


@cache
def _normalizer(lang: str, settings: PrepareSettings) -> Normalizer:
    return Normalizer(lang, settings.unicode_form, settings.lowercase, settings.tokenize)


def _normalize_chunk(
    job: tuple[list[tuple[str, str]], PrepareSettings],
) -> tuple[list[tuple[str, str]], Counter]:
    """Normalize a chunk of raw pairs (runs in worker processes); the pairs and change counts."""
    pairs, settings = job
    norm_src = _normalizer(settings.src_lang, settings)
    norm_tgt = _normalizer(settings.tgt_lang, settings)
    counts: Counter = Counter()
    out = []
    for raw_src, raw_tgt in pairs:
        src, removed_src = norm_src.clean(raw_src)
        tgt, removed_tgt = norm_tgt.clean(raw_tgt)
        counts["changed_src"] += src != raw_src
        counts["changed_tgt"] += tgt != raw_tgt
        counts["removed_chars_src"] += removed_src
        counts["removed_chars_tgt"] += removed_tgt
        counts["replaced_src"] += REPLACEMENT in raw_src
        counts["replaced_tgt"] += REPLACEMENT in raw_tgt
        out.append((src, tgt))
    return out, counts


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


def _file_pairs(src_in: Path, tgt_in: Path) -> Iterator[tuple[str, str]]:
    """Raw (source, target) lines of two whole files, without line breaks."""
    with open_text(src_in) as src_lines, open_text(tgt_in) as tgt_lines:
        for raw_src, raw_tgt in zip(src_lines, tgt_lines, strict=True):
            yield raw_src.rstrip("\n"), raw_tgt.rstrip("\n")


def _chunks(pairs: Iterator[tuple[str, str]], settings: PrepareSettings):
    """(pairs, settings) jobs of ``CHUNK_LINES`` raw pairs."""
    chunk: list[tuple[str, str]] = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) == CHUNK_LINES:
            yield chunk, settings
            chunk = []
    if chunk:
        yield chunk, settings


def prepare_corpus(
    src_in: str | os.PathLike,
    tgt_in: str | os.PathLike,
    src_out: str | os.PathLike,
    tgt_out: str | os.PathLike,
    settings: PrepareSettings,
    workers: int = 1,
) -> dict[str, Any]:
    """Normalize (and filter) a parallel corpus, streaming, on ``workers`` processes; the report."""
    src_in, tgt_in = Path(src_in), Path(tgt_in)
    n_src = parallel_lines(src_in, tgt_in)
    pairs = _file_pairs(src_in, tgt_in)
    progress = Progress(f"prepare {src_in.name}/{tgt_in.name}", n_src)
    return _prepare(pairs, n_src, (src_in, tgt_in), (src_out, tgt_out), settings, workers, progress)


def prepare_shard(
    shard: Shard,
    src_out: str | os.PathLike,
    tgt_out: str | os.PathLike,
    settings: PrepareSettings,
    workers: int = 1,
) -> dict[str, Any]:
    """``prepare_corpus`` of one shard's lines (``transformer_core.data.shards``); the report
    also names the shard, so ``shards.merge_reports`` can check it has them all, in order."""
    progress = Progress(f"prepare {shard.label}", shard.lines)
    report = _prepare(
        shard.pairs(), shard.lines, (shard.src, shard.tgt), (src_out, tgt_out), settings, workers,
        progress,
    )  # fmt: skip
    report["shard"] = {
        "index": shard.index,
        "count": shard.count,
        "first_line": shard.first_line,
        "lines": shard.lines,
    }
    return report


def _prepare(
    pairs: Iterator[tuple[str, str]],
    pairs_in: int,
    inputs: tuple[Path, Path],
    outputs: tuple[str | os.PathLike, str | os.PathLike],
    settings: PrepareSettings,
    workers: int,
    progress: Progress,
) -> dict[str, Any]:
    """Normalize, filter and write ``pairs`` (``pairs_in`` of them, read from ``inputs``); the report."""
    removed: Counter[str] = Counter(dict.fromkeys(FILTERS, 0))
    counts: Counter[str] = Counter()
    pairs_out = 0
    with contextlib.ExitStack() as stack:
        out_src, out_tgt = stack.enter_context(atomic_open_all(list(outputs)))
        jobs = _chunks(pairs, settings)
        if workers > 1:
            pool = stack.enter_context(multiprocessing.get_context("spawn").Pool(workers))
            results = pool.imap(_normalize_chunk, jobs)
        else:
            results = map(_normalize_chunk, jobs)
        for chunk, chunk_counts in results:
            counts += chunk_counts
            for src, tgt in chunk:
                if settings.filter:
                    reason = reject_reason(src, tgt, settings.max_len, settings.max_ratio)
                    if reason is not None:
                        removed[reason] += 1
                        continue
                out_src.write(src + "\n")
                out_tgt.write(tgt + "\n")
                pairs_out += 1
            progress.update(len(chunk))
    progress.done()
    return {
        "inputs": {"src": str(inputs[0]), "tgt": str(inputs[1])},
        "outputs": {"src": str(outputs[0]), "tgt": str(outputs[1])},
        "settings": asdict(settings),
        "pairs_in": pairs_in,
        "pairs_out": pairs_out,
        "removed": dict(removed),
        "removed_total": pairs_in - pairs_out,
        "lines_changed_by_normalization": {
            "src": counts["changed_src"],
            "tgt": counts["changed_tgt"],
        },
        "nonprinting_chars_removed": {
            "src": counts["removed_chars_src"],
            "tgt": counts["removed_chars_tgt"],
        },
        "lines_with_invalid_utf8": {"src": counts["replaced_src"], "tgt": counts["replaced_tgt"]},
    }


def summary(report: dict[str, Any]) -> str:
    """One human line for stderr."""
    removed = report["removed"]
    share = report["removed_total"] / report["pairs_in"] if report["pairs_in"] else 0.0
    reasons = ", ".join(f"{k} {removed[k]}" for k in FILTERS)
    shard = report.get("shard")
    part = f" (shard {shard['index']} of {shard['count']})" if shard else ""
    return (
        f"prepare {report['inputs']['src']} / {report['inputs']['tgt']}{part}: {report['pairs_in']} pairs in, "
        f"{report['pairs_out']} out, {report['removed_total']} removed ({share:.2%}: {reasons}); "
        f"normalization changed {report['lines_changed_by_normalization']['src']} source and "
        f"{report['lines_changed_by_normalization']['tgt']} target lines"
        + _invalid_utf8_note(report)
    )


def _invalid_utf8_note(report: dict[str, Any]) -> str:
    """The summary's warning about bytes that were not UTF-8 (reports of older runs lack it)."""
    invalid = report.get("lines_with_invalid_utf8", {})
    if not any(invalid.values()):
        return ""
    return (
        f"; WARNING: {invalid['src']} source and {invalid['tgt']} target lines held bytes that "
        "are not UTF-8 (or U+FFFD itself), kept as U+FFFD"
    )
