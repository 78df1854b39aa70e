"""Atomic output: a failure mid-write leaves the old file untouched and no temp file."""

import pytest

from transformer_core.io import atomic_open, atomic_write_text


def test_atomic_write_replaces_file(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    atomic_write_text(target, "first\n")
    atomic_write_text(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_failed_write_keeps_old_content(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("good\n")
    with pytest.raises(RuntimeError):
        with atomic_open(target) as handle:
            handle.write("half")
            raise RuntimeError("killed")
    assert target.read_text() == "good\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_binary_mode(tmp_path):
    target = tmp_path / "blob.bin"
    with atomic_open(target, "wb") as handle:
        handle.write(b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"


def test_outputs_get_the_usual_permissions(tmp_path):
    target = tmp_path / "out.txt"
    atomic_write_text(target, "x")
    assert target.stat().st_mode & 0o644 == 0o644
