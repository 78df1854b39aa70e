"""Progress lines for the long data stages: done / total, rate and ETA, on stderr.

At paper scale a stage runs for minutes to hours (EN-FR has 36M pairs), and its
log is all a user watching ``tail -f logs/...`` or a cluster job sees. A
``Progress`` prints at most one line every ``interval`` seconds while work
goes on, and one final line with the overall rate, e.g.::

    prepare shard 3 of 8: 1,210,000 / 4,500,000 pairs (26.9%), 2,913 pairs/s, ETA 18m49s
    prepare shard 3 of 8: 4,500,000 pairs in 25m44s, 2,914 pairs/s

Short runs (tests, the smoke corpus) print only the final line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

INTERVAL_SECONDS = 30.0


def duration(seconds: float) -> str:
    """``1h02m03s``, ``4m05s`` or ``6s``."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class Progress:
    """Count units of work (``unit``: pairs, lines) of a stage named ``what``.

    ``total`` (None when unknown) gives the percentage and the ETA. Call
    ``update(n)`` after each batch and ``done()`` once at the end.
    """

    def __init__(
        self,
        what: str,
        total: int | None = None,
        unit: str = "pairs",
        interval: float = INTERVAL_SECONDS,
        stream: TextIO | None = None,
    ) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self.count = 0
        self.start = time.monotonic()
        self._last = self.start

    def rate(self, now: float) -> float:
        elapsed = now - self.start
        return self.count / elapsed if elapsed > 0 else 0.0

    def update(self, n: int) -> None:
        self.count += n
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._print(self._line(now))

    def _line(self, now: float) -> str:
        rate = self.rate(now)
        if not self.total:
            return f"{self.what}: {self.count:,} {self.unit}, {rate:,.0f} {self.unit}/s"
        share = self.count / self.total
        eta = duration((self.total - self.count) / rate) if rate > 0 else "unknown"
        return (
            f"{self.what}: {self.count:,} / {self.total:,} {self.unit} ({share:.1%}), "
            f"{rate:,.0f} {self.unit}/s, ETA {eta}"
        )

    def done(self) -> None:
        now = time.monotonic()
        self._print(
            f"{self.what}: {self.count:,} {self.unit} in {duration(now - self.start)}, "
            f"{self.rate(now):,.0f} {self.unit}/s"
        )

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
