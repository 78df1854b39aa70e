"""Assembling a registry dataset into ``OUT/{train,dev,test}.{SRC,TGT}`` plus ``OUT/manifest.json``.

For every part of every split, the first alternative whose files are all
present locally is used, else the first that can be downloaded; all files
are fetched before anything is written, so an offline run fails at once with
the complete list of files to provide. Parts are concatenated in registry
order; each part's two sides must have the same number of lines (and the
registry's count, where it gives one).

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

from transformer_core.data.fetch import Fetcher, Unavailable, file_digests, open_text
from transformer_core.data.registry import Alternative, Dataset, Part, Registry, Source
from transformer_core.errors import UserError
from transformer_core.files import atomic_open, atomic_write_text

# Characters str.splitlines() and universal-newline readers split on, besides "\n".
_LINE_BREAKS = str.maketrans(dict.fromkeys("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))
_SEG = re.compile(r"<seg[^>]*>(.*)</seg>")


def one_line(raw: str) -> str:
    """A corpus line without its line break and with no other line-breaking character."""
    return raw.rstrip("\n").rstrip("\r").translate(_LINE_BREAKS)


def read_sentences(path: Path, fmt: str) -> Iterator[str]:
    """The sentences of a plain (or gzip) text file, or of the ``<seg>`` lines of an sgm file."""
    with open_text(path) as handle:
        if fmt == "text":
            for raw in handle:
                yield one_line(raw)
            return
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if line.startswith("<seg"):
                match = _SEG.fullmatch(line)
                if match is None:
                    raise UserError(f"{path}:{number}: a <seg> line without its closing </seg>")
                yield " ".join(match.group(1).translate(_LINE_BREAKS).split())


def _choose(
    part: Part, fetcher: Fetcher, registry: Registry, located: dict[str, Path | None]
) -> Alternative:
    """The first alternative available locally, else the first downloadable one."""

    def local(name: str) -> bool:
        if name not in located:
            located[name] = fetcher.locate(registry.files[name])
        return located[name] is not None

    for alt in part.alternatives:
        if all(local(name) for name in alt.files()):
            return alt
    for alt in part.alternatives:
        if all(fetcher.can_download(registry.files[name]) for name in alt.files()):
            return alt
    return part.alternatives[0]


def missing_files_message(
    dataset: Dataset,
    failures: dict[str, str],
    plan: dict[str, list[tuple[Part, Alternative]]],
    registry: Registry,
    fetcher: Fetcher,
) -> str:
    """What to put where: each missing file, and the other ways to get the parts that need it."""
    lines = [f"cannot obtain {len(failures)} file(s) for dataset {dataset.name}:"]
    for name, reason in failures.items():
        entry = registry.files[name]
        checks = ", ".join(
            f"{k} {getattr(entry, k)}" for k in ("sha256", "md5") if getattr(entry, k)
        )
        lines.append(f"  {name}")
        lines.append(
            f"      from: {entry.url or '(no public URL: mirror only)'}"
            + (f"; {checks}" if checks else "")
        )
        lines.append(f"      why:  {reason}")
    for split, parts in plan.items():
        for part, chosen in parts:
            if any(name in failures for name in chosen.files()):
                for alt in part.alternatives:
                    if alt != chosen:
                        lines.append(
                            f"  ({split} {part.name} can instead come from "
                            f"{alt.src.describe()} + {alt.tgt.describe()})"
                        )
    lines.append(
        "Offline? Put these files, under exactly these names, in a directory DIR (at its root or in "
        "the subfolder the registry names for the file, e.g. DIR/wmt/newstest2013.en) and run again "
        f"with --mirror DIR, or copy them into the download cache {fetcher.cache}/."
    )
    return "\n".join(lines)


def build_dataset(
    dataset: Dataset,
    registry: Registry,
    fetcher: Fetcher,
    out: Path,
    splits: Sequence[str],
) -> dict[str, Any]:
    """Fetch, extract and write the ``splits`` of ``dataset`` under ``out``; return the manifest."""
    located: dict[str, Path | None] = {}
    plan = {
        split: [(part, _choose(part, fetcher, registry, located)) for part in dataset.splits[split]]
        for split in splits
    }
    needed = list(
        dict.fromkeys(name for parts in plan.values() for _, alt in parts for name in alt.files())
    )

    paths: dict[str, Path] = {}
    failures: dict[str, str] = {}
    for name in needed:
        try:
            paths[name] = located.get(name) or fetcher.fetch(registry.files[name])
        except Unavailable as err:
            failures[name] = str(err)
    if failures:
        raise UserError(missing_files_message(dataset, failures, plan, registry, fetcher))

    members: dict[str, set[str]] = {}
    for parts in plan.values():
        for _, alt in parts:
            for source in (alt.src, alt.tgt):
                if source.member:
                    members.setdefault(source.file, set()).add(source.member)
    extracted = {
        name: fetcher.extract(paths[name], registry.files[name], wanted)
        for name, wanted in members.items()
    }

    def resolve(source: Source) -> Path:
        return extracted[source.file][source.member] if source.member else paths[source.file]

    out.mkdir(parents=True, exist_ok=True)
    manifest_splits: dict[str, list[dict[str, Any]]] = {}
    for split, parts in plan.items():
        manifest_splits[split] = []
        with (
            atomic_open(out / f"{split}.{dataset.src}") as src_out,
            atomic_open(out / f"{split}.{dataset.tgt}") as tgt_out,
        ):
            for part, alt in parts:
                count = _copy_part(part, alt, resolve(alt.src), resolve(alt.tgt), src_out, tgt_out)
                manifest_splits[split].append(
                    {
                        "part": part.name,
                        "lines": count,
                        "src": alt.src.describe(),
                        "tgt": alt.tgt.describe(),
                    }
                )
    files = {}
    for name in needed:
        entry = registry.files[name]
        files[name] = {
            "path": str(paths[name]),
            "url": entry.url,
            "sha256": entry.sha256 or file_digests(paths[name])["sha256"],
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
    }
    atomic_write_text(
        out / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    )
    return manifest


def _copy_part(
    part: Part, alt: Alternative, src_path: Path, tgt_path: Path, src_out, tgt_out
) -> int:
    """Append one part's sentence pairs to the open split files; its number of pairs."""
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
            f"{part.name}: {src_path} and {tgt_path} have {count} sentences, the registry expects {part.lines}"
        )
    return count
