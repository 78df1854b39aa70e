"""The folder an export writes, whatever the engine: built beside its place and renamed into it,
so that it is the whole export or absent; ``export.json`` last, saying what made it and which
files are the export's; and the sentencepiece vocabulary both engines take.

A later export into the same folder replaces only an earlier export: a folder holding a file
that no export wrote (a user's notes, the checkpoint being exported), or a file of the export
changed since it was written (``export.json`` records each one's sha256: notes appended to the
card, weights fine-tuned and saved back), or one whose sha256 it does not record (an export of
before hashes were recorded), is refused, naming the file. The earlier export is renamed aside
(``.NAME.HOST-PID.<8 random hex digits>.old``) until the new one is in place, then deleted; a
folder left behind by a killed export is removed by the next one, and an earlier export set
aside by a kill before the swap is put back first.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformer_core.errors import UserError
from transformer_core.files import orphans, sha256_of, temporary_prefix, umask

MARKER = "export.json"  # written last into every export: what made it, and how to decode it


def check_export_dir(out: Path) -> None:
    """An existing ``out`` may be replaced only if it is empty or an earlier export holding
    nothing but the files its MARKER lists; never a link, a file or a folder of something else,
    nor the working folder or one above it (it cannot be renamed into place)."""
    if out.resolve() in (Path.cwd(), *Path.cwd().parents):
        raise UserError(
            f"--out {out} is the working folder or holds it, which an export cannot replace; "
            "give a new folder"
        )
    if out.is_symlink():
        raise UserError(f"--out {out} is a symbolic link; give the folder itself")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the exported model")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not (out / MARKER).is_file():
        raise UserError(
            f"--out {out} is a folder that holds something other than an export; "
            "give a new or empty folder"
        )
    try:
        record = json.loads((out / MARKER).read_text(encoding="utf-8"))
        listed = set(record["files"])
        written = dict(record.get("sha256") or {})
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(
            f"--out {out}: its {MARKER} does not list the export's files (an older or damaged "
            "export); remove the folder yourself or give a new one"
        ) from None
    found = {str(path.relative_to(out)) for path in out.rglob("*") if not path.is_dir()}
    foreign = sorted(found - listed - {MARKER})
    if foreign:
        raise UserError(
            f"--out {out} holds {foreign[0]}, which no export wrote; move it away or give "
            "a new folder (an export replaces only an earlier export)"
        )
    unverified = sorted((found & listed) - set(written))
    if unverified:  # no hash recorded: the user's until shown otherwise
        raise UserError(
            f"--out {out}: its {MARKER} records no sha256 of {unverified[0]} (an export from "
            "before exports recorded them), so a change made to it since cannot be told; move "
            "the folder away or give a new one"
        )
    changed = sorted(
        name for name in found & set(written) if sha256_of(out / name) != written[name]
    )
    if changed:
        raise UserError(
            f"--out {out}: {changed[0]} has changed since the export wrote it; move the folder "
            "away or give a new one (an export replaces only what an earlier export wrote)"
        )


def write_export(out: Path, fill: Callable[[Path], dict[str, Any]]) -> Path:
    """Build an export in a new folder beside ``out``: ``fill`` writes its files there and
    returns what ``export.json`` records (with the list of files added); then the folder
    replaces ``out``. Returns ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_up_after_kills(out)
    check_export_dir(out)
    tmp = Path(tempfile.mkdtemp(prefix=temporary_prefix(out), suffix=".tmp", dir=out.parent))
    try:
        marker = fill(tmp)
        marker["files"] = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        for name in marker["files"]:  # some writers make private files (safetensors: 0600)
            (tmp / name).chmod(0o666 & ~umask())
        marker["sha256"] = {name: sha256_of(tmp / name) for name in marker["files"]}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        tmp.chmod(0o777 & ~umask())  # mkdtemp's folder is private; an export is not
        old = out.parent / f"{temporary_prefix(out)}{os.urandom(4).hex()}.old"
        if out.exists():
            os.rename(out, old)  # until the new export is in place, the old one lies here
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _clean_up_after_kills(out: Path) -> None:
    """Put back an earlier export that a killed export had set aside, and delete the
    half-built folders and set-aside exports of killed exports."""
    set_aside = orphans(out, ".old")
    if set_aside and not out.exists():
        newest = max(set_aside, key=lambda path: path.stat().st_mtime)
        os.rename(newest, out)
        print(f"put back {out}, set aside by an export that was killed", file=sys.stderr)
    for path in orphans(out, ".tmp") + orphans(out, ".old"):
        shutil.rmtree(path, ignore_errors=True)


def sentencepiece_vocabulary(sp) -> tuple[list[str], dict[str, str]]:
    """The pieces of ``sp`` in id order, and its pad/unk/bos/eos pieces."""
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    ids = {"pad": sp.pad_id(), "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
    return pieces, {name: pieces[i] for name, i in ids.items()}
