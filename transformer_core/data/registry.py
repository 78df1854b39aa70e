"""The dataset registry: ``datasets.yaml`` read into typed, validated records.

The registry is data, not code: URLs, archive members, checksums and line
counts live in ``datasets.yaml`` (documented at its top), so adding a corpus
or pinning a checksum is an edit there. This module only checks its shape and
gives it types; a malformed entry is a ``ConfigError`` naming the key.

``$TRANSFORMER_CORE_REGISTRY`` names another registry file, read instead of the
shipped one by every command and by the workflow: the way to rehearse a download
against other archives (a test's local server with shrunk copies, whose checksums
cannot be the real ones) without touching the shipped entries. The manifest of a
download records which registry file it used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from transformer_core.errors import ConfigError

SPLITS = ("train", "dev", "test")
REGISTRY_PATH = "datasets.yaml"
REGISTRY_VARIABLE = "TRANSFORMER_CORE_REGISTRY"
SHIPPED = "shipped"  # Registry.source of the package's own datasets.yaml


@dataclass(frozen=True)
class FileEntry:
    """One downloadable (or mirror-only) file, named by its basename."""

    name: str
    url: str | None
    sha256: str | None
    md5: str | None
    mirror_dirs: tuple[str, ...]
    size: int | None = None  # bytes: a wrong file is refused before it is hashed


@dataclass(frozen=True)
class Source:
    """One side of a part: a plain file, or a member of an archive file; text or sgm."""

    file: str
    member: str | None
    format: str  # "text" or "sgm"

    def describe(self) -> str:
        return f"{self.file}:{self.member}" if self.member else self.file


@dataclass(frozen=True)
class Alternative:
    """One way to obtain a part: where its source side and its target side come from."""

    src: Source
    tgt: Source

    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.src.file, self.tgt.file)))


@dataclass(frozen=True)
class Part:
    """A corpus within a split (e.g. Europarl within WMT14 train)."""

    name: str
    lines: int | None
    alternatives: tuple[Alternative, ...]


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    src: str
    tgt: str
    splits: dict[str, tuple[Part, ...]]
    generate: dict[str, int] | None


@dataclass(frozen=True)
class Registry:
    files: dict[str, FileEntry]
    datasets: dict[str, Dataset]
    # The registry file read: SHIPPED, or the path $TRANSFORMER_CORE_REGISTRY names.
    source: str = SHIPPED

    def dataset(self, name: str) -> Dataset:
        try:
            return self.datasets[name]
        except KeyError:
            raise ConfigError(
                f"unknown dataset {name!r}; known: {', '.join(sorted(self.datasets))}"
            ) from None


def _require(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise ConfigError(f"{where}: missing key {key!r}")
    return mapping[key]


def _source(raw: Any, where: str, files: dict[str, FileEntry]) -> Source:
    name = _require(raw, "file", where)
    if name not in files:
        raise ConfigError(f"{where}.file: {name!r} is not listed under files")
    fmt = raw.get("format", "text")
    if fmt not in ("text", "sgm"):
        raise ConfigError(f"{where}.format: {fmt!r} is not 'text' or 'sgm'")
    member = raw.get("member")
    if member is not None:
        normalized = member_path(member)
        if normalized is None:
            raise ConfigError(
                f"{where}.member: {member!r} must be a relative path inside the archive"
            )
        member = normalized
    return Source(file=name, member=member, format=fmt)


def member_path(name: str) -> str | None:
    """An archive member's path in one spelling (``./a//b`` -> ``a/b``), or None for a
    path that points outside the archive's folder (absolute, or with a ``..`` part)."""
    if not isinstance(name, str) or name.startswith("/"):
        return None
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _count(raw: Any, key: str, where: str, minimum: int) -> int | None:
    """The optional integer ``raw[key]`` (at least ``minimum``), or None when absent."""
    value = raw.get(key)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < minimum
    ):
        raise ConfigError(f"{where}.{key}: must be an integer of at least {minimum}, got {value!r}")
    return value


