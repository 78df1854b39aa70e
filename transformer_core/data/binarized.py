"""The binarized corpus format: token ids and lengths as flat, memory-mappable arrays.

One split (e.g. ``data/wmt14_en_de/bin/train``) is the prefix ``PREFIX`` of seven files::

    PREFIX.src.bin  PREFIX.tgt.bin   token ids of all sentences, concatenated (``dtype``)
    PREFIX.src.idx  PREFIX.tgt.idx   int64 offsets, one more than sentences: sentence i is
                                     ids[idx[i]:idx[i+1]]
    PREFIX.src.len  PREFIX.tgt.len   int32 token counts (content only: no BOS/EOS)
    PREFIX.json                      the header: format, dtype, counts, vocabulary size,
                                     sentencepiece model checksum

Arrays are raw little-endian numpy buffers (``np.memmap`` reads them without
loading the corpus). The writer streams: it buffers ``chunk_sentences`` pairs,
appends them to temporary files and renames everything into place at the end,
so memory does not grow with the corpus and a failed run leaves the previous
split untouched. The old header is removed just before the arrays are renamed
into place and the new one written after them, so a prefix whose header
exists is complete. ``concatenate`` puts the splits of a corpus's shards
together the same streaming way (``transformer_core.data.shards``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from transformer_core.data import bpe
from transformer_core.data.progress import Progress
from transformer_core.data.shards import parallel_lines
from transformer_core.errors import UserError
from transformer_core.files import atomic_open, atomic_write_text, read_versioned_json

FORMAT = "transformer_core.binarized"
VERSION = 1
SIDES = ("src", "tgt")
OFFSET_DTYPE = np.dtype("<i8")
LENGTH_DTYPE = np.dtype("<i4")
OFFSET_CHUNK = 1 << 20  # offsets shifted at a time by ``concatenate`` (8 MiB)
COPY_BYTES = 16 << 20


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest dtype that holds every id below ``vocab_size`` (uint16 up to 65536)."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<i4")


def split_files(prefix: str | os.PathLike) -> dict[str, Path]:
    """The files of one split: keys ``src.bin``, ``src.idx``, ..., ``json``."""
    prefix = str(prefix)
    files = {
        f"{side}.{kind}": Path(f"{prefix}.{side}.{kind}")
        for side in SIDES
        for kind in ("bin", "idx", "len")
    }
    files["json"] = Path(f"{prefix}.json")
    return files


class BinarizedWriter:
    """Stream sentence pairs of token ids into the binarized format of one split.

    Use as a context manager; ``add`` one pair at a time. The files appear only
    when the ``with`` block ends without an exception. ``metadata`` (e.g. the
    sentencepiece model path and checksum, the languages) is stored in the header.
    """

    def __init__(
        self,
        prefix: str | os.PathLike,
        vocab_size: int,
        metadata: dict[str, Any] | None = None,
        chunk_sentences: int = 50_000,
    ) -> None:
        if vocab_size <= 0:
            raise ValueError(f"vocab_size must be positive, got {vocab_size}")
        self.files = split_files(prefix)
        self.vocab_size = vocab_size
        self.dtype = token_dtype(vocab_size)
        self.metadata = dict(metadata or {})
        self.chunk_sentences = chunk_sentences
        self.num_sentences = 0
        self.num_tokens = dict.fromkeys(SIDES, 0)
        self._buffers: dict[str, list[Sequence[int]]] = {side: [] for side in SIDES}
        self._handles: dict[str, Any] = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> BinarizedWriter:
        for key, path in self.files.items():
            if key != "json":
                self._handles[key] = self._stack.enter_context(atomic_open(path, "wb"))
        for side in SIDES:
            self._handles[f"{side}.idx"].write(np.zeros(1, OFFSET_DTYPE).tobytes())
        return self

    def add(self, src_ids: Sequence[int], tgt_ids: Sequence[int]) -> None:
        """Append one sentence pair (content ids only, no BOS/EOS)."""
        self._buffers["src"].append(src_ids)
        self._buffers["tgt"].append(tgt_ids)
        if len(self._buffers["src"]) >= self.chunk_sentences:
            self._flush()

    def _flush(self) -> None:
        pending = len(self._buffers["src"])
        for side in SIDES:
            sentences = self._buffers[side]
            if not sentences:
                continue
            lengths = np.fromiter((len(s) for s in sentences), dtype=np.int64, count=len(sentences))
            ids = np.fromiter(
                (i for s in sentences for i in s), dtype=np.int64, count=int(lengths.sum())
            )
            if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
                raise ValueError(
                    f"token id out of range [0, {self.vocab_size}) near sentence {self.num_sentences}"
                )
            offsets = self.num_tokens[side] + np.cumsum(lengths)
            self._handles[f"{side}.bin"].write(ids.astype(self.dtype).tobytes())
            self._handles[f"{side}.idx"].write(offsets.astype(OFFSET_DTYPE).tobytes())
            self._handles[f"{side}.len"].write(lengths.astype(LENGTH_DTYPE).tobytes())
            self.num_tokens[side] += int(lengths.sum())
            sentences.clear()
        self.num_sentences += pending

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._stack.__exit__(exc_type, exc, tb)
            return
        try:
            self._flush()
        except BaseException as err:
            self._stack.__exit__(type(err), err, err.__traceback__)
            raise
        _publish(self.files, self._stack, self.header())

    def header(self) -> dict[str, Any]:
        """The JSON header describing the arrays written so far."""
        return _header(
            self.files, self.dtype, self.num_sentences, self.num_tokens, self.vocab_size,
            self.metadata,
        )  # fmt: skip


def _header(
    files: dict[str, Path],
    dtype: np.dtype,
    num_sentences: int,
    num_tokens: dict[str, int],
    vocab_size: int,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "dtype": dtype.str,
        "offset_dtype": OFFSET_DTYPE.str,
        "length_dtype": LENGTH_DTYPE.str,
        "num_sentences": num_sentences,
        "src_tokens": num_tokens["src"],
        "tgt_tokens": num_tokens["tgt"],
        "vocab_size": vocab_size,
        "files": {key: path.name for key, path in files.items() if key != "json"},
        **metadata,
    }


def _publish(files: dict[str, Path], arrays: contextlib.ExitStack, header: dict[str, Any]) -> None:
    """Rename the arrays (open in ``arrays``) into place, then write the header."""
    # An old header would describe the new arrays if we died between the renames.
    with contextlib.suppress(FileNotFoundError):
        files["json"].unlink()
    arrays.close()
    atomic_write_text(files["json"], json.dumps(header, indent=2) + "\n")


def read_header(prefix: str | os.PathLike) -> dict[str, Any]:
    """Read and check the header of a binarized split; UserError if absent or foreign."""
    return read_versioned_json(
        split_files(prefix)["json"],
        FORMAT,
        VERSION,
        "binarized split",
        "run `transformer-core binarize` first",
    )


def binarize(
    spm_model: str | os.PathLike,
    src: str | os.PathLike,
    tgt: str | os.PathLike,
    prefix: str | os.PathLike,
    threads: int = 1,
) -> dict[str, Any]:
    """Encode a text pair with a sentencepiece model straight into a binarized split; its header.

    Streams in batches of lines, so memory does not depend on the corpus size.
    ``threads`` are sentencepiece's encoding threads (one per core the job holds).
    """
    processor = bpe.load(spm_model)
    src, tgt = Path(src), Path(tgt)
    n_src = parallel_lines(src, tgt)
    info = {
        "spm_model": str(spm_model),
        "spm_sha256": bpe.sha256_of(spm_model),
        "src_text": str(src),
        "tgt_text": str(tgt),
    }
    progress = Progress(f"binarize {src.name}/{tgt.name}", n_src)
    with BinarizedWriter(prefix, processor.get_piece_size(), metadata=info) as writer:
        for src_batch, tgt_batch in zip(bpe.batches(src), bpe.batches(tgt), strict=True):
            for s, t in zip(
                processor.encode(src_batch, num_threads=threads),
                processor.encode(tgt_batch, num_threads=threads),
                strict=True,
            ):
                writer.add(s, t)
            progress.update(len(src_batch))
    progress.done()
    return read_header(prefix)


def _check_sizes(prefix: str | os.PathLike, header: dict[str, Any]) -> None:
    """UserError naming the file when an array's size does not match its header."""
    items = {
        "bin": lambda side: header[f"{side}_tokens"] * np.dtype(header["dtype"]).itemsize,
        "idx": lambda side: (header["num_sentences"] + 1) * OFFSET_DTYPE.itemsize,
        "len": lambda side: header["num_sentences"] * LENGTH_DTYPE.itemsize,
    }
    files = split_files(prefix)
    for side in SIDES:
        for kind, size in items.items():
            path = files[f"{side}.{kind}"]
            if not path.is_file() or path.stat().st_size != size(side):
                raise UserError(f"{path}: missing or not the size its header {files['json']} gives")


