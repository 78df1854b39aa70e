"""Checkpoint files: one ``torch.save`` dict that rebuilds its model without any other file.

Every checkpoint holds ``format``, ``model_config`` (``ModelConfig.to_dict()``,
nanoGPT's ``model_args`` habit) and ``model`` (the state dict); training adds
its own state (optimizer, schedule, step, RNG, data position). Files are written
atomically and read with ``weights_only=True``, so everything stored is tensors
and plain Python data (numpy's RNG state as a list of ints).

A training run keeps numbered checkpoints ``checkpoints/step_NNNNNNN.pt`` and
prunes all but the newest few.

Provenance: a training checkpoint also records ``spm_sha256`` (the fingerprint of
the sentencepiece model its data was encoded with, from the binarized header),
``spm_model`` (that model's path then) and ``run_id`` (one per training run, kept
across resumes). ``translate``, ``ppl`` and ``average`` refuse what does not belong
together by these; checkpoints written before they existed are checked by shape only.

Integrity: every checkpoint records ``checksum``, the CRC-32 of each of its tensors
(``tensor_checksums``), and ``load_checkpoint`` verifies it, so a flipped byte in tensor
data is a ``CorruptCheckpoint`` like a truncated file, and never a model that loads and
translates to nothing. It also refuses weights that are not finite (NaN, inf). Each
check is one pass over the tensors (docs/measured.md, "Integrity checks"); checkpoints written
before the checksum existed are checked for finiteness only.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from transformer_core.errors import UserError
from transformer_core.files import atomic_open, sha256_of
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer

FORMAT = "transformer-core-checkpoint/1"
CHECKSUM = "crc32 of each tensor"  # what ``checksum`` holds: ``tensor_checksums``


class CorruptCheckpoint(UserError):
    """A checkpoint that cannot be trusted as written: unreadable, truncated, foreign, or its
    tensors differ from its recorded checksum. Resuming sets such a file aside."""


def _tensors(value: Any, where: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """(key path, tensor) of every tensor in a nested dict/list payload, in its order;
    the top-level ``checksum`` excluded."""
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if not (where == "" and key == "checksum"):
                yield from _tensors(item, f"{where}/{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{where}/{i}")


def tensor_checksums(payload: dict) -> dict[str, int]:
    """CRC-32 of every tensor of ``payload`` (its dtype, shape and bytes), by key path
    (``/model/embedding.weight``); ``checksum`` itself excluded. One pass at about 4 GB/s:
    enough to find a damaged byte, and it names the tensor that holds it."""
    sums = {}
    for where, tensor in _tensors(payload):
        data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        header = zlib.crc32(f"{tensor.dtype}:{tuple(tensor.shape)}".encode())
        sums[where] = zlib.crc32(memoryview(data.numpy()), header)
    return sums


def tensor_bytes(payload: Any) -> int:
    """Bytes of tensor data in ``payload``: about a checkpoint's size on disk."""
    return sum(tensor.nbytes for _, tensor in _tensors(payload))


def check_finite(state: dict, path: str | os.PathLike) -> None:
    """UserError naming ``path`` and the first weight that holds a NaN or an infinity."""
    for name, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(
                f"{path}: weight {name} holds NaN or infinite values (a diverged or damaged "
                "model); use an earlier checkpoint"
            )


def save_checkpoint(
    path: str | os.PathLike, model_config: ModelConfig, model_state: dict, **extra: Any
) -> None:
    """Write a checkpoint atomically, with its ``checksum``: a killed job never leaves a
    truncated file behind, and a damaged one is found when it is read."""
    payload = {
        "format": FORMAT,
        "model_config": model_config.to_dict(),
        "model": model_state,
        **extra,
    }
    payload["checksum"] = {"algorithm": CHECKSUM, "tensors": tensor_checksums(payload)}
    with atomic_open(path, "wb") as handle:
        torch.save(payload, handle)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint dict, its checksum verified and its weights finite.

    A missing file is a UserError naming it; a truncated, foreign or damaged one (checksum
    mismatch) a ``CorruptCheckpoint``; NaN or infinite weights a UserError naming the weight.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"checkpoint {path} is a directory; give a checkpoint file")
    if path.exists() and not path.is_file():
        raise UserError(f"checkpoint {path} is not a regular file (a pipe or device); give a file")
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    size = path.stat().st_size
    if not zipfile.is_zipfile(path):  # torch.save writes zip archives; a cut one has no end
        raise CorruptCheckpoint(
            f"{path} is not a checkpoint: not a whole file of torch.save ({size:,} bytes"
            f"{', empty' if not size else ''})"
        )
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for corrupt files
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CorruptCheckpoint(f"cannot read checkpoint {path}: {reason}") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CorruptCheckpoint(
            f"{path} is not a transformer-core checkpoint (expected format {FORMAT!r})"
        )
    stored = payload.get("checksum")
    if stored is not None:
        if not isinstance(stored, dict) or stored.get("algorithm") != CHECKSUM:
            raise CorruptCheckpoint(f"{path}: unknown checksum record {stored!r}")
        recorded, actual = stored.get("tensors", {}), tensor_checksums(payload)
        if actual != recorded:
            where = next((k for k in actual if actual[k] != recorded.get(k)), None) or next(
                k for k in recorded if k not in actual
            )
            raise CorruptCheckpoint(
                f"{path}: tensor {where} does not match its recorded checksum (the file was "
                "damaged after it was written)"
            )
    if not isinstance(payload.get("model"), dict):
        raise CorruptCheckpoint(f"{path}: no model weights in it")
    check_finite(payload["model"], path)
    return payload


