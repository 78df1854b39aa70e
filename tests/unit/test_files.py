"""Atomic output (a failure mid-write leaves the old file untouched and no temp file) and
``read_lines``, the one line reader: split on "\\n" only, a CR kept unless stripped, gzip,
the first N lines, errors naming the file and the line."""

import gzip
import re

import pytest

from transformer_core.errors import UserError
from transformer_core.files import atomic_open, atomic_write_text, read_lines


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


def test_read_lines_splits_on_newline_only(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("a\u2028b\u0085c\rd\n\ne\r\nlast".encode())
    assert read_lines(path) == ["a\u2028b\u0085c\rd", "", "e\r", "last"]


def test_read_lines_strips_cr_only_before_the_newline_when_asked(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"a\rb\r\nc\r\n")
    assert read_lines(path) == ["a\rb\r", "c\r"]
    assert read_lines(path, strip_cr=True) == ["a\rb", "c"]


def test_read_lines_reads_gzip_by_suffix(tmp_path):
    path = tmp_path / "t.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
        handle.write("\u00fcber\r\nzwei\n")
    assert read_lines(path) == ["\u00fcber\r", "zwei"]


def test_read_lines_limit_reads_the_first_lines(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"1\n2\n3\n" + b"\xff\n")  # the bad line is never reached
    assert read_lines(path, limit=2) == ["1", "2"]
    assert read_lines(path, limit=0) == []
    assert read_lines(path, limit=3) == ["1", "2", "3"]


def test_read_lines_missing_file_and_folder_are_user_errors(tmp_path):
    with pytest.raises(UserError, match=re.escape(f"{tmp_path / 'missing.txt'}: no such file")):
        read_lines(tmp_path / "missing.txt")
    with pytest.raises(UserError, match="is a folder"):
        read_lines(tmp_path)


def test_read_lines_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"ok\nfine\n" + "caf\u00e9\n".encode("latin-1"))
    with pytest.raises(UserError, match=re.escape(f"{path}: not UTF-8 text near line 3 (")):
        read_lines(path)
