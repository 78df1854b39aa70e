"""Atomic file output: write to a temporary file beside the target, then rename.

A killed job therefore never leaves a half-written output that a later step
(or Snakemake) would mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
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


def read_lines(
    path: str | os.PathLike, *, strip_cr: bool = False, limit: int | None = None
) -> list[str]:
    """The lines of a UTF-8 text file, gzipped when its name ends in ``.gz``: the project's one reader.

    Lines are split on ``\\n`` only, so U+2028, U+0085 and other Unicode separators stay
    inside their sentence, as in the Moses perl scripts and sacreBLEU's CLI; the final
    newline is not an empty line. A ``\\r`` before the newline is kept unless
    ``strip_cr`` (model inputs: a file saved with CRLF line ends translates like the same
    file with LF), because scoring must see the bytes the perl chain sees. ``limit``
    reads only the first that many lines. A missing or non-UTF-8 file is a UserError
    naming the file and the line; each line is decoded alone so that the number is the
    line's own (a text-mode file decodes whole blocks, and would name the block's first).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    lines: list[str] = []
    try:
        with opener(path, "rb") as handle:
            for raw in handle:
                if limit is not None and len(lines) >= limit:
                    break
                line = raw.decode("utf-8")
                line = line[:-1] if line.endswith("\n") else line
                lines.append(line[:-1] if strip_cr and line.endswith("\r") else line)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, not a text file") from None
    except UnicodeDecodeError as err:
        raise UserError(
            f"{path}: not UTF-8 text near line {len(lines) + 1} ({err.reason})"
        ) from None
    return lines


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_open(path, "w") as handle:
        handle.write(text)


def save_png(fig, out: str | os.PathLike) -> None:
    """A matplotlib figure as a PNG at ``out`` (folders made), written atomically, then closed."""
    import matplotlib.pyplot as plt

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


def read_versioned_json(
    path: str | os.PathLike, fmt: str, version: int, kind: str, how: str
) -> dict:
    """A JSON file this package wrote, of format ``fmt`` and ``version``; else one UserError.

    ``kind`` names the file in errors (``binarized split``), ``how`` says how to make it.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no {kind} here ({how})") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: not a JSON {kind} ({err})") from None
    found = (data.get("format"), data.get("version")) if isinstance(data, dict) else (None, None)
    if found != (fmt, version):
        raise UserError(
            f"{path}: format {found[0]!r} version {found[1]!r}, expected {fmt!r} version {version}"
        )
    return data
