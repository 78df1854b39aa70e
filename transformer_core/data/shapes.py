"""Fixed micro-batch shapes: a ladder of widths, and a row count per width.

A compiled training step runs at the speed of the device only when it is compiled once per
shape and the shapes do not keep coming: ``torch.compile`` with static shapes compiles a
graph for each shape it meets, and a CUDA graph replays only the shapes it captured. Batches
cut to ``max_tokens`` have a number of rows that moves with their width, so the shapes of a
run grow with it (hundreds over a WMT epoch). ``FixedShapes`` bounds them to one per width of
a ladder:

- **widths**: multiples of 8 up to 64, then each width about 1/8 above the last, rounded up
  to a multiple of 8 (8, 16, ..., 64, 72, 88, 104, 120, 136, 160, ...: 18 widths up to 272
  tokens). A batch's source and target are both as wide as the ladder's first width that
  holds its longest sentence, either side, with EOS or BOS (so a shape is one number);
- **rows**: per width, ``batch_tokens`` over the mean cost (longer side, with EOS or BOS)
  of the corpus's pairs of that width, whatever the batch holds. The budget counts real
  tokens, as it does for exact batches (whose padding to a multiple of 8 is not counted
  either), so a step of fixed shapes carries the tokens an exact one does: counted in slots,
  a ladder width's padding would cost a WMT-sized step 11-12% of its tokens and a Multi30k
  step 17% (``bench/bench_shapes.py``). The price is slots: a batch holds ``width / mean``
  times the budget (on WMT lengths 24% more at width 16, 5-11% more above 64). The sampler
  packs a batch up to its width's rows (``TokenBucketSampler``), so only the last batch of a
  width, or one split for the ranks, is short of rows; the rows it lacks are empty sentences
  (EOS alone, BOS alone) whose targets are all padding.

The extra columns and rows change no result: padding is masked in attention, the loss skips
every position not in ``Batch.target_index``, an empty sentence attends only to itself, and
its outputs reach no loss, so its gradient is zero. What changes is the work: the padding
share (``bench/bench_shapes.py`` measures it beside the exact widths) and the dropout masks,
which are drawn over the padded shape.
"""

from __future__ import annotations

import numpy as np

LADDER_STEP = 8  # widths are multiples of 8: what the tensor cores of a GPU want
LADDER_GROWTH = 1.125  # above 64, each width about 1/8 above the last


def ladder(longest: int) -> list[int]:
    """The ladder's widths, up to the first that holds ``longest`` tokens."""
    widths = [LADDER_STEP]
    while widths[-1] < longest:
        grown = max(widths[-1] + LADDER_STEP, int(np.ceil(widths[-1] * LADDER_GROWTH)))
        widths.append(-(-grown // LADDER_STEP) * LADDER_STEP)
    return widths


class FixedShapes:
    """The shapes of the micro-batches of ``batch_tokens`` tokens per side: ``(rows, width)``.

    ``longer`` holds the cost of each pair of the corpus (its longer side, with EOS or BOS):
    the rows of a width are the budget over its pairs' mean cost. A width none of them has
    (or without ``longer``) takes ``batch_tokens // width`` rows, as if every pair filled it.
    """

    def __init__(self, batch_tokens: int, longer: np.ndarray | None = None):
        if batch_tokens < 1:
            raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
        self.batch_tokens = int(batch_tokens)
        self.mean_cost: dict[int, float] = {}  # width -> mean cost of the corpus's pairs of it
        if longer is not None and len(longer):
            widths, inverse = np.unique(self.widths(longer), return_inverse=True)
            sums = np.bincount(inverse, weights=np.asarray(longer, dtype=np.float64))
            means = sums / np.bincount(inverse)
            self.mean_cost = dict(zip(widths.tolist(), means.tolist(), strict=True))

    def widths(self, lengths: np.ndarray) -> np.ndarray:
        """The ladder width of each of ``lengths`` (tokens, EOS or BOS included)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        steps = np.asarray(ladder(int(lengths.max(initial=1))), dtype=np.int64)
        return steps[np.searchsorted(steps, lengths)]

    def rows(self, width: int) -> int:
        """The rows of every batch of ``width`` (one where a single pair is over the budget)."""
        return max(1, int(self.batch_tokens // self.mean_cost.get(width, width)))

    def of(self, dataset, indices) -> tuple[int, int]:
        """``(rows, width)`` of the batch of the pairs ``indices`` of ``dataset`` (a
        ``ParallelDataset``)."""
        longest = max(dataset.src_lens[indices].max(), dataset.tgt_lens[indices].max())
        return self.shape(1 + int(longest))  # + EOS or BOS

    def shape(self, longest: int) -> tuple[int, int]:
        """``(rows, width)`` of a batch whose longest sentence, either side, has ``longest``
        tokens with EOS or BOS."""
        width = int(self.widths(np.array([longest]))[0])
        return self.rows(width), width
