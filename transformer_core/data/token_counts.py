"""Token counts of the sentences a run trained on: what the analytic training cost
(``training.flops``) needs from the data, summed batch by batch as training goes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class TokenCounts:
    """What the analytic count needs from the data, summed over every sentence trained on.

    Lengths are in positions as the model sees them: the source with its EOS,
    the target with its BOS (= the number of predicted tokens).
    """

    sentences: int = 0
    src_tokens: int = 0  # sum of S
    tgt_tokens: int = 0  # sum of T
    src_sq: int = 0  # sum of S^2 (encoder self-attention pairs)
    tgt_causal: int = 0  # sum of T(T+1)/2 (decoder self-attention pairs)
    src_tgt: int = 0  # sum of S*T (encoder-decoder attention pairs)

    def add(
        self, src_lens: Sequence[int] | np.ndarray, tgt_lens: Sequence[int] | np.ndarray
    ) -> None:
        """Account for one batch, given each sentence's source and target length."""
        s = np.asarray(src_lens, dtype=np.int64)
        t = np.asarray(tgt_lens, dtype=np.int64)
        if s.shape != t.shape:
            raise ValueError(f"{s.size} source lengths but {t.size} target lengths")
        self.sentences += int(s.size)
        self.src_tokens += int(s.sum())
        self.tgt_tokens += int(t.sum())
        self.src_sq += int((s * s).sum())
        self.tgt_causal += int((t * (t + 1) // 2).sum())
        self.src_tgt += int((s * t).sum())

    def merge(self, other: TokenCounts) -> None:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)

    @classmethod
    def uniform(cls, src_tokens: int, tgt_tokens: int, mean_length: float) -> TokenCounts:
        """Counts for sentences that all have ``mean_length`` positions (when only totals are known)."""
        sentences = round(tgt_tokens / mean_length)
        return cls(
            sentences=sentences,
            src_tokens=src_tokens,
            tgt_tokens=tgt_tokens,
            src_sq=round(src_tokens * mean_length),
            tgt_causal=round(tgt_tokens * (mean_length + 1) / 2),
            src_tgt=round(tgt_tokens * mean_length),
        )
