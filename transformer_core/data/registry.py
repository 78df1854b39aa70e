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


# The hex digits of each checksum kind: a checksum written as digits, unquoted, reads in YAML
# as a number, and would otherwise pass as "no checksum".
CHECKSUM_DIGITS = {"sha256": 64, "md5": 32}
FILE_KEYS = ("url", "size", "sha256", "md5", "mirror_dirs")  # a files entry's keys


def _require(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise ConfigError(f"{where}: missing key {key!r}")
    return mapping[key]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping, got {_short(value)}")
    return value


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list, got {_short(value)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a non-empty string, got {_short(value)}")
    return value


def _known(mapping: dict, keys: tuple[str, ...], where: str) -> dict:
    """``mapping``, refused with a ConfigError naming its first unknown key: a misspelled key
    (``sha265``) would otherwise be read as absent and skip what it meant to ask."""
    unknown = [key for key in mapping if key not in keys]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(keys)})")
    return mapping


def _checksum(entry: dict, kind: str, where: str) -> str | None:
    """The optional checksum ``entry[kind]``: a string of its kind's hex digits; the key left
    out where nobody publishes one (an empty value is refused: it would skip the check)."""
    if kind not in entry:
        return None
    value = entry[kind]
    digits = CHECKSUM_DIGITS[kind]
    text = value if isinstance(value, str) else ""
    if len(text) != digits or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise ConfigError(
            f"{where}.{kind}: must be a string of {digits} hex digits (quoted in YAML), "
            f"got {_short(value)}"
        )
    return text


def _source(raw: Any, where: str, files: dict[str, FileEntry]) -> Source:
    name = _require(
        _known(_mapping(raw, where), ("file", "member", "format"), where), "file", where
    )
    if not isinstance(name, str) or name not in files:
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
    raw = _known(_mapping(raw, where), ("description", "src", "tgt", "splits", "generate"), where)
    generate = raw.get("generate")
    splits: dict[str, tuple[Part, ...]] = {}
    if generate is None:
        raw_splits = _known(
            _mapping(_require(raw, "splits", where), f"{where}.splits"), SPLITS, f"{where}.splits"
        )
        for split in SPLITS:
            parts = []
            raw_parts = _list(
                _require(raw_splits, split, f"{where}.splits"), f"{where}.splits.{split}"
            )
            for i, part in enumerate(raw_parts):
                pw = f"{where}.splits.{split}[{i}]"
                part = _known(_mapping(part, pw), ("name", "lines", "from"), pw)
                for j, alt in enumerate(_list(_require(part, "from", pw), f"{pw}.from")):
                    _known(_mapping(alt, f"{pw}.from[{j}]"), ("src", "tgt"), f"{pw}.from[{j}]")
                alternatives = tuple(
                    Alternative(
                        src=_source(
                            _require(alt, "src", f"{pw}.from[{j}]"), f"{pw}.from[{j}].src", files
                        ),
                        tgt=_source(
                            _require(alt, "tgt", f"{pw}.from[{j}]"), f"{pw}.from[{j}].tgt", files
                        ),
                    )
                    for j, alt in enumerate(_list(_require(part, "from", pw), f"{pw}.from"))
                )
                if not alternatives:
                    raise ConfigError(f"{pw}.from: no alternatives")
                lines = _count(part, "lines", pw, 0)
                parts.append(
                    Part(_text(_require(part, "name", pw), f"{pw}.name"), lines, alternatives)
                )
            splits[split] = tuple(parts)
    else:
        generate = _mapping(generate, f"{where}.generate")
        for key in ("seed", *SPLITS):
            value = _require(generate, key, f"{where}.generate")
            low = 0 if key == "seed" else 1  # an empty split fails only later, in training
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(
                    f"{where}.generate.{key}: must be an integer of at least {low}, got {value!r}"
                )
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
        src=_text(_require(raw, "src", where), f"{where}.src"),
        tgt=_text(_require(raw, "tgt", where), f"{where}.tgt"),
        splits=splits,
        generate=generate,
    )


def parse_registry(raw: dict, source: str = SHIPPED) -> Registry:
    """Validate and type a registry mapping (the content of ``datasets.yaml``): every key of
    its kind, a wrong one a ConfigError naming it."""
    raw = _known(_mapping(raw, "registry"), ("files", "datasets"), "registry")
    files = {}
    for name, entry in _mapping(_require(raw, "files", "registry"), "files").items():
        where = f"files.{name}"
        entry = _known(_mapping(entry or {}, where), FILE_KEYS, where)
        url = entry.get("url")
        if url is not None and _text(url, f"{where}.url").rsplit("/", 1)[-1] != name:
            raise ConfigError(f"{where}: the url's basename must be the key (mirror layout): {url}")
        dirs = _list(entry.get("mirror_dirs", []), f"{where}.mirror_dirs")
        files[name] = FileEntry(
            name=name,
            url=url,
            sha256=_checksum(entry, "sha256", where),
            md5=_checksum(entry, "md5", where),
            mirror_dirs=tuple(_text(d, f"{where}.mirror_dirs[{i}]") for i, d in enumerate(dirs)),
            size=_count(entry, "size", where, 1),
        )
    datasets = {
        name: _dataset(name, entry, files)
        for name, entry in _mapping(_require(raw, "datasets", "registry"), "datasets").items()
    }
    return Registry(files=files, datasets=datasets, source=source)


def load_registry() -> Registry:
    """The registry: the file ``$TRANSFORMER_CORE_REGISTRY`` names (whatever its name, even
    ``shipped``), else the one shipped with the package (``transformer_core/data/datasets.yaml``)."""
    return _load(os.environ.get(REGISTRY_VARIABLE) or None)


@cache
def _load(source: str | None) -> Registry:
    """The registry read from the file ``source``, or the package's own (None), parsed once
    per process."""
    if source is None:
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
    return parse_registry(raw, source=str(Path(source).absolute()))  # never read as SHIPPED
