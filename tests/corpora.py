"""The small corpora several test modules train and decode on: random sentences of a fixed
word list (for sentencepiece models), reversal pairs a tiny model learns in seconds, the
training tests' model shape as ``train``'s options, and tar archives of given members (the
download tests' stand-ins for statmt.org's)."""

import io
import random
import tarfile

import numpy as np
from conftest import TRAIN_SHAPE

from transformer_core.data.binarized import BinarizedWriter

WORDS = (
    "the cat dog house garden river walks sees finds small green old runs near under "
    "a bird tree red quickly slowly and with from"
).split()

# TRAIN_SHAPE as the command line's options.
TINY = [item for key, value in TRAIN_SHAPE.items() for item in ("--set", f"{key}={value}")]


def generated_sentences(n, seed=0):
    """``n`` sentences of 3 to 12 words of ``WORDS``."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def write_corpus(prefix, n=20, vocab=24, seed=0, min_len=3, max_len=8):
    """``n`` random pairs whose target is the reversed source: a task a tiny model can learn."""
    rng = np.random.default_rng(seed)
    with BinarizedWriter(prefix, vocab) as writer:
        for _ in range(n):
            src = rng.integers(4, vocab, rng.integers(min_len, max_len + 1)).tolist()
            writer.add(src, src[::-1])
    return prefix


def tar_bytes(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    """A tar archive (gzipped by default) holding ``members`` (name -> content), as bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
