"""Shards of a parallel training corpus: contiguous line ranges, found once, read by many jobs.

The paper-scale corpora are too large for one process per stage (EN-FR: 40.8M
raw pairs, hours on one core). The workflow therefore cuts the training corpus into
N shards, runs ``prepare`` and ``binarize`` on each shard as separate jobs, and
concatenates the results (``binarized.concatenate``, ``merge_reports``).

A shard is a contiguous range of lines: shard i of N holds lines
``[i*T//N, (i+1)*T//N)`` of the T-line corpus. ``plan`` finds the byte offset
where each range starts in the source and in the target file and writes them to
a small JSON index; each shard's job seeks there and reads only its own lines,
so the corpus is never copied. Because every step after the cut treats each
pair on its own and the shards are put back together in order, the result does
not depend on N: the same sentences in the same order, the same binarized bytes
(``tests/unit/test_data_shards.py`` checks N = 1, 2 and 8).

``default_count`` is the number of shards when the configuration names none:
one per ``PAIRS_PER_SHARD`` training pairs, as far as the dataset registry
records its size.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformer_core.data.registry import Dataset
from transformer_core.errors import UserError
from transformer_core.files import atomic_write_text, read_versioned_json

FORMAT = "transformer_core.shards"
VERSION = 1
SIDES = ("src", "tgt")
BLOCK_BYTES = 16 << 20
# About 100 s of prepare + binarize on one core (~2,900 pairs/s): long enough that the
# start of a job (a second locally, more as a cluster job) is noise, short enough that
# EN-FR's 40.8M raw pairs (sharded before cleaning) make 128 jobs (the cap) for 8 or 32 cores.
PAIRS_PER_SHARD = 300_000
MAX_DEFAULT_SHARDS = 128
# For a dataset whose size the registry does not record (WMT14 EN-FR's corpora have no
# sourced line counts): enough for a few million pairs.
UNKNOWN_SIZE_SHARDS = 16


def expected_pairs(dataset: Dataset) -> int | None:
    """Training pairs of a registry dataset, before cleaning, where the registry records them."""
    if dataset.generate is not None:
        return dataset.generate["train"]
    lines = [part.lines for part in dataset.splits["train"]]
    return None if None in lines else sum(lines)


def default_count(train_pairs: int | None) -> int:
    """Shards for a training corpus of about ``train_pairs`` pairs (None: size unknown)."""
    if train_pairs is None:
        return UNKNOWN_SIZE_SHARDS
    return max(1, min(MAX_DEFAULT_SHARDS, math.ceil(train_pairs / PAIRS_PER_SHARD)))


# The stems ``name`` writes, for the 9999 shards a pair may have at most (the `shard` wildcard).
NAME_PATTERN = "[0-9]{4}-of-[0-9]{4}"


def name(index: int, count: int) -> str:
    """The shard's file stem, ``0003-of-0008``: the count is in the name, so shards of
    different counts never mix."""
    return f"{index:04d}-of-{count:04d}"


def parse_name(stem: str) -> tuple[int, int]:
    """``(index, count)`` from a stem made by ``name``."""
    index, sep, count = stem.partition("-of-")
    if not (sep and index.isdigit() and count.isdigit()):
        raise UserError(f"{stem!r} is not a shard name like 0003-of-0008")
    return int(index), int(count)


@dataclass(frozen=True)
class Shard:
    """One shard: lines ``[first_line, first_line + lines)``, at these byte ranges of its files."""

    index: int
    count: int
    first_line: int
    lines: int
    src: Path
    tgt: Path
    src_bytes: tuple[int, int]
    tgt_bytes: tuple[int, int]

    @property
    def label(self) -> str:
        return f"shard {self.index} of {self.count}"

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The shard's (source, target) lines, without line breaks; invalid UTF-8 replaced
        (as ``fetch.open_text`` reads whole files)."""
        yield from zip(
            _range_lines(self.src, *self.src_bytes),
            _range_lines(self.tgt, *self.tgt_bytes),
            strict=True,
        )


def count_lines(path: Path) -> int:
    """Lines as ``fetch.open_text`` reads them, gzip too (a last line without a line break
    counts)."""
    count, last = 0, b"\n"
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        while block := handle.read(BLOCK_BYTES):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def parallel_lines(src: Path, tgt: Path) -> int:
    """The line count of a parallel corpus: both files exist and have as many lines."""
    for path in (src, tgt):
        if not path.is_file():
            raise UserError(f"{path}: no such file")
    n_src, n_tgt = count_lines(src), count_lines(tgt)
    if n_src != n_tgt:
        raise UserError(
            f"source and target differ in length: {src} has {n_src} lines, {tgt} has {n_tgt}"
        )
    return n_src


def _range_lines(path: Path, start: int, end: int) -> Iterator[str]:
    with open(path, "rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            raw = handle.readline(left)
            if not raw:
                raise UserError(f"{path}: ends before byte {end} of its shard index (changed?)")
            left -= len(raw)
            yield raw.decode("utf-8", errors="replace").rstrip("\n")


def _line_offsets(path: Path, starts: Sequence[int]) -> list[int]:
    """Byte offset where each line number of ``starts`` (ascending, each below the file's
    line count) begins: just after the line break that ends the line before."""
    offsets = []
    pending = list(starts)
    seen, position = 0, 0  # line breaks before ``position``
    with open(path, "rb") as handle:
        while pending and pending[0] == 0:
            offsets.append(0)
            pending.pop(0)
        while pending and (block := handle.read(BLOCK_BYTES)):
            breaks = block.count(b"\n")
            if pending[0] <= seen + breaks:
                where = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))
                while pending and pending[0] <= seen + breaks:
                    offsets.append(position + int(where[pending.pop(0) - seen - 1]) + 1)
            seen += breaks
            position += len(block)
    return offsets