def _dataset(name: str, raw: dict, files: dict[str, FileEntry]) -> Dataset:
    where = f"datasets.{name}"
    generate = raw.get("generate")
    splits: dict[str, tuple[Part, ...]] = {}
    if generate is None:
        raw_splits = _require(raw, "splits", where)
        for split in SPLITS:
            parts = []
            for i, part in enumerate(_require(raw_splits, split, f"{where}.splits")):
                pw = f"{where}.splits.{split}[{i}]"
                alternatives = tuple(
                    Alternative(
                        src=_source(
                            _require(alt, "src", f"{pw}.from[{j}]"), f"{pw}.from[{j}].src", files
                        ),
                        tgt=_source(
                            _require(alt, "tgt", f"{pw}.from[{j}]"), f"{pw}.from[{j}].tgt", files
                        ),
                    )
                    for j, alt in enumerate(_require(part, "from", pw))
                )
                if not alternatives:
                    raise ConfigError(f"{pw}.from: no alternatives")
                lines = _count(part, "lines", pw, 0)
                parts.append(Part(_require(part, "name", pw), lines, alternatives))
            splits[split] = tuple(parts)
    else:
        for key in ("seed", *SPLITS):
            if not isinstance(_require(generate, key, f"{where}.generate"), int):
                raise ConfigError(f"{where}.generate.{key}: must be an integer")
        for key, low in (("lexicon_percent", 1), ("two_clause_percent", 0)):
            value = generate.get(key, 100)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 100:
                raise ConfigError(
                    f"{where}.generate.{key}: must be an integer from {low} to 100, got {value!r}"
                )
        unknown = set(generate) - {"seed", *SPLITS, "lexicon_percent", "two_clause_percent"}
        if unknown:
            raise ConfigError(f"{where}.generate: unknown keys {sorted(unknown)}")
    return Dataset(
        name=name,
        description=raw.get("description", ""),
        src=_require(raw, "src", where),
        tgt=_require(raw, "tgt", where),
        splits=splits,
        generate=generate,
    )


def parse_registry(raw: dict, source: str = SHIPPED) -> Registry:
    """Validate and type a registry mapping (the content of ``datasets.yaml``)."""
    files = {}
    for name, entry in _require(raw, "files", "registry").items():
        entry = entry or {}
        url = entry.get("url")
        if url is not None and url.rsplit("/", 1)[-1] != name:
            raise ConfigError(
                f"files.{name}: the url's basename must be the key (mirror layout): {url}"
            )
        files[name] = FileEntry(
            name=name,
            url=url,
            sha256=entry.get("sha256"),
            md5=entry.get("md5"),
            mirror_dirs=tuple(entry.get("mirror_dirs", ())),
            size=_count(entry, "size", f"files.{name}", 1),
        )
    datasets = {
        name: _dataset(name, entry, files)
        for name, entry in _require(raw, "datasets", "registry").items()
    }
    return Registry(files=files, datasets=datasets, source=source)


def load_registry() -> Registry:
    """The registry: the file ``$TRANSFORMER_CORE_REGISTRY`` names, else the one shipped
    with the package (``transformer_core/data/datasets.yaml``)."""
    return _load(os.environ.get(REGISTRY_VARIABLE) or SHIPPED)


@cache
def _load(source: str) -> Registry:
    """The registry read from ``source`` (SHIPPED or a path), parsed once per process."""
    if source == SHIPPED:
        files = resources.files("transformer_core.data")
        return parse_registry(yaml.safe_load(files.joinpath(REGISTRY_PATH).read_text("utf-8")))
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"${REGISTRY_VARIABLE}: cannot read {source}: {err.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"${REGISTRY_VARIABLE}: {source} is not valid YAML: {err}") from None
    return parse_registry(raw, source=source)
