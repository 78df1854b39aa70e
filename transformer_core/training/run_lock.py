"""One writer per run folder: an OS lock that a training session holds from start to end.

Two sessions on one run folder (a SLURM requeue overlapping the job still running, or a
second command typed by mistake) would interleave ``metrics.jsonl`` and leave the folder
holding the other run's model while both report success. ``train`` therefore takes an
exclusive ``fcntl.flock`` on ``RUN_DIR/train.lock`` before it reads the folder, and holds it
until it returns. A second session exits at once with one line naming the holder's PID
and host. The OS releases the lock when the holder dies, even by ``kill -9`` or a node
failure of a local file system, so a stale lock never blocks a resumed or requeued job;
the file itself stays (removing it would let two sessions lock two different files),
except in a folder this session made and left empty (a mistake found before any work).
Under torchrun only rank 0 takes it: the other ranks of one job are the same session.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from transformer_core.errors import UserError
from transformer_core.files import check_output_dir

LOCK_NAME = "train.lock"


@contextlib.contextmanager
def run_lock(out_dir: str | os.PathLike, enabled: bool = True) -> Iterator[None]:
    """Hold ``out_dir/train.lock`` exclusively for the ``with`` block (nothing when not
    ``enabled``); a UserError naming the holder when another process has it."""
    if not enabled:
        yield
        return
    out_dir = Path(out_dir)
    check_output_dir(out_dir, "--out-dir")
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
            raise UserError(
                f"{out_dir} is in use by another training session ({holder}; lock {path}): "
                "wait for it to end or stop it, or train into another --out-dir"
            ) from None
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"PID {os.getpid()} on {socket.gethostname()} since {since}\n".encode(), 0)
        try:
            yield
        finally:
            if created and out_dir.is_dir() and [p.name for p in out_dir.iterdir()] == [LOCK_NAME]:
                # A session that failed before writing anything leaves no folder behind.
                path.unlink()
                out_dir.rmdir()
    finally:
        os.close(fd)  # releases the lock
