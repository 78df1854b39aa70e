"""``ParallelDataset``: random access to a binarized split without loading it.

Token ids stay memory-mapped on disk (a WMT14 EN-FR split is several GB); only
the two length arrays, which the batch sampler needs whole, are read into
memory. Ids come back as content only: ``collate`` adds BOS and EOS. Opening a split
verifies it (``_verify``): offsets against lengths and file sizes, ids against the
vocabulary.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from transformer_core.data.binarized import SIDES, read_header, split_files
from transformer_core.errors import UserError


def _map(path: os.PathLike, dtype: np.dtype, count: int) -> np.ndarray:
    """Memory-map ``count`` items of ``dtype`` from ``path``, checking the file size."""
    size = os.path.getsize(path) if os.path.exists(path) else None
    if size is None:
        raise UserError(
            f"{path}: missing file of a binarized split (run `transformer-core binarize` again)"
        )
    if size != count * dtype.itemsize:
        raise UserError(
            f"{path}: {size} bytes, the header says {count} x {dtype.itemsize} bytes "
            "(truncated or from another run; run `transformer-core binarize` again)"
        )
    if count == 0:  # mmap refuses empty files
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


VERIFY_CHUNK = 1 << 24  # token ids checked at a time (32 MiB of uint16)


def _verify(
    files: dict, side: str, ids: np.ndarray, offsets: np.ndarray, lens: np.ndarray, vocab: int
) -> None:
    """UserError naming the file unless the offsets start at 0, end at the token count and step
    by the lengths, and every token id is below ``vocab``: a damaged split fails at load, not
    with an IndexError mid-run or a hang on a "sentence" millions of tokens long. Vectorised,
    one pass over each array (about 0.1 s per 100M tokens)."""
    if len(offsets) and (offsets[0] != 0 or offsets[-1] != len(ids)):
        raise UserError(
            f"{files[f'{side}.idx']}: offsets run from {offsets[0]} to {offsets[-1]}, not from 0 "
            f"to the {len(ids)} tokens of {files[f'{side}.bin']} (damaged; binarize again)"
        )
    steps = np.diff(offsets)
    if not np.array_equal(steps, lens):
        bad = int(np.flatnonzero(steps != lens)[0])
        raise UserError(
            f"{files[f'{side}.idx']} and {files[f'{side}.len']} disagree on sentence {bad} "
            f"({steps[bad]} and {lens[bad]} tokens; damaged, binarize again)"
        )
    for start in range(0, len(ids), VERIFY_CHUNK):
        chunk = ids[start : start + VERIFY_CHUNK]
        if int(chunk.max()) >= vocab or int(chunk.min()) < 0:
            bad = start + int(np.flatnonzero((chunk >= vocab) | (chunk < 0))[0])
            raise UserError(
                f"{files[f'{side}.bin']}: token {bad} has id {int(ids[bad])}, outside the "
                f"vocabulary of {vocab} (damaged; binarize again)"
            )


class ParallelDataset:
    """A binarized split: ``len(ds)`` pairs; ``ds.src(i)``, ``ds.tgt(i)`` give int64 id arrays.

    Attributes: ``src_lens`` and ``tgt_lens`` (int64 arrays of content token
    counts), ``vocab_size``, and ``header`` (the split's JSON header).
    """

    def __init__(self, prefix: str | os.PathLike) -> None:
        self.prefix = str(prefix)
        self.header: dict[str, Any] = read_header(prefix)
        files = split_files(prefix)
        n = int(self.header["num_sentences"])
        dtype = np.dtype(self.header["dtype"])
        self.vocab_size = int(self.header["vocab_size"])
        self._ids: dict[str, np.ndarray] = {}
        self._offsets: dict[str, np.ndarray] = {}
        lens: dict[str, np.ndarray] = {}
        for side in SIDES:
            self._ids[side] = _map(files[f"{side}.bin"], dtype, int(self.header[f"{side}_tokens"]))
            self._offsets[side] = _map(
                files[f"{side}.idx"], np.dtype(self.header["offset_dtype"]), n + 1
            )
            lens[side] = np.asarray(
                _map(files[f"{side}.len"], np.dtype(self.header["length_dtype"]), n), dtype=np.int64
            )
        self.src_lens = lens["src"]
        self.tgt_lens = lens["tgt"]
        for side in SIDES:
            _verify(files, side, self._ids[side], self._offsets[side], lens[side], self.vocab_size)

    def __getstate__(self) -> dict[str, str]:
        # Pickle (e.g. to DataLoader workers) as the prefix, not as copies of the arrays.
        return {"prefix": self.prefix}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["prefix"])

    def __len__(self) -> int:
        return len(self.src_lens)

    def _get(self, side: str, i: int) -> np.ndarray:
        if not -len(self) <= i < len(self):
            raise IndexError(
                f"sentence {i} out of range for {len(self)} sentences in {self.prefix}"
            )
        i %= len(self)
        start, end = self._offsets[side][i], self._offsets[side][i + 1]
        return np.asarray(self._ids[side][start:end], dtype=np.int64)

    def src(self, i: int) -> np.ndarray:
        """Source token ids of pair ``i`` (content only)."""
        return self._get("src", i)

    def tgt(self, i: int) -> np.ndarray:
        """Target token ids of pair ``i`` (content only)."""
        return self._get("tgt", i)


def training_sets(
    train_prefix: str | os.PathLike, dev_prefix: str | os.PathLike | None = None
) -> tuple[ParallelDataset, ParallelDataset | None]:
    """A run's training split and its dev split (if any), checked to belong together: the same
    vocabulary size and, where both headers record one, the same sentencepiece model
    (``spm_sha256``). A dev set of other data would give a dev loss that means nothing."""
    train_set = ParallelDataset(train_prefix)
    if dev_prefix is None:
        return train_set, None
    dev_set = ParallelDataset(dev_prefix)
    if dev_set.vocab_size != train_set.vocab_size:
        raise UserError(
            f"dev set {dev_prefix} has vocabulary {dev_set.vocab_size}, "
            f"the training set {train_prefix} has {train_set.vocab_size}"
        )
    train_sha, dev_sha = train_set.header.get("spm_sha256"), dev_set.header.get("spm_sha256")
    if train_sha and dev_sha and dev_sha != train_sha:
        raise UserError(
            f"dev set {dev_prefix} was encoded with sentencepiece model "
            f"{dev_set.header.get('spm_model')}, the training set {train_prefix} with "
            f"{train_set.header.get('spm_model')} (their sha256 differ)"
        )
    return train_set, dev_set
