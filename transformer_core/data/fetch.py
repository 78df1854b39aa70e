"""Getting the registry's files: cache, mirror, resumable HTTP, checksums, extraction.

A file is looked for, in order, in the cache (``CACHE/NAME``), in a local
mirror directory (its root, then its ``mirror_dirs``), and is otherwise
downloaded from a URL mirror or from its own URL into ``CACHE/NAME.part``.
A download cut off mid-transfer resumes from the bytes already on disk (HTTP
Range), both within one run (retries) and across runs (the ``.part`` file).
Every file is checked against its registry size and checksum before use: a
file that fails is rejected and never extracted. A download that fails is
deleted; a cached file that fails is deleted only where this pipeline stored it
there and it is unchanged since (``stored_mark``), and otherwise refused, named
and kept: a file a user put in the cache is never deleted. A server that announces another size is refused before any byte is
written. Archives are extracted member by member into a fresh folder named
after the archive's checksum, renamed into place only when complete, so a bad
archive can never overwrite good extracted data. Members are matched by their
path in one spelling (``./training/x`` is ``training/x``); a member whose path
leaves the archive's folder (absolute, ``..``) is never matched, so nothing is
ever written outside the extraction folder.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from http.client import HTTPException
from pathlib import Path
from typing import IO

from transformer_core.data.registry import FileEntry, member_path
from transformer_core.errors import UserError

CHUNK = 1 << 20
USER_AGENT = "transformer-core/0.1 (reproduction of Vaswani et al. 2017)"


class Unavailable(Exception):
    """A file could not be obtained from any place; the message says why."""


def file_digests(path: Path) -> dict[str, str]:
    """sha256 and md5 of a file, in one pass."""
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            sha256.update(block)
            md5.update(block)
    return {"sha256": sha256.hexdigest(), "md5": md5.hexdigest()}


def verification_error(path: Path, entry: FileEntry) -> str | None:
    """Why ``path`` is not ``entry`` (its size, then its checksums), or None when it matches."""
    if entry.size is not None and (size := path.stat().st_size) != entry.size:
        return f"{path}: {size} bytes, the registry expects {entry.size}"
    if not (entry.sha256 or entry.md5):
        return None
    digests = file_digests(path)
    for kind in ("sha256", "md5"):
        expected = getattr(entry, kind)
        if expected and digests[kind] != expected.lower():
            return f"{path}: {kind} {digests[kind]} does not match the registry's {expected}"
    return None


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://", "file://"))


def log(message: str) -> None:
    """One progress line of the download on stderr."""
    print(f"[download] {message}", file=sys.stderr, flush=True)


def http_download(
    url: str, part: Path, retries: int = 5, timeout: float = 60.0, size: int | None = None
) -> None:
    """Download ``url`` into ``part``, resuming from the bytes already in ``part``.

    A connection that drops mid-transfer is retried (up to ``retries`` times,
    with back-off) with ``Range: bytes=N-``; a server that ignores the range
    (200 instead of 206) makes the download restart from zero.
    Raises ``Unavailable`` when the server cannot be reached or refuses, or
    announces a length other than ``size`` (the registry's, when it has one).
    """
    part.parent.mkdir(parents=True, exist_ok=True)
    attempt = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        if have:
            request.add_header("Range", f"bytes={have}-")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status = getattr(response, "status", 200)
                if have and status != 206:
                    have = 0  # the server sent the whole file
                total = response.headers.get("Content-Length")
                if size is not None and total is not None and int(total) + have != size:
                    raise Unavailable(
                        f"{url}: the server announces {int(total) + have} bytes, "
                        f"the registry expects {size}"
                    )
                log(
                    f"{url}: {'resuming at ' + str(have) if have else 'starting'}"
                    f"{f', {int(total) + have} bytes' if total else ''}"
                )
                with open(part, "ab" if have else "wb") as out:
                    shutil.copyfileobj(response, out, CHUNK)
                if total is not None and part.stat().st_size < int(total) + have:
                    raise HTTPException(f"connection closed at {part.stat().st_size} bytes")
                return
        except urllib.error.HTTPError as err:
            if err.code == 416 and have:  # nothing left to send: the part is complete
                return
            raise Unavailable(f"{url}: HTTP {err.code} {err.reason}") from None
        except (urllib.error.URLError, HTTPException, OSError, TimeoutError) as err:
            got = part.stat().st_size if part.exists() else 0
            if got <= have and isinstance(err, urllib.error.URLError):
                raise Unavailable(f"{url}: {err.reason}") from None  # unreachable, not cut off
            attempt += 1
            if attempt > retries:
                raise Unavailable(
                    f"{url}: cut off after {got} bytes ({err}); run again to resume"
                ) from None
            log(f"{url}: interrupted at {got} bytes ({err}); retry {attempt}/{retries}")
            time.sleep(min(2.0 ** (attempt - 1) * 0.1, 10.0))


def stored_mark(path: Path) -> Path:
    """The mark beside a file the fetcher stored in its cache: the file's size and mtime then."""
    return path.with_name(f".{path.name}.stored")


def _stamp(path: Path) -> str:
    status = path.stat()
    return f"{status.st_size} {status.st_mtime_ns}\n"


def stored_here(path: Path) -> bool:
    """Whether ``path`` is a file the fetcher stored and nothing has changed since."""
    mark = stored_mark(path)
    try:
        return mark.read_text() == _stamp(path)
    except (OSError, UnicodeDecodeError):
        return False


class Fetcher:
    """Finds or downloads registry files into ``cache``, optionally from a ``mirror``."""

    def __init__(
        self, cache: str | os.PathLike, mirror: str | None = None, retries: int = 5
    ) -> None:
        self.cache = Path(cache)
        self.mirror = mirror
        self.retries = retries

    def _mirror_candidates(self, entry: FileEntry) -> list[str]:
        if not self.mirror:
            return []
        folders = ["", *entry.mirror_dirs]
        if is_url(self.mirror):
            base = self.mirror.rstrip("/")
            return ["/".join(p for p in (base, folder, entry.name) if p) for folder in folders]
        return [str(Path(self.mirror, folder, entry.name)) for folder in folders]

    def locate(self, entry: FileEntry) -> Path | None:
        """A verified local copy of ``entry`` (cache or local mirror), without any network."""
        cached = self.cache / entry.name
        if cached.is_file():
            error = verification_error(cached, entry)
            if error is None:
                return cached
            if not stored_here(cached):
                raise UserError(
                    f"{error}; this cache file was not stored by a download, so it is kept: "
                    f"replace it with the right file, move it away, or correct the registry's "
                    f"entry {entry.name}"
                )
            log(f"rejecting cached file: {error}; deleting it (a download stored it)")
            cached.unlink()
            stored_mark(cached).unlink(missing_ok=True)
        for candidate in self._mirror_candidates(entry):
            path = Path(candidate)
            if not is_url(candidate) and path.is_file():
                error = verification_error(path, entry)
                if error is None:
                    return path
                log(f"rejecting mirror file: {error}")
        return None

    def can_download(self, entry: FileEntry) -> bool:
        return entry.url is not None or (self.mirror is not None and is_url(self.mirror))

    def fetch(self, entry: FileEntry) -> Path:
        """A verified copy of ``entry``: local, or downloaded into the cache. Raises ``Unavailable``."""
        found = self.locate(entry)
        if found is not None:
            return found
        urls = [c for c in self._mirror_candidates(entry) if is_url(c)]
        if entry.url:
            urls.append(entry.url)
        if not urls:
            raise Unavailable(f"{entry.name}: not in the cache or the mirror, and it has no URL")
        reasons = []
        part = self.cache / f"{entry.name}.part"
        if entry.size is not None and part.is_file() and part.stat().st_size > entry.size:
            part.unlink()  # longer than the file: not a beginning of it
        for url in urls:
            try:
                http_download(url, part, retries=self.retries, size=entry.size)
            except Unavailable as err:
                reasons.append(str(err))
                continue
            error = verification_error(part, entry)
            if error is not None:
                part.unlink()
                reasons.append(f"{url}: rejected, {error}")
                continue
            os.replace(part, self.cache / entry.name)
            stored_mark(self.cache / entry.name).write_text(_stamp(self.cache / entry.name))
            log(f"{entry.name}: verified and stored in {self.cache}")
            return self.cache / entry.name
        raise Unavailable("; ".join(reasons))

    def extract(self, archive: Path, entry: FileEntry, members: Iterable[str]) -> dict[str, Path]:
        """Extract ``members`` (paths as ``registry.member_path`` spells them) of the tar
        ``archive``, once per archive content; the paths of those the archive holds.

        A member the archive lacks is left out of the result (the caller may have another
        way to get it); an archive that cannot be read to its end is a ``UserError``.
        """
        members = sorted(set(members))
        digest = entry.sha256 or entry.md5 or file_digests(archive)["sha256"]
        folder = self.cache / "extracted" / f"{entry.name}.{digest[:12]}"
        paths = {m: folder / m for m in members}
        missing = {m for m in members if not paths[m].is_file()}
        if not missing:
            return paths
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=folder.parent))
        try:
            found = _extract_members(archive, missing, tmp)
            for member in found:  # only complete members are moved into place
                paths[member].parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp / member, paths[member])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return {m: path for m, path in paths.items() if m not in missing or m in found}


