"""The folder an export writes, whatever the engine: built beside its place and renamed into it,
so that it is the whole export or absent; ``export.json`` last, saying what made it; and the
sentencepiece vocabulary both engines take."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformer_core.errors import UserError
from transformer_core.files import umask

MARKER = "export.json"  # written last into every export: what made it, and how to decode it


def check_export_dir(out: Path) -> None:
    """An existing ``out`` may be replaced only if it is an earlier export (it holds MARKER) or
    empty: never a folder of something else."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the exported model")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError(
            f"--out {out} is a folder that holds something other than an export; "
            "give a new or empty folder"
        )


def write_export(out: Path, fill: Callable[[Path], dict[str, Any]]) -> Path:
    """Build an export in a new folder beside ``out``: ``fill`` writes its files there and
    returns what ``export.json`` records; then the folder replaces ``out`` (an earlier export
    there is removed). Returns ``out``."""
    check_export_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        marker = fill(tmp)
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        tmp.chmod(0o777 & ~umask())  # mkdtemp's folder is private; an export is not
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def sentencepiece_vocabulary(sp) -> tuple[list[str], dict[str, str]]:
    """The pieces of ``sp`` in id order, and its pad/unk/bos/eos pieces."""
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    ids = {"pad": sp.pad_id(), "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
    return pieces, {name: pieces[i] for name, i in ids.items()}
