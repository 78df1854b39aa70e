"""A run's ``metrics.jsonl``: one JSON object per log line or dev evaluation, appended by
rank 0, and kept whole: every checkpoint stores the lines up to its step, from which the file
is rewritten when a session resumes, and whenever it is no longer what the log wrote."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from transformer_core.files import atomic_write_text


class MetricsLog:
    """``metrics.jsonl``: one JSON object per line, appended by rank 0.

    ``records`` are all the run's lines so far; every checkpoint stores them
    (``metrics_log``), so that ``restore`` can write the file as it was at that checkpoint.
    A file that is no longer what this log wrote (deleted or cut by hand, or by a second
    Snakemake that removed the outputs of a job it took for incomplete) is rewritten whole
    from ``records`` at the next line and when the run finishes (``sync``).
    """

    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled
        self.records: list[dict[str, Any]] = []
        self.size = 0  # the bytes this log has written to the file

    def restore(self, payload: dict | None) -> None:
        """Rewrite the file with the lines of the checkpoint ``payload`` continues (none: fresh).

        Lines a killed session wrote after that checkpoint are dropped, and a deleted file is
        whole again. A checkpoint written before checkpoints held the lines keeps the existing
        file's lines up to its step; without that file, those lines are lost (said on stderr).
        """
        step = int(payload["step"]) if payload is not None else 0
        stored = payload.get("metrics_log") if payload is not None else []
        if stored is not None:
            self.records = [dict(record) for record in stored]
        elif self.enabled and self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            records = (json.loads(line) for line in lines if line.strip())
            self.records = [record for record in records if record.get("step", 0) <= step]
        else:
            self.records = []
            if self.enabled:
                print(
                    f"{self.path} is missing and the checkpoint of step {step} predates "
                    "checkpoints holding the metrics: the lines up to that step are lost",
                    file=sys.stderr,
                )
        if self.enabled:
            self._rewrite()

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record``; a NaN or infinite number is written as null (valid JSON)."""
        record = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                  for k, v in record.items()}  # fmt: skip
        self.records.append(record)
        if self.enabled and self.sync():  # else the rewrite wrote ``record`` with the rest
            line = (json.dumps(record) + "\n").encode("utf-8")
            with open(self.path, "ab") as handle:
                handle.write(line)
            self.size += len(line)

    def sync(self) -> bool:
        """Rewrite the file from ``records`` if it is not what this log wrote (its size differs
        or it is gone); True when it was intact."""
        try:
            intact = self.path.stat().st_size == self.size
        except FileNotFoundError:
            intact = False
        if intact:
            return True
        print(f"{self.path} was deleted or changed by another process: rewritten from the "
              "run's records", file=sys.stderr)  # fmt: skip
        self._rewrite()
        return False

    def _rewrite(self) -> None:
        text = "".join(json.dumps(r) + "\n" for r in self.records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, text)
        self.size = len(text.encode("utf-8"))


def metrics_whole(path: Path, payload: dict) -> bool:
    """``metrics.jsonl`` holds the lines the checkpoint ``payload`` recorded (a checkpoint
    written before checkpoints held them: the file is there)."""
    stored = payload.get("metrics_log")
    if stored is None or not path.is_file():
        return path.is_file()
    return path.read_text(encoding="utf-8") == "".join(json.dumps(r) + "\n" for r in stored)
