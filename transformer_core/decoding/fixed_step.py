"""Decoding as one step of few shapes, for torch.compile (and, on GPUs, CUDA graphs).

The eager decoder (``Transformer.decode_step`` on a ``DecoderState``) changes shape at every
step: its caches grow by a position, and beam search drops the rows of finished sentences.
A compiled step specializes on what it sees, and a CUDA graph replays only the shapes it
captured, so ``FixedShapeDecoder`` bounds the shapes a decode meets:

- **positions**: the self-attention caches hold a multiple of ``CACHE_BLOCK`` positions and
  grow by a block when full; the step attends to the whole cache, the positions not yet
  written masked;
- **rows**: the beams of a number of sentences from ``sentence_slots`` (2, 4, 8, then the
  training ladder's 16, 24, ..., 64, 72, 88, ...). Rows past the real ones compute what no
  one reads (they copy row 0), and the slots shrink only when the sentences left fit fewer;
- **source**: the encoder's keys and values padded to ``data.shapes.ladder``'s width, the
  padding masked like any.

A newstest2014-sized decode meets 69 shapes this way where the eager decoder meets 420, one
a step (``bench/bench_step_shapes.py``). The step is one function of tensors (``decode``): it
takes the cache rows beam search kept (a pending reorder), writes the new position's keys and
values in place, runs each layer's ``DecoderLayer.attend_and_transform`` (the model's own
arithmetic) and projects to the vocabulary, so one call does a step's work. Masked positions
and keys get weight 0 (exp of -inf), so the step computes what the eager one does, summed in
another order. Caches come from a ``CachePool`` that keeps them from batch to batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_core.data.shapes import ladder

CACHE_BLOCK = 16  # positions a cache grows by
POOL_SHAPES = 256  # cache shapes a CachePool keeps: a newstest2014-sized decode meets 69
# No dimension of 1, and no source narrower than CPU_SHORT_SOFTMAX keys: where a size crosses
# either, torch.compile specializes, and a decode would compile one more graph.
MIN_SENTENCES = 2
MIN_SOURCE = 16


def compile_step(step: Callable, device: torch.device) -> Callable:
    """``step`` compiled by inductor for ``device``: once, with dynamic shapes (a graph for each
    shape would cost a compilation each, tens of seconds on a CPU). On GPUs each shape's step is
    also captured as a CUDA graph (``reduce-overhead``) and replayed, one launch a step.

    Not frozen on CPUs: inductor's freezing (weights packed into the graph) measured no faster
    here and keeps a graph out of inductor's cache on disk, so every process would compile it
    anew (25 s against 12.6 s from the cache for Multi30k's shape on 2 cores)."""
    import torch.fx.experimental._config  # here: a decode that compiles nothing never loads it

    # Sizes that happen to be equal (16 rows, 16 positions) are not one symbol: else the first
    # shape where they differ compiles again. Process-wide; it only keeps graphs more general.
    torch.fx.experimental._config.use_duck_shape = False
    mode = "reduce-overhead" if device.type == "cuda" else None
    return torch.compile(step, dynamic=True, mode=mode)


def sentence_slots(sentences: int) -> int:
    """The sentences a step's rows hold for ``sentences`` real ones: 2, 4, 8, then the
    training ladder (``data.shapes.ladder``)."""
    if sentences <= 8:
        return max(MIN_SENTENCES, 1 << max(0, sentences - 1).bit_length())
    return ladder(sentences)[-1]


def source_slots(length: int) -> int:
    """The source positions the encoder-decoder keys are padded to: the ladder's width, at
    least ``MIN_SOURCE``."""
    return max(MIN_SOURCE, ladder(length)[-1])


class CachePool:
    """Self-attention caches by shape, kept from batch to batch (the last ``POOL_SHAPES``
    shapes). A CUDA graph reads and writes its caches where they were when it was recorded: new
    caches of a shape it has seen would make it record again, at every batch. A batch holds
    one shape at a time (its rows only shrink, its caches only grow), so it never takes a shape
    it holds (and a decoder decodes one batch at a time); buffers are zeros when new, and hold finite values of an earlier batch after, so
    the positions a step masks never turn its sums into NaN."""

    def __init__(self):
        self.buffers: dict[tuple, Tensor] = {}

    def take(self, role: str, layer: int, like: Tensor, rows: int, capacity: int) -> Tensor:
        """The buffer of ``role`` ("k" or "v") of decoder layer ``layer``: (rows, h, capacity,
        d) of ``like``'s head count, head width, dtype and device."""
        shape = (rows, like.size(1), capacity, like.size(3))
        key = (role, layer, shape, like.dtype, like.device)
        if key not in self.buffers:
            if len(self.buffers) >= POOL_SHAPES:
                del self.buffers[next(iter(self.buffers))]
            self.buffers[key] = like.new_zeros(shape)
            if like.is_cuda:  # the graphs read and write it where it is
                torch._dynamo.mark_static_address(self.buffers[key])
        return self.buffers[key]

    def reshaped(
        self, caches: list[Tensor], role: str, capacity: int, rows: Tensor | None = None
    ) -> list[Tensor]:
        """``caches`` (one per layer) as buffers of ``capacity`` positions, the written ones
        copied, and of the rows ``rows`` (row i holding row ``rows[i]``; None: all, in order)."""
        out = []
        for layer, cache in enumerate(caches):
            kept = cache if rows is None else cache.index_select(0, rows)
            buffer = self.take(role, layer, cache, kept.size(0), capacity)
            buffer[:, :, : cache.size(2)] = kept
            out.append(buffer)
        return out


def _pad_rows(x: Tensor, rows: int) -> Tensor:
    """``x`` with rows appended (copies of its row 0) up to ``rows``."""
    missing = rows - x.size(0)
    if missing <= 0:
        return x
    return torch.cat([x, x[:1].expand(missing, *x.shape[1:])])


class LayerCaches(NamedTuple):
    """Every decoder layer's caches, as one argument of the step: self-attention keys and values
    (rows, h, capacity, d_k), and encoder-decoder ones (slots, h, source slots, d_k)."""

    self_k: list[Tensor]
    self_v: list[Tensor]
    cross_k: list[Tensor]
    cross_v: list[Tensor]


@dataclass
class FixedShapeState:
    """A ``DecoderState`` of bounded shapes (``FixedShapeDecoder.init_state``).

    ``rows`` of the ``slots * beam`` decoder rows are real; ``sentences`` of the ``slots``
    sentences. ``pending`` holds, for every row, the cache row it takes at the next step.
    """

    self_k: list[Tensor]  # per layer (slots * beam, h, capacity, d_k)
    self_v: list[Tensor]
    cross_k: list[Tensor]  # per layer (slots, h, source slots, d_k)
    cross_v: list[Tensor]
    src_mask: Tensor  # (slots, 1, 1, source slots) bool
    sentences: int
    beam: int
    pool: CachePool
    position: int = 0
    pending: Tensor | None = None

    @property
    def slots(self) -> int:
        return self.src_mask.size(0)

    def reorder(
        self, rows: Tensor, sentences: Tensor | None = None, beam: int | None = None
    ) -> None:
        """``DecoderState.reorder``'s contract: keep decoder rows ``rows``, ``beam`` per
        sentence from now on; ``sentences`` lists the sentences kept when some leave."""
        beam = self.beam if beam is None else beam
        if self.beam == 1 and beam == 1:
            sentences = rows
        if sentences is not None:
            self.sentences = sentences.size(0)
            kept = _pad_rows(sentences, sentence_slots(self.sentences))
            self.cross_k = [k.index_select(0, kept) for k in self.cross_k]
            self.cross_v = [v.index_select(0, kept) for v in self.cross_v]
            self.src_mask = self.src_mask.index_select(0, kept)
        self.beam = beam
        if self.pending is not None:
            rows = self.pending.index_select(0, rows)
        rows = _pad_rows(rows, self.slots * beam)
        if rows.size(0) == self.self_k[0].size(0):
            self.pending = rows  # taken by the next step, in place
        else:  # the caches change shape: others, which the steps then update in place
            capacity = self.self_k[0].size(2)
            self.self_k = self.pool.reshaped(self.self_k, "k", capacity, rows)
            self.self_v = self.pool.reshaped(self.self_v, "v", capacity, rows)
            self.pending = None

    def grow(self) -> None:
        """One block of positions more in every cache (a pending reorder stays pending)."""
        capacity = self.self_k[0].size(2) + CACHE_BLOCK
        self.self_k = self.pool.reshaped(self.self_k, "k", capacity)
        self.self_v = self.pool.reshaped(self.self_v, "v", capacity)


class FixedShapeDecoder(nn.Module):
    """A model's incremental decoder on ``FixedShapeState``s, for the searches of
    ``decoding.search``: ``encode``, ``init_state`` and ``decode_step`` as ``Transformer``'s.

    ``step`` is the function a step of ``beam`` > 1 calls: ``decode``, or with ``compiled`` its
    compiled version (``compile_step``). A step of one row per sentence (beam search's first,
    greedy search) runs ``decode`` as it is: a graph of its own would cost a compilation for
    one step a batch."""

    def __init__(self, model: nn.Module, compiled: bool = False):
        super().__init__()
        self.model = model
        self.cfg = model.cfg
        device = next(model.parameters()).device
        self.step = compile_step(self.decode, device) if compiled else self.decode
        self.pool = CachePool()
        self._encodings: dict[tuple[int, torch.device], Tensor] = {}

    def encode(self, src_tokens: Tensor) -> tuple[Tensor, Tensor]:
        return self.model.encode(src_tokens)

    def init_state(
        self, memory: Tensor, src_mask: Tensor, beam: int = 1, capacity: int = 64
    ) -> FixedShapeState:
        """The state of ``beam`` rows per sentence of ``memory`` (N, S, d_model); caches of one
        block of positions (``capacity``, the search's bound, is not needed: they grow)."""
        sentences, length = src_mask.size(0), src_mask.size(-1)
        slots, width = sentence_slots(sentences), source_slots(length)
        memory = F.pad(_pad_rows(memory, slots), (0, 0, 0, width - length))
        src_mask = F.pad(_pad_rows(src_mask, slots), (0, width - length), value=False)
        cross_k, cross_v, self_k, self_v = [], [], [], []
        for index, layer in enumerate(self.model.decoder_layers):
            k, v = layer.cross_attn.project_kv(memory)
            cross_k.append(k.contiguous())
            cross_v.append(v.contiguous())
            self_k.append(self.pool.take("k", index, k, slots * beam, CACHE_BLOCK))
            self_v.append(self.pool.take("v", index, v, slots * beam, CACHE_BLOCK))
        return FixedShapeState(
            self_k, self_v, cross_k, cross_v, src_mask, sentences, beam, self.pool
        )

    def decode_step(self, tokens: Tensor, state: FixedShapeState) -> Tensor:
        """Logits (rows, vocab) for the position after ``tokens`` (rows,), the last inputs."""
        if state.position == state.self_k[0].size(2):  # the caches are full
            state.grow()
        capacity = state.self_k[0].size(2)
        device = tokens.device
        rows = state.slots * state.beam
        pending = state.pending
        if pending is None:
            pending = torch.arange(rows, device=device)
        step = self.step if state.beam > 1 else self.decode
        logits = step(
            _pad_rows(tokens, rows),
            pending,
            torch.tensor(state.position, device=device),
            self._position_encodings(capacity, device),
            LayerCaches(state.self_k, state.self_v, state.cross_k, state.cross_v),
            state.src_mask,
            state.beam,
        )
        state.position += 1
        state.pending = None
        return logits[: tokens.size(0)]

    def _position_encodings(self, capacity: int, device: torch.device) -> Tensor:
        """The encodings (capacity, d_model) of the positions a cache of ``capacity`` holds: one
        tensor per capacity, which the steps index (a view per step would be a new input). A
        learned table ends at ``max_positions``, where the search stops: zeros after it."""
        key = (capacity, device)
        if key not in self._encodings:
            cfg = self.cfg
            known = min(capacity, cfg.max_positions) if cfg.positional == "learned" else capacity
            table = self.model.positions(0, known, device)
            self._encodings[key] = F.pad(table, (0, 0, 0, capacity - known)).contiguous()
        return self._encodings[key]

    def decode(
        self,
        tokens: Tensor,
        rows: Tensor,
        position: Tensor,
        encodings: Tensor,
        caches: LayerCaches,
        src_mask: Tensor,
        beam: int,
    ) -> Tensor:
        """One step as a function of tensors: logits (rows, vocab) of ``tokens`` (rows,) at
        ``position`` (a 0-d tensor, so that it changes no graph), whose encoding is that row of
        ``encodings``.

        Each layer's self-attention caches (``caches``) take rows ``rows``, then the new keys and values at ``position``, in
        place (so that they keep their memory, as a CUDA graph needs); attention covers the
        positions up to ``position``."""
        model = self.model
        at = position.view(1)
        y = model.embedding(tokens[:, None]) * math.sqrt(model.cfg.d_model)
        y = y + encodings.index_select(0, at)
        positions = torch.arange(encodings.size(0), device=at.device)
        write = (positions == at)[None, None, :, None]  # (1, 1, capacity, 1)
        keep = (positions <= at)[None, None, None, :]  # (1, 1, 1, capacity)
        for layer, k_cache, v_cache, k_cross, v_cross in zip(
            model.decoder_layers, *caches, strict=True
        ):
            attn = layer.self_attn
            k_cache.copy_(
                torch.where(write, attn.split_heads(attn.w_k(y), attn.d_k), k_cache[rows])
            )
            v_cache.copy_(
                torch.where(write, attn.split_heads(attn.w_v(y), attn.d_v), v_cache[rows])
            )
            y = layer.attend_and_transform(
                y, (k_cache, v_cache), (k_cross, v_cross), src_mask, beam, keep
            )
        return model.project(y[:, 0])
