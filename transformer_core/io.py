"""Atomic file output: write to a temporary file beside the target, then rename.

A killed job therefore never leaves a half-written output that a later step
(or Snakemake) would mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from transformer_core.errors import UserError


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file next to ``path``; rename it over ``path`` on success.

    On an exception the temporary file is removed and ``path`` is untouched.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open supports modes 'w' and 'wb', not {mode!r}")
    target = Path(path)
    check_output(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual mode
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def sha256_of(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (sentencepiece models' fingerprint)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_output(path: str | os.PathLike, what: str = "output") -> None:
    """UserError, naming ``path``, when it cannot be written as a file: it is a folder, or a
    folder above it is a file. Commands call it before their work, so a mistake costs nothing."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{what} {target} is a directory; give a file name")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{what} {target}: {parent} is a file, not a directory")
            break


def check_input_file(path: str | os.PathLike, what: str = "input") -> None:
    """UserError, naming ``path``, unless it is an existing file (not a folder)."""
    source = Path(path)
    if source.is_dir():
        raise UserError(f"{what} {source} is a directory; give a file")
    if not source.is_file():
        raise UserError(f"{what} {source}: no such file")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_open(path, "w") as handle:
        handle.write(text)