def model_from_payload(
    payload: dict, path: str | os.PathLike, map_location: str | torch.device = "cpu"
) -> Transformer:
    """Rebuild the model of a loaded checkpoint ``payload`` (read from ``path``), in eval mode.

    The stored config is first built on the meta device (no memory) and its weight shapes
    compared with the stored weights, so a config that does not match them, e.g. one edited
    to ask for terabytes, is a UserError before anything is allocated.
    """
    cfg = ModelConfig.from_dict(payload["model_config"], where=f"{path}:model_config")
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in Transformer(cfg).state_dict().items()}
    stored = {k: tuple(v.shape) for k, v in payload["model"].items()}
    if expected != stored:
        missing, unexpected = sorted(expected.keys() - stored), sorted(stored.keys() - expected)
        resized = sorted(k for k in expected.keys() & stored if expected[k] != stored[k])
        first = (
            f"missing {missing[0]}"
            if missing
            else f"unexpected {unexpected[0]}"
            if unexpected
            else f"{resized[0]} is {stored[resized[0]]}, the config makes {expected[resized[0]]}"
        )
        raise UserError(f"{path}: its weights do not match its stored model_config ({first})")
    model = Transformer(cfg)
    model.load_state_dict(payload["model"])
    return model.to(map_location).eval()


def load_model(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Transformer:
    """Rebuild the model stored in a checkpoint, in eval mode."""
    return model_from_payload(load_checkpoint(path, map_location), path, map_location)


def check_spm(
    payload: dict,
    checkpoint: str | os.PathLike,
    spm_path: str | os.PathLike,
    allow_mismatch: bool = False,
) -> None:
    """UserError naming both files when ``checkpoint`` was trained on data encoded with
    another sentencepiece model than ``spm_path`` (its recorded sha256 differs)."""
    stored = payload.get("spm_sha256")
    if not stored or allow_mismatch:
        return
    actual = sha256_of(spm_path)  # as binarize fingerprinted it
    if actual != stored:
        raise UserError(
            f"{checkpoint} was trained on data encoded with another sentencepiece model "
            f"({payload.get('spm_model', '?')}, sha256 {stored[:12]}) than {spm_path} (sha256 {actual[:12]}); "
            "give the pair's own model (or --allow-vocab-mismatch)"
        )


def check_data_fingerprint(
    payload: dict,
    checkpoint: str | os.PathLike,
    header: dict,
    data: str | os.PathLike,
    allow_mismatch: bool = False,
) -> None:
    """UserError naming both files when binarized ``data`` (its ``header``) was encoded with
    another sentencepiece model than the checkpoint's training data."""
    stored, theirs = payload.get("spm_sha256"), header.get("spm_sha256")
    if stored and theirs and stored != theirs and not allow_mismatch:
        raise UserError(
            f"{data} was encoded with sentencepiece model {header.get('spm_model', '?')} (sha256 {theirs[:12]}), "
            f"{checkpoint} was trained on data encoded with {payload.get('spm_model', '?')} "
            f"(sha256 {stored[:12]}); they do not belong together (or pass --allow-vocab-mismatch)"
        )


# -- training runs: numbered checkpoints, retention, RNG state --------------------------------

CHECKPOINT_PATTERN = re.compile(r"^step_(\d+)\.pt$")


def checkpoint_path(directory: str | os.PathLike, step: int) -> Path:
    """``DIR/step_NNNNNNN.pt``: names sort in step order."""
    return Path(directory) / f"step_{step:07d}.pt"


def list_checkpoints(directory: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every numbered checkpoint in ``directory``, oldest first.

    Temporary files of an interrupted write (``.step_...tmp``) are not checkpoints.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = CHECKPOINT_PATTERN.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


TEMPORARY_PATTERN = re.compile(r"^\.(step_\d+\.pt|last\.pt|summary\.json)\..*tmp$")


def clean_temporaries(directory: str | os.PathLike) -> list[Path]:
    """Delete the temporary files of writes that a killed job left in ``directory``.

    Only for a run that owns the folder (resuming it): no other writer can be active.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = [p for p in directory.iterdir() if TEMPORARY_PATTERN.match(p.name) and p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def newest_loadable(
    directory: str | os.PathLike,
    set_aside: bool = True,
    log=lambda message: print(message, file=sys.stderr, flush=True),
) -> tuple[list[tuple[int, Path]], dict | None]:
    """The numbered checkpoints of ``directory`` whose newest loads, and that newest's payload.

    A newest checkpoint that cannot be read (truncated, damaged: ``CorruptCheckpoint``) is
    renamed aside to ``NAME.corrupt`` (when ``set_aside``; kept, never deleted) with a
    message saying why, and the next older one is tried. Returns ([], None) when none
    loads. Non-finite weights in a file that is as written are an error, not skipped.
    """
    found = list_checkpoints(directory)
    while found:
        step, path = found[-1]
        try:
            return found, load_checkpoint(path, map_location="cpu")
        except CorruptCheckpoint as err:
            if not path.exists():  # another rank moved it aside meanwhile
                found.pop()
                continue
            aside = path.with_name(path.name + ".corrupt")
            if set_aside:
                try:
                    os.replace(path, aside)
                except FileNotFoundError:
                    pass
            log(
                f"skipping checkpoint {path} ({err}); "
                f"{'renamed it to ' + str(aside) if set_aside else 'left in place'}"
            )
            found.pop()
    return [], None


def prune_checkpoints(directory: str | os.PathLike, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` numbered checkpoints; returns the deleted paths."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    doomed = [path for _, path in list_checkpoints(directory)[:-keep_last]]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Make ``target`` the same file as ``source`` (hard link, else copy), replacing it atomically."""
    source, target = Path(source), Path(target)
    tmp = target.with_name(f".{target.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:  # another file system, or links not supported
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)
