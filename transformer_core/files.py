"""Atomic file output: write to a temporary file beside the target, then rename.

A killed job therefore never leaves a half-written output that a later step
(or Snakemake) would mistake for a finished one. The rename is for regular files: an output
path that is a device, FIFO or socket (or a link to one) is written through, and a link to a
regular file keeps being a link (``destination``), so an output path never destroys what it
points at.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import hashlib
import json
import os
import socket
import stat
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from transformer_core.errors import UserError


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file next to ``path``; rename it over ``path`` on success.

    On an exception the temporary file is removed and ``path`` is untouched. Only a regular
    file is ever replaced (``destination``): a device, FIFO or socket, or a link to one
    (``/dev/null``, ``/dev/stdout``), is written through, and a link to a regular file has its
    file replaced and stays a link.
    """
    target, through = destination(Path(path))
    if through:
        with _written_through(target, mode, **kwargs) as handle:
            yield handle
        return
    with _temporary_beside(target, mode, **kwargs) as (handle, tmp):
        yield handle
        _close_synced(handle)
        os.replace(tmp, target)


def destination(path: Path) -> tuple[Path, bool]:
    """Where a write to ``path`` lands, and whether it is written through rather than renamed
    into place: a path that is (or links to) a device, FIFO or socket is written through; a
    link to a regular file, or to no file yet, lands on the file it names (the link stays);
    any other path is itself."""
    try:
        mode = path.stat().st_mode  # follows links
    except FileNotFoundError:
        mode = None
    except OSError:  # a link loop, a name too long: check_output names it
        return path, False
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return path, True
    return (Path(os.path.realpath(path)) if path.is_symlink() else path), False


