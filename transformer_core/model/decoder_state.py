"""What incremental decoding carries from step to step (``Transformer.init_state`` and
``decode_step``): each decoder layer's keys and values, preallocated so that a step
allocates nothing, and the rows of the batch that beam search keeps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


class PositionBuffer:
    """Values of a batch of decoder rows at positions 0..length-1, along dimension ``dim``.

    Preallocated to ``capacity`` positions, with a spare buffer of the same size, so that
    decoding allocates nothing per step: appending a position writes in place, and
    reordering the rows (beam search keeping the parents of its survivors, or sentences
    leaving the batch) copies the filled positions into the spare with one index_select
    and swaps the two. Past ``capacity`` both buffers grow to twice their length; a
    reorder to more rows than they hold (beam search's first, which spreads one row per
    sentence over the beam) gives each the rows it needs, once.
    """

    def __init__(self, rows: int, shape: tuple[int, ...], dim: int, capacity: int, like: Tensor):
        self.dim, self.length = dim, 0
        full = (rows, *shape[: dim - 1], max(1, capacity), *shape[dim - 1 :])
        self.buffer = like.new_empty(full)
        self.spare = like.new_empty(full)
        self.values = self.buffer.narrow(dim, 0, 0)  # the filled positions of the current rows

    def append(self, new: Tensor, rows: Tensor | None = None) -> None:
        """Take rows ``rows`` first (None: keep them all, in order), then append position
        ``new`` (one per row, of size 1 along ``dim``)."""
        if self.length == self.buffer.size(self.dim):
            self._grow()
        if rows is not None:
            if rows.size(0) > self.spare.size(0):
                self.spare = self.spare.new_empty((rows.size(0), *self.spare.shape[1:]))
            taken = self._filled(self.spare, rows.size(0))
            torch.index_select(self._filled(self.buffer, self.values.size(0)), 0, rows, out=taken)
            self.buffer, self.spare = self.spare, self.buffer
        self.length += 1
        self.values = self.buffer[: new.size(0)].narrow(self.dim, 0, self.length)
        self.values.narrow(self.dim, self.length - 1, 1).copy_(new)

    def _filled(self, buffer: Tensor, rows: int) -> Tensor:
        """The filled positions of the first ``rows`` rows of ``buffer``. With positions right
        after the rows (``dim`` 1), each row's filled positions are one run of memory, and the
        view is 2-D, (rows, run): a reorder copies one run a row, not one per head."""
        if self.dim == 1:
            run = self.length * math.prod(buffer.shape[2:])
            return buffer.view(buffer.size(0), -1)[:rows, :run]
        return buffer[:rows].narrow(self.dim, 0, self.length)

    def _grow(self) -> None:
        shape = list(self.buffer.shape)
        shape[self.dim] *= 2
        grown = self.buffer.new_empty(shape)
        self.values = grown[: self.values.size(0)].narrow(self.dim, 0, self.length)
        self.values.copy_(self.buffer[: self.values.size(0)].narrow(self.dim, 0, self.length))
        self.buffer, self.spare = grown, self.buffer.new_empty(shape)


def position_major(like: Tensor) -> bool:
    """Whether self-attention caches of ``like``'s dtype and device keep their positions before
    their heads, (rows, t, h, d), rather than after, (rows, h, t, d).

    On CPUs in fp32, yes: a reorder then copies one run of memory a row, not one per head
    (about twice as fast from 8 to 24 positions, 96 rows, 8 heads of 32, caches out of the
    CPU's caches), and decoding attention (``cpu_attention.decoding_attention``) reads the
    transposed view as it is. Beam search on Multi30k ran 6 to 8% faster in fp32 and int8,
    with the same fp32 hypotheses; at the base shape (30 positions, d_k 64) 1% (within noise).
    bf16 attention multiplies the caches as batched matrices, which want them head-major
    (no faster position-major), and so does the GPU's fused attention (docs/ctranslate2.md).
    """
    return like.device.type == "cpu" and like.dtype == torch.float32


@dataclass
class LayerCache:
    """Cached keys/values of one decoder layer: self-attention ones that grow by a position a
    step (in a ``PositionBuffer``), and fixed encoder-decoder ones.

    Self-attention keys/values have one row per decoder row (N * beam), position-major or
    head-major (``position_major``); the encoder-decoder ones one row per source sentence
    (N), shared by its beam.
    """

    self_k: PositionBuffer  # (N * beam, t, h, d_k) position-major, (N * beam, h, t, d_k) not
    self_v: PositionBuffer  # the same with d_v
    cross_k: Tensor  # (N, h, S, d_k)
    cross_v: Tensor  # (N, h, S, d_v)

    @classmethod
    def empty(
        cls, rows: int, h: int, d_k: int, d_v: int, capacity: int, cross_k: Tensor, cross_v: Tensor
    ) -> LayerCache:
        """Empty self-attention caches for ``rows`` rows and ``capacity`` positions, of the dtype
        and device of the encoder-decoder keys ``cross_k``, laid out as ``position_major`` says.

        The encoder-decoder keys and values are made contiguous here, once: as the views of
        their projection that ``split_heads`` gives, every step's attention copied them.
        """
        dim = 1 if position_major(cross_k) else 2
        return cls(
            self_k=PositionBuffer(rows, (h, d_k), dim, capacity, cross_k),
            self_v=PositionBuffer(rows, (h, d_v), dim, capacity, cross_k),
            cross_k=cross_k.contiguous(),
            cross_v=cross_v.contiguous(),
        )

    def append(self, k: Tensor, v: Tensor, rows: Tensor | None) -> None:
        """Append one position's self-attention key/value projections (R, 1, h * d), taking
        cache rows ``rows`` first (None: all rows, in order)."""
        for cache, new in ((self.self_k, k), (self.self_v, v)):
            heads = cache.buffer.size(2 if cache.dim == 1 else 1)
            new = new.view(new.size(0), 1, heads, -1)  # (R, 1, h, d): position-major
            cache.append(new if cache.dim == 1 else new.transpose(1, 2), rows)

    def self_attention(self) -> tuple[Tensor, Tensor]:
        """The cached self-attention keys and values, (R, h, t, d_k) and (R, h, t, d_v) views."""
        if self.self_k.dim == 1:
            return self.self_k.values.transpose(1, 2), self.self_v.values.transpose(1, 2)
        return self.self_k.values, self.self_v.values


@dataclass
class DecoderState:
    """Everything incremental decoding carries from step to step, batch-first.

    The decoder runs ``beam`` consecutive rows per source sentence: row r decodes
    sentence r // beam (``reorder`` may change ``beam``).
    """

    layers: list[LayerCache]
    src_mask: Tensor  # (N, 1, 1, S) bool, one row per sentence
    beam: int = 1
    position: int = 0  # index of the next target position
    pending_rows: Tensor | None = None  # self-attention cache rows to take at the next step

    def reorder(
        self, rows: Tensor, sentences: Tensor | None = None, beam: int | None = None
    ) -> None:
        """Keep decoder rows ``rows`` (beam search: the parents of the survivors), ``beam`` of
        them per sentence from now on (None: as many as before).

        With one row per sentence before and after, the sentences follow their rows.
        Otherwise each group of ``beam`` consecutive entries of ``rows`` must come from
        one sentence's rows; ``sentences`` lists the sentences kept, in order, when some
        leave (None: every sentence stays where it is). Beam search's first step runs one
        row per sentence (its k hypotheses are all the empty one) and its first reorder
        spreads each over k rows.
        """
        beam = self.beam if beam is None else beam
        if self.beam == 1 and beam == 1:
            sentences = rows
        self.beam = beam
        # The self-attention caches are gathered lazily, by the next step's append.
        pending = self.pending_rows
        self.pending_rows = rows if pending is None else pending.index_select(0, rows)
        for cache in self.layers:
            if sentences is not None:
                cache.cross_k = cache.cross_k.index_select(0, sentences)
                cache.cross_v = cache.cross_v.index_select(0, sentences)
        if sentences is not None:
            self.src_mask = self.src_mask.index_select(0, sentences)
