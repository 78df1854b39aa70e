"""Assembling a registry dataset into ``OUT/{train,dev,test}.{SRC,TGT}`` plus ``OUT/manifest.json``.

Every part of every split lists alternatives (the registry's ``from``). They are tried
in order of preference: first those whose files are all present locally, then those
whose files can be obtained (locally or by download), each group in registry order.
The first whose files are obtained and whose archive members are all there is used,
so a file that cannot be had, or an archive that lacks a member, falls back to the
next alternative (logged). Everything is fetched and extracted before anything is
written, so an offline run fails at once with the complete list of files to provide.
Parts are concatenated in registry order; each part's two sides must have the same
number of lines (and the registry's count, where it gives one). The split files are
written together and renamed into place only when all are complete.

Output lines are the corpus lines with the line break removed and any other
character that some reader would take as a line break (``\\r``, U+2028, ...)
turned into a space, so every tool sees one sentence per line.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from transformer_core.data.fetch import Fetcher, Unavailable, file_digests, log, open_text
from transformer_core.data.registry import Alternative, Dataset, Part, Registry, Source
from transformer_core.errors import UserError
from transformer_core.files import atomic_open_all, atomic_write_text

# Characters str.splitlines() and universal-newline readers split on, besides "\n".
_LINE_BREAKS = str.maketrans(dict.fromkeys("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))
# A WMT "fake SGML" segment line: the opening tag, the text up to the last closing tag, and
# whatever follows it, which sacreBLEU keeps as part of the segment.
_SEG_OPEN = re.compile(r"\s*<seg(?:\s[^>]*)?>")
_SEG = re.compile(r"\s*<seg(?:\s[^>]*)?>(.*)</seg>(.*)")


def one_line(raw: str) -> str:
    """A corpus line without its line break and with no other line-breaking character."""
    return raw.rstrip("\n").rstrip("\r").translate(_LINE_BREAKS)


def read_sentences(path: Path, fmt: str) -> Iterator[str]:
    """The sentences of a plain (or gzip) text file, or of the ``<seg>`` lines of an sgm file.

    An sgm segment is read as sacreBLEU reads it (``FakeSGMLDataset``): the text between
    the opening tag and the last ``</seg>``, then any text after that, with whitespace
    runs made one space. A ``<seg>`` line without ``</seg>`` (a damaged file, which
    sacreBLEU would keep tag and all) is an error naming the file and line.
    """
    with open_text(path) as handle:
        if fmt == "text":
            for raw in handle:
                yield one_line(raw)
            return
        for number, raw in enumerate(handle, 1):
            if _SEG_OPEN.match(raw):
                match = _SEG.match(raw)
                if match is None:
                    raise UserError(f"{path}:{number}: a <seg> line without its closing </seg>")
                yield " ".join("".join(match.groups()).translate(_LINE_BREAKS).split())


class _Supply:
    """The files and archive members of one build, each fetched or extracted at most once.

    ``members`` maps each archive to every member any alternative of the build may take
    from it, so an archive is read once whichever of its alternatives is used.
    """

    def __init__(self, registry: Registry, fetcher: Fetcher, members: dict[str, set[str]]):
        self.registry, self.fetcher, self.members = registry, fetcher, members
        self.located: dict[str, Path | None] = {}
        self.paths: dict[str, Path] = {}
        self.failed: dict[str, str] = {}  # file name -> why it cannot be obtained
        self.extracted: dict[str, dict[str, Path]] = {}

    def local(self, name: str) -> bool:
        if name not in self.located:
            self.located[name] = self.fetcher.locate(self.registry.files[name])
        return self.located[name] is not None

    def obtainable(self, name: str) -> bool:
        return self.local(name) or self.fetcher.can_download(self.registry.files[name])

    def obtain(self, name: str) -> Path | None:
        """A verified copy of the file, or None (the reason in ``failed``)."""
        if name not in self.paths and name not in self.failed:
            try:
                found = self.located.get(name)
                self.paths[name] = found or self.fetcher.fetch(self.registry.files[name])
            except Unavailable as err:
                self.failed[name] = str(err)
        return self.paths.get(name)

    def resolve(self, source: Source) -> Path | None:
        """The file a source reads (its archive's member extracted), or None if the archive
        lacks the member. Its file must have been obtained."""
        if source.member is None:
            return self.paths[source.file]
        if source.file not in self.extracted:
            entry = self.registry.files[source.file]
            members = self.members[source.file]
            self.extracted[source.file] = self.fetcher.extract(
                self.paths[source.file], entry, members
            )
        return self.extracted[source.file].get(source.member)

    def problem(self, alt: Alternative) -> str | None:
        """Why ``alt`` cannot be used (files not obtained, members not found), or None."""
        missing = [name for name in alt.files() if self.obtain(name) is None]
        if missing:
            return f"cannot obtain {', '.join(missing)}"
        lacking = [s for s in (alt.src, alt.tgt) if self.resolve(s) is None]
        if lacking:
            return f"{self.paths[lacking[0].file]}: members not found: " + ", ".join(
                str(s.member) for s in lacking
            )
        return None


def _candidates(part: Part, supply: _Supply) -> list[Alternative]:
    """The alternatives to try, in order: all files local, then all files obtainable
    (the first alternative when none is, so that the error lists its files)."""
    local = [a for a in part.alternatives if all(supply.local(n) for n in a.files())]
    rest = [
        a
        for a in part.alternatives
        if a not in local and all(supply.obtainable(n) for n in a.files())
    ]
    return local + rest or [part.alternatives[0]]


def _choose(split: str, part: Part, supply: _Supply) -> tuple[Alternative | None, list]:
    """The first usable alternative of ``part`` (None if none is), and the (alternative,
    problem) pairs of those tried before it."""
    tried: list[tuple[Alternative, str]] = []
    for alt in _candidates(part, supply):
        problem = supply.problem(alt)
        if problem is None:
            if tried:
                log(f"{split} {part.name}: {tried[-1][1]}; using {_describe(alt)} instead")
            return alt, tried
        tried.append((alt, problem))
    return None, tried


def _describe(alt: Alternative) -> str:
    return f"{alt.src.describe()} + {alt.tgt.describe()}"


def unusable_parts_message(
    dataset: Dataset, unusable: list[tuple[str, Part, list]], supply: _Supply
) -> str:
    """Why parts have no usable alternative: each file that cannot be obtained, with what
    to put where, and each archive that lacks members. One line when that is all."""
    failed = {
        name: supply.failed[name]
        for _, _, tried in unusable
        for alt, _ in tried
        for name in alt.files()
        if name in supply.failed
    }
    members = [
        f"{split} {part.name}: {problem}"
        for split, part, tried in unusable
        for alt, problem in tried
        if not any(name in supply.failed for name in alt.files())
    ]
    if not failed and len(members) == 1:
        return f"dataset {dataset.name}, {members[0]}"
    lines = [f"cannot build dataset {dataset.name}:"] + [f"  {line}" for line in members]
    if failed:
        lines += _missing_files_lines(failed, unusable, supply)
    return "\n".join(lines)


def _missing_files_lines(
    failed: dict[str, str], unusable: list[tuple[str, Part, list]], supply: _Supply
) -> list[str]:
    """What to put where: each missing file, and the other ways to get the parts that need it."""
    lines = [f"cannot obtain {len(failed)} file(s):"]
    for name, reason in failed.items():
        entry = supply.registry.files[name]
        checks = ", ".join(
            f"{k} {getattr(entry, k)}" for k in ("size", "sha256", "md5") if getattr(entry, k)
        )
        lines.append(f"  {name}")
        lines.append(
            f"      from: {entry.url or '(no public URL: mirror only)'}"
            + (f"; {checks}" if checks else "")
        )
        lines.append(f"      why:  {reason}")
    for split, part, tried in unusable:
        tried_alternatives = [alt for alt, _ in tried]
        for alt in part.alternatives:
            if alt not in tried_alternatives:
                lines.append(f"  ({split} {part.name} can instead come from {_describe(alt)})")
    lines.append(
        "Offline? Put these files, under exactly these names, in a directory DIR (at its root or in "
        "the subfolder the registry names for the file, e.g. DIR/wmt/newstest2013.en) and run again "
        f"with --mirror DIR, or copy them into the download cache {supply.fetcher.cache}/."
    )
    return lines


def archive_members(dataset: Dataset, splits: Sequence[str]) -> dict[str, set[str]]:
    """Each archive of the ``splits`` and every member any of their alternatives takes from it."""
    members: dict[str, set[str]] = {}
    for split in splits:
        for part in dataset.splits[split]:
            for alt in part.alternatives:
                for source in (alt.src, alt.tgt):
                    if source.member:
                        members.setdefault(source.file, set()).add(source.member)
    return members


def build_dataset(
    dataset: Dataset,
    registry: Registry,
    fetcher: Fetcher,
    out: Path,
    splits: Sequence[str],
) -> dict[str, Any]:
    """Fetch, extract and write the ``splits`` of ``dataset`` under ``out``; return the manifest."""
    supply = _Supply(registry, fetcher, archive_members(dataset, splits))
    plan: dict[str, list[tuple[Part, Alternative]]] = {split: [] for split in splits}
    unusable = []
    for split in splits:
        for part in dataset.splits[split]:
            chosen, tried = _choose(split, part, supply)
            if chosen is None:
                unusable.append((split, part, tried))
            else:
                plan[split].append((part, chosen))
    if unusable:
        raise UserError(unusable_parts_message(dataset, unusable, supply))

    needed = list(
        dict.fromkeys(name for parts in plan.values() for _, alt in parts for name in alt.files())
    )
    manifest_splits = _write_splits(dataset, plan, supply, out)
    files = {}
    for name in needed:
        entry = registry.files[name]
        files[name] = {
            "path": str(supply.paths[name]),
            "url": entry.url,
            "sha256": entry.sha256 or file_digests(supply.paths[name])["sha256"],
            "checksum_verified": bool(entry.sha256 or entry.md5),
        }
    manifest = {
        "dataset": dataset.name,
        "description": dataset.description,
        "src_lang": dataset.src,
        "tgt_lang": dataset.tgt,
        "lines": {
            split: sum(p["lines"] for p in parts) for split, parts in manifest_splits.items()
        },
        "splits": manifest_splits,
        "files": files,
        "mirror": fetcher.mirror,
        "registry": registry.source,
    }
    atomic_write_text(
        out / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    )
    return manifest


def _write_splits(
    dataset: Dataset, plan: dict[str, list[tuple[Part, Alternative]]], supply: _Supply, out: Path
) -> dict[str, list[dict[str, Any]]]:
    """Write every split's two files together (none renamed into place unless all are
    complete); each split's parts as the manifest lists them."""
    paths = [out / f"{split}.{lang}" for split in plan for lang in (dataset.src, dataset.tgt)]
    manifest_splits: dict[str, list[dict[str, Any]]] = {}
    with atomic_open_all(paths) as handles:
        for i, (split, parts) in enumerate(plan.items()):
            src_out, tgt_out = handles[2 * i], handles[2 * i + 1]
            manifest_splits[split] = []
            for part, alt in parts:
                src, tgt = supply.resolve(alt.src), supply.resolve(alt.tgt)
                count = _copy_part(split, part, alt, (src, tgt), src_out, tgt_out)
                manifest_splits[split].append(
                    {
                        "part": part.name,
                        "lines": count,
                        "src": alt.src.describe(),
                        "tgt": alt.tgt.describe(),
                    }
                )
    return manifest_splits


def _copy_part(split: str, part: Part, alt: Alternative, inputs, src_out, tgt_out) -> int:
    """Append one part's sentence pairs to the open split files; its number of pairs."""
    src_path, tgt_path = inputs
    src_lines = read_sentences(src_path, alt.src.format)
    tgt_lines = read_sentences(tgt_path, alt.tgt.format)
    count = 0
    for src, tgt in itertools.zip_longest(src_lines, tgt_lines):
        if src is None or tgt is None:
            rest = 1 + sum(1 for _ in (tgt_lines if src is None else src_lines))
            n_src, n_tgt = (count, count + rest) if src is None else (count + rest, count)
            raise UserError(
                f"{part.name}: {src_path} has {n_src} sentences but {tgt_path} has {n_tgt}"
            )
        src_out.write(src + "\n")
        tgt_out.write(tgt + "\n")
        count += 1
    if part.lines is not None and count != part.lines:
        raise UserError(
            f"{split} corpus {part.name} ({_describe(alt)}): {count} sentence pairs, "
            f"the registry expects {part.lines}"
        )
    return count