def concatenate(
    prefixes: Sequence[str | os.PathLike], out_prefix: str | os.PathLike
) -> dict[str, Any]:
    """Put binarized splits (shards of one corpus, in order) together into one split; its header.

    Streaming: token ids and lengths are copied, offsets shifted, ``OFFSET_CHUNK``
    at a time, so memory does not grow with the corpus. The result has the bytes
    ``binarize`` writes for the concatenated text. The splits must share the
    token dtype, vocabulary and sentencepiece model; the header lists their texts.
    """
    if not prefixes:
        raise UserError("no binarized splits to concatenate")
    headers = [read_header(prefix) for prefix in prefixes]
    first = headers[0]
    for prefix, header in zip(prefixes, headers, strict=True):
        for key in ("dtype", "vocab_size", "spm_sha256"):
            if header.get(key) != first.get(key):
                raise UserError(
                    f"{split_files(prefix)['json']}: {key} {header.get(key)!r} differs from "
                    f"{first.get(key)!r} of {split_files(prefixes[0])['json']}"
                )
        _check_sizes(prefix, header)
    files = split_files(out_prefix)
    tokens = dict.fromkeys(SIDES, 0)
    progress = Progress(
        f"concatenate {len(prefixes)} splits", sum(h["num_sentences"] for h in headers)
    )
    with contextlib.ExitStack() as arrays:
        out = {
            key: arrays.enter_context(atomic_open(path, "wb"))
            for key, path in files.items()
            if key != "json"
        }
        for side in SIDES:
            out[f"{side}.idx"].write(np.zeros(1, OFFSET_DTYPE).tobytes())
        for prefix, header in zip(prefixes, headers, strict=True):
            parts = split_files(prefix)
            for side in SIDES:
                for kind in ("bin", "len"):
                    with open(parts[f"{side}.{kind}"], "rb") as part:
                        shutil.copyfileobj(part, out[f"{side}.{kind}"], COPY_BYTES)
                _shifted_offsets(parts[f"{side}.idx"], tokens[side], out[f"{side}.idx"])
                tokens[side] += header[f"{side}_tokens"]
            progress.update(header["num_sentences"])
        header = _header(
            files, np.dtype(first["dtype"]), progress.count, tokens, first["vocab_size"],
            {
                "spm_model": first.get("spm_model"),
                "spm_sha256": first.get("spm_sha256"),
                "src_text": [h.get("src_text") for h in headers],
                "tgt_text": [h.get("tgt_text") for h in headers],
                "parts": len(prefixes),
            },
        )  # fmt: skip
        _publish(files, arrays, header)
    progress.done()
    return read_header(out_prefix)


def _shifted_offsets(idx: Path, shift: int, out: Any) -> None:
    """Write ``idx``'s offsets after its leading 0, plus ``shift``, a chunk at a time."""
    with open(idx, "rb") as handle:
        handle.seek(OFFSET_DTYPE.itemsize)
        while block := handle.read(OFFSET_CHUNK * OFFSET_DTYPE.itemsize):
            offsets = np.frombuffer(block, dtype=OFFSET_DTYPE) + shift
            out.write(offsets.astype(OFFSET_DTYPE).tobytes())
