"""Fixed micro-batch shapes: a ladder of widths, and a row count per width.

A compiled training step runs at the speed of the device only when it is compiled once per
shape and the shapes do not keep coming: ``torch.compile`` with static shapes compiles a
graph for each shape it meets, and a CUDA graph replays only the shapes it captured. Batches
cut to ``max_tokens`` have a number of rows that moves with their width, so the shapes of a
run grow with it (hundreds over a WMT epoch). ``FixedShapes`` bounds them to one per width of
a ladder, and leaves the batches themselves as they are:

- **batches**: the exact ones (``batching.TokenBucketSampler``): the same sentences share a
  micro-batch, in the same order, whatever the shapes. Which sentences share a step is the
  recipe; only the collation is a hardware choice. (Packing each width's batches to a row
  count of its own, the budget over the width's mean pair length, lengthened Multi30k's
  translations by 2.6% at alpha 0.6, over three seeds; the exact batches collated to the
  ladder's widths trained as exact ones do.)
- **widths**: multiples of 8 up to 64, then each width about 1/8 above the last, rounded up
  to a multiple of 8 (8, 16, ..., 64, 72, 88, 104, 120, 136, 160, ...: 18 widths up to 272
  tokens). A batch's source and target are both as wide as the ladder's first width that
  holds its longest sentence, either side, with EOS or BOS (so a shape is one number);
- **rows**: per width, the most pairs an exact batch of that width holds (an epoch's
  packing depends on the sorted lengths alone, so every epoch has the same). A batch with
  fewer pairs takes empty sentences (EOS alone, BOS alone) whose targets are all padding.

The extra columns and rows change no result: padding is masked in attention, the loss skips
every position not in ``Batch.target_index``, an empty sentence attends only to itself, and
its outputs reach no loss, so its gradient is zero. What changes is the work: the padded
slots (``bench/bench_shapes.py`` counts them beside the exact widths) and the dropout masks,
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

    ``longest`` and ``sizes`` describe the exact batches of an epoch: each one's longest
    sentence, either side, with EOS or BOS, and its number of pairs. The rows of a width are
    the most pairs of its batches. A width none of them has (or without them) takes
    ``batch_tokens // width`` rows, as if every pair filled it.
    """

    def __init__(
        self,
        batch_tokens: int,
        longest: np.ndarray | None = None,
        sizes: np.ndarray | None = None,
    ):
        if batch_tokens < 1:
            raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
        self.batch_tokens = int(batch_tokens)
        self.most_rows: dict[int, int] = {}  # width -> the most pairs of an exact batch of it
        if longest is not None and len(longest):
            widths, inverse = np.unique(self.widths(longest), return_inverse=True)
            most = np.zeros(len(widths), dtype=np.int64)
            np.maximum.at(most, inverse, np.asarray(sizes, dtype=np.int64))
            self.most_rows = dict(zip(widths.tolist(), most.tolist(), strict=True))

    def widths(self, lengths: np.ndarray) -> np.ndarray:
        """The ladder width of each of ``lengths`` (tokens, EOS or BOS included)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        steps = np.asarray(ladder(int(lengths.max(initial=1))), dtype=np.int64)
        return steps[np.searchsorted(steps, lengths)]

    def rows(self, width: int) -> int:
        """The rows of every batch of ``width`` (one where a single pair is over the budget)."""
        return self.most_rows.get(width) or max(1, self.batch_tokens // width)

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