def plan(src: str | os.PathLike, tgt: str | os.PathLike, count: int) -> dict[str, Any]:
    """The shard index of a parallel corpus cut into ``count`` shards of equal line counts.

    Two passes over each file (count the lines, then find the shard starts); memory is
    one block. Source and target must have the same number of lines.
    """
    if count < 1:
        raise UserError(f"the number of shards must be at least 1, got {count}")
    files = {"src": Path(src), "tgt": Path(tgt)}
    total = parallel_lines(files["src"], files["tgt"])
    for path in files.values():
        if path.name.endswith(".gz"):
            raise UserError(f"{path}: shards need plain text (seekable), not gzip")
    starts = [i * total // count for i in range(count + 1)]
    # Byte ranges per side: shard i runs from its first line's offset to the next shard's.
    ranges = {}
    for side, path in files.items():
        offsets = [*_line_offsets(path, starts[:-1]), path.stat().st_size]
        ranges[side] = list(zip(offsets[:-1], offsets[1:], strict=True))
    return {
        "format": FORMAT,
        "version": VERSION,
        "files": {
            side: {"path": str(path), "bytes": path.stat().st_size} for side, path in files.items()
        },
        "pairs": total,
        "shards": [
            {
                "first_line": starts[i],
                "lines": starts[i + 1] - starts[i],
                **{f"{side}_bytes": list(ranges[side][i]) for side in SIDES},
            }
            for i in range(count)
        ],
    }


def write_plan(
    src: str | os.PathLike, tgt: str | os.PathLike, count: int, out: str | os.PathLike
) -> dict[str, Any]:
    """``plan``, written atomically to ``out``."""
    index = plan(src, tgt, count)
    atomic_write_text(out, json.dumps(index, indent=2) + "\n")
    return index


def load_shard(index_path: str | os.PathLike, index: int, count: int | None = None) -> Shard:
    """Shard ``index`` of the index file; checks the files still have the indexed sizes,
    and that the index has ``count`` shards when given."""
    path = Path(index_path)
    data = read_versioned_json(
        path, FORMAT, VERSION, "shard index", "run `transformer-core shards split`"
    )
    shards = data["shards"]
    if count is not None and count != len(shards):
        raise UserError(f"{path}: indexes {len(shards)} shards, not {count}")
    if not 0 <= index < len(shards):
        raise UserError(f"{path}: no shard {index} (it has {len(shards)}, numbered from 0)")
    files = {side: Path(data["files"][side]["path"]) for side in SIDES}
    for side, file in files.items():
        if not file.is_file() or file.stat().st_size != data["files"][side]["bytes"]:
            raise UserError(f"{file}: changed since {path} was written; make the index again")
    entry = shards[index]
    return Shard(
        index=index,
        count=len(shards),
        first_line=entry["first_line"],
        lines=entry["lines"],
        src=files["src"],
        tgt=files["tgt"],
        src_bytes=tuple(entry["src_bytes"]),
        tgt_bytes=tuple(entry["tgt_bytes"]),
    )


SUMMED = ("pairs_in", "pairs_out", "removed_total")
SUMMED_BY_KEY = (
    "removed",
    "lines_changed_by_normalization",
    "nonprinting_chars_removed",
    "lines_with_invalid_utf8",
)


def merge_reports(reports: Sequence[dict[str, Any]], sources: Sequence[str]) -> dict[str, Any]:
    """One prepare report for the whole corpus from its shards' reports, in shard order.

    The counts add up; ``outputs`` lists the shards' files; ``shards`` keeps each
    shard's own counts. ``sources`` names the reports, for errors.
    """
    if not reports:
        raise UserError("no shard reports to merge")
    first = reports[0]
    for report, source in zip(reports, sources, strict=True):
        for key in ("inputs", "settings"):
            if report.get(key) != first.get(key):
                raise UserError(f"{source}: {key} differ from those of {sources[0]}")
    ids = [report.get("shard", {}) for report in reports]
    expected = list(range(len(reports)))
    if [i.get("index") for i in ids] != expected or any(
        i.get("count") != len(reports) for i in ids
    ):
        raise UserError(
            f"reports {', '.join(sources)} are not shards 0..{len(reports) - 1} of "
            f"{len(reports)} in order"
        )
    merged: dict[str, Any] = {}
    for key, value in first.items():  # the keys of one report, in its order
        if key == "outputs":
            merged[key] = {side: [r["outputs"][side] for r in reports] for side in SIDES}
        elif key in SUMMED:
            merged[key] = sum(r[key] for r in reports)
        elif key in SUMMED_BY_KEY:
            merged[key] = {k: sum(r[key][k] for r in reports) for k in value}
        elif key != "shard":
            merged[key] = value
    merged["shards"] = [
        {
            **report["shard"],
            "pairs_in": report["pairs_in"],
            "pairs_out": report["pairs_out"],
            "removed": report["removed"],
        }
        for report in reports
    ]
    return merged