@contextlib.contextmanager
def _written_through(target: Path, mode: str, **kwargs: Any) -> Iterator[IO]:
    """``target`` (a device, FIFO or socket) opened for writing as it is: no temporary, no
    rename, no fsync (a pipe has none)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic writes support modes 'w' and 'wb', not {mode!r}")
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    try:
        handle = open(target, mode, **kwargs)  # noqa: SIM115 - closed below
    except OSError as err:
        raise UserError(f"cannot write {target}: {err.strerror}") from err
    with handle:
        yield handle


@contextlib.contextmanager
def atomic_open_all(paths: list[str | os.PathLike], mode: str = "w") -> Iterator[list[IO]]:
    """``atomic_open`` for files that belong together (a corpus's ``.src`` and ``.tgt``).

    On success every old target is removed before the first new file is renamed into
    place, so a kill in between leaves some of the new files and none of the old ones:
    a missing file, which every reader reports, never an old ``.src`` beside a new
    ``.tgt`` of the same line count.
    """
    targets = [destination(Path(path)) for path in paths]
    if any(through for _, through in targets):
        raise UserError(
            "these outputs belong together and are renamed into place: give each a regular "
            f"file, not a device, FIFO or socket ({', '.join(map(str, paths))})"
        )
    targets = [target for target, _ in targets]
    with contextlib.ExitStack() as stack:
        handles, temporaries = [], []
        for target in targets:
            handle, tmp = stack.enter_context(_temporary_beside(target, mode))
            handles.append(handle)
            temporaries.append(tmp)
        yield handles
        for handle in handles:
            _close_synced(handle)
        for target in targets:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        for tmp, target in zip(temporaries, targets, strict=True):
            os.replace(tmp, target)


@contextlib.contextmanager
def _temporary_beside(target: Path, mode: str, **kwargs: Any) -> Iterator[tuple[IO, str]]:
    """An open temporary file next to ``target`` (checked first), removed if still there
    when the block ends: the caller renames it into place on success."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic writes support modes 'w' and 'wb', not {mode!r}")
    check_output(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    for orphan in orphans(target):
        orphan.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(target), suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600 files; outputs get the usual mode
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle, tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def temporary_prefix(target: Path) -> str:
    """``.NAME.HOST-PID.``: a temporary file says which process on which host writes it."""
    return f".{target.name}.{socket.gethostname()}-{os.getpid()}."


def orphans(target: Path, suffix: str = ".tmp") -> list[Path]:
    """The temporaries of ``target`` (``temporary_prefix``, ending in ``suffix``) that writers
    killed on this host left behind (their process is gone); a live writer's, or another
    host's, are not among them."""
    prefix = f".{target.name}.{socket.gethostname()}-"
    found = []
    for path in target.parent.glob(glob.escape(prefix) + "*" + glob.escape(suffix)):
        pid = path.name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            found.append(path)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _close_synced(handle: IO) -> None:
    """Flush ``handle`` to the disk and close it: the rename that follows publishes whole data."""
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def sha256_of(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (sentencepiece models' fingerprint)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_output(path: str | os.PathLike, what: str = "output") -> None:
    """UserError, naming ``path``, when it cannot be written as a file: it is a folder, a
    folder above it is a file, or the nearest existing folder above it refuses a new file
    (read-only, no permission: a temporary file is tried there). Commands call it before
    their work, so a mistake costs nothing."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{what} {target} is a directory; give a file name")
    _check_writable_below(target, what)


def check_output_dir(path: str | os.PathLike, what: str = "output folder") -> None:
    """UserError, naming ``path``, when it cannot be (made and) written as a folder: it is a
    file, a folder above it is a file, or the nearest existing folder refuses a new file."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UserError(f"{what} {target} is a file, not a directory")
    _check_writable_below(target / ".probe", what)


def _check_writable_below(target: Path, what: str) -> None:
    """Try a temporary file in the nearest existing folder above ``target``."""
    for parent in target.parents:
        if not parent.exists():
            continue
        if not parent.is_dir():
            raise UserError(f"{what} {target}: {parent} is a file, not a directory")
        try:
            fd, probe = tempfile.mkstemp(prefix=".write-probe.", suffix=".tmp", dir=parent)
        except OSError as err:
            raise UserError(f"{what} {target}: cannot write in {parent} ({err.strerror})") from None
        os.close(fd)
        os.unlink(probe)
        return


def check_input_file(path: str | os.PathLike, what: str = "input") -> None:
    """UserError, naming ``path``, unless it exists and is not a folder (a file, or a device
    or pipe such as ``/dev/null`` or ``/dev/stdin``, which read as a file does)."""
    source = Path(path)
    if source.is_dir():
        raise UserError(f"{what} {source} is a directory; give a file")
    if not source.exists():
        raise UserError(f"{what} {source}: no such file")


def check_regular_file(path: str | os.PathLike, what: str = "input") -> None:
    """``check_input_file``, and a regular file: one read more than once (hashed, then loaded)
    cannot be a pipe, whose second read is empty."""
    check_input_file(path, what)
    if not Path(path).is_file():
        raise UserError(f"{what} {path} is not a regular file (a pipe or device); give a file")


def check_not_inputs(
    outputs: dict[str, str | os.PathLike | None], inputs: dict[str, str | os.PathLike | None]
) -> None:
    """UserError when an output (option -> path; a file, or a folder that would be replaced)
    is one of the command's inputs, or a folder holding one: the same file by path, link or
    inode, so that writing the output would destroy what it is made from. Both are named."""
    for out_option, out in outputs.items():
        if out is None:
            continue
        target = Path(out).resolve()
        for in_option, source in inputs.items():
            if source is None or not Path(source).exists():
                continue
            same = target == Path(source).resolve() or (
                target.exists() and os.path.samefile(target, source)
            )
            if same or target in Path(source).resolve().parents:
                held = "is" if same else "holds"
                raise UserError(
                    f"{out_option} {out} {held} {in_option} {source}: writing it would destroy "
                    "the input; give another output"
                )


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
    except gzip.BadGzipFile:
        raise UserError(f"{path}: named .gz but not gzip data") from None
    except (EOFError, zlib.error) as err:
        raise UserError(
            f"{path}: the gzip data is cut off or damaged after line {len(lines)} ({err})"
        ) from None
    return lines


def umask() -> int:
    """The process's file-mode creation mask (read by setting it, then setting it back)."""
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
