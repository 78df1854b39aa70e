"""Live training curves: what the training session logs, as TensorBoard scalars in the run folder.

At each log interval the session already holds the interval's loss, perplexity, learning rate
and speed on the host (``session.TrainingSession.log_interval``), and after each dev scoring
the dev loss and perplexity; this writes those values, and on GPUs the peak memory torch's
allocator reports (a host-side count), so watching a run costs no device read. Only rank 0
writes, into ``RUN_DIR/tensorboard``. A resumed run continues its curves: what a killed session
wrote after the checkpoint it resumes from is removed from the event files themselves
(``purge_events``; TensorBoard's own ``purge_step`` only hides it from TensorBoard's reader), so
no step shows twice to any reader.

On when the ``tensorboard`` package is installed (the ``monitor`` extra), off with
``train.tensorboard: false`` or ``--no-tensorboard``. ``tensorboard --logdir runs/`` shows every
run of a workflow.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import torch

from transformer_core.errors import UserError
from transformer_core.files import atomic_open

# metrics.jsonl's keys and the curve each becomes.
TRAIN_CURVES = {
    "loss": "train/loss",
    "ppl": "train/perplexity",
    "lr": "train/learning_rate",
    "tgt_tokens_per_s": "train/target_tokens_per_second",
}
DEV_CURVES = {
    "dev_loss": "dev/loss",
    "dev_ppl": "dev/perplexity",
    "dev_loss_wrong_src": "dev/loss_with_wrong_sources",
}


def tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package and torch's writer of it import."""
    try:
        import tensorboard  # noqa: F401
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        return False
    return True


def purge_events(folder: Path, first_step: int) -> int:
    """Rewrite each event file in ``folder`` without its events at ``first_step`` or later
    and without a record cut off by a kill; the events dropped. Records are TFRecords (length,
    its CRC, the serialized Event, its CRC): kept ones are copied byte for byte."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    dropped = 0
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, kept, offset, changed = path.read_bytes(), [], 0, False
        while offset < len(data):
            if offset + 12 > len(data):
                changed = True  # a header cut off
                break
            (length,) = struct.unpack_from("<Q", data, offset)
            end = offset + 12 + length + 4
            if end > len(data):
                changed = True  # a record cut off
                break
            try:
                step = Event.FromString(data[offset + 12 : end - 4]).step
            except DecodeError:
                kept.append(data[offset:])  # not ours to judge: left as it is
                break
            if step >= first_step:
                dropped, changed = dropped + 1, True
            else:
                kept.append(data[offset:end])
            offset = end
        if changed:
            with atomic_open(path, "wb") as handle:
                handle.write(b"".join(kept))
    return dropped


class TrainingCurves:
    """A TensorBoard writer of one session's curves, or nothing where it is off."""

    def __init__(self, folder: Path, enabled: bool, first_step: int):
        """Write into ``folder`` where ``enabled`` and TensorBoard is installed; the session's
        first step is ``first_step`` (what earlier sessions wrote from it on is dropped)."""
        self.writer, self.folder = None, folder
        if enabled and tensorboard_available():
            from torch.utils.tensorboard import SummaryWriter

            if folder.exists() and not folder.is_dir():
                raise UserError(
                    f"{folder} is a file, where the run writes its TensorBoard curves; move "
                    "it away, or train with --no-tensorboard"
                )
            if folder.is_dir():
                purge_events(folder, first_step)
            self.writer = SummaryWriter(log_dir=str(folder), purge_step=first_step)
            self.excepthook, threading.excepthook = threading.excepthook, self._thread_failed

    @property
    def active(self) -> bool:
        return self.writer is not None

    def train(self, step: int, record: dict[str, Any], device: torch.device) -> None:
        """The log interval's ``record`` (metrics.jsonl's), and the GPU's peak memory."""
        if self.writer is None:
            return
        for key, tag in TRAIN_CURVES.items():
            self.writer.add_scalar(tag, record[key], step)
        if device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(device) / 2**30
            self.writer.add_scalar("train/peak_memory_gib", peak, step)
        self._flush()

    def dev(self, step: int, scores: dict[str, float]) -> None:
        """A dev scoring's loss and perplexity, with right and wrong sources."""
        if self.writer is None:
            return
        for key, tag in DEV_CURVES.items():
            self.writer.add_scalar(tag, scores[key], step)
        self._flush()

    def _flush(self) -> None:
        """Write the events out now (the writer's thread writes them)."""
        self.writer.flush()

    def close(self) -> None:
        """Write what is left; where the folder is gone (the session says so), nothing."""
        if self.writer is None:
            return
        try:
            self.writer.close()
        except OSError:
            if self.folder.is_dir():
                raise
        finally:
            threading.excepthook = self.excepthook

    def _thread_failed(self, args: threading.ExceptHookArgs) -> None:
        """The writer thread's own report of an OSError where the folder is gone: silent,
        for the session's one line (``TrainingSession.run``) says it; others as Python's."""
        if not (issubclass(args.exc_type, OSError) and not self.folder.is_dir()):
            self.excepthook(args)
