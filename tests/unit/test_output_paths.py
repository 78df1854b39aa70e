"""An output path is never a way to destroy what it points at (files.destination): a device,
FIFO or descriptor link is written through, a link to a regular file keeps being a link while
its file is replaced, and only a regular file is ever renamed over."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from transformer_core.errors import UserError
from transformer_core.files import atomic_open_all, atomic_write_text


def _read_in_background(path, into):
    def read():
        with open(path, encoding="utf-8") as handle:
            into.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = _read_in_background(fifo, got)
    atomic_write_text(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_regular_file_replaces_the_file_and_stays_a_link(tmp_path):
    (tmp_path / "real.json").write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    atomic_write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert (tmp_path / "real.json").read_text() == "new"
    dangling = tmp_path / "later.json"
    dangling.symlink_to("made_later.json")
    atomic_write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "made_later.json").read_text() == "made"


@pytest.fixture
def null_node(tmp_path):
    """A character device made in ``tmp_path``, identical to /dev/null: never the machine's
    own, which the code before this test replaced with a regular file."""
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return node


def test_a_link_to_a_device_is_written_through(tmp_path, null_node):
    link = tmp_path / "link"
    link.symlink_to(null_node)
    atomic_write_text(link, "gone")
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(null_node).st_mode)


def test_a_device_node_is_written_through_not_replaced(null_node):
    atomic_write_text(null_node, "gone")
    assert stat.S_ISCHR(os.lstat(null_node).st_mode)


def test_outputs_that_belong_together_refuse_a_fifo(tmp_path):
    fifo = tmp_path / "b.tgt"  # never the machine's own devices: the old code replaced them
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a device, FIFO or socket"):
        with atomic_open_all([tmp_path / "a.src", fifo]):
            pass
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (tmp_path / "a.src").exists()


def test_a_command_writing_to_a_link_to_its_stdout_reaches_stdout(tmp_path):
    (tmp_path / "hyp").write_text("ein Haus .\n")
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_core", "score", "--hyp", str(tmp_path / "hyp"),
         "--ref", str(tmp_path / "hyp"), "--bootstrap-resamples", "0", "--out", str(link)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert '"n_lines": 1' in proc.stdout and link.is_symlink()