def _extract_members(archive: Path, wanted: set[str], dest: Path) -> set[str]:
    """Stream through ``archive`` once, writing the ``wanted`` members under ``dest``
    (each at its ``member_path``); the members found."""
    found: set[str] = set()
    last = None
    try:
        with tarfile.open(archive, "r:*") as tar:
            for info in tar:
                last = info.name
                name = member_path(info.name)
                if name in wanted and name not in found and info.isfile():
                    _copy_member(tar, info, dest / name)
                    found.add(name)
                    if found == wanted:
                        break
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as err:
        where = f"at member {last}" if last else "at its start"
        raise UserError(
            f"{archive}: corrupt or unreadable archive ({where}: {err}); "
            "delete it and download again"
        ) from None
    return found


def _copy_member(tar: tarfile.TarFile, info: tarfile.TarInfo, target: Path) -> None:
    """Write the regular file ``info`` of ``tar`` to ``target`` (a truncated one raises)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(info)
    assert source is not None  # a regular file always has content
    with source, open(target, "wb") as out:
        shutil.copyfileobj(source, out, CHUNK)


@contextlib.contextmanager
def open_text(path: Path) -> Iterator[IO[str]]:
    """Open a plain or gzip text file for reading lines split on ``\\n`` only."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="\n") as handle:
        yield handle
