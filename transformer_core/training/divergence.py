"""When a training run has diverged: a result to report, not a success.

A run has diverged when
- a training loss is NaN or infinite (caught on the device, ``step.Trainer``), or
- its dev perplexity is not finite, or
- its training loss (per log interval) stays above ``FACTOR`` times its running minimum,
  and at least ``MARGIN`` nats above it, for ``INTERVALS`` log intervals in a row. The
  minimum starts at ln(vocabulary), the loss of a uniform guess (label smoothing
  included), so a run that blows up in its first interval is caught too.

While the loss is above that bound, the run keeps writing checkpoints but prunes none
(``train``), so the checkpoints written before the rise survive a divergence.

The margin keeps a tiny model that has nearly memorised its data (loss 0.05) from
"diverging" at 0.11; the paper's runs, whose loss falls from about ln(vocabulary) to
2 to 4 nats and never rises back, are far from either bound. A loss that merely
stops falling is not divergence: the paper trains a fixed number of steps, with no
early stopping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

FACTOR = 2.0
MARGIN = 1.0  # nats
INTERVALS = 3


class DivergenceWatch:
    """The running minimum of the logged training loss and how long it has been exceeded."""

    def __init__(self, vocab_size: int) -> None:
        self.minimum = math.log(vocab_size)
        self.above = 0  # log intervals in a row above the bound

    @property
    def rising(self) -> bool:
        """The last logged loss was above the bound."""
        return self.above > 0

    def bound(self) -> float:
        return max(FACTOR * self.minimum, self.minimum + MARGIN)

    def observe(self, step: int, loss: float) -> str | None:
        """Take the loss of the log interval ending at ``step``; why the run has diverged,
        or None."""
        if not math.isfinite(loss):
            return f"the training loss is {loss} at step {step}"
        if loss > self.bound():
            self.above += 1
        else:
            self.above = 0
        self.minimum = min(self.minimum, loss)
        if self.above >= INTERVALS:
            return (
                f"the training loss is {loss:.4g} at step {step}, above {FACTOR:g} x its minimum "
                f"{self.minimum:.4g} (+{MARGIN:g} nat) for {INTERVALS} log intervals"
            )
        return None

    def replay(self, records: Iterable[dict[str, Any]]) -> None:
        """Observe the training lines of a resumed run's ``metrics.jsonl``, in order."""
        for record in records:
            if record.get("event") == "train":
                self.observe(int(record["step"]), float(record["loss"]))


def dev_diverged(step: int, dev: dict[str, float]) -> str | None:
    """Why the dev evaluation at ``step`` shows divergence, or None."""
    if not math.isfinite(dev["dev_ppl"]) or not math.isfinite(dev["dev_loss"]):
        return f"the dev perplexity is {dev['dev_ppl']} at step {step}"
    return None
