"""Joint sentencepiece BPE: training on a bounded random sample, encoding, decoding.

The paper's shared source-target vocabularies (37000 for EN-DE, 32000 for
EN-FR) are one sentencepiece BPE model trained on both sides together. On a
full corpus (72M lines for EN-FR) training on everything would not fit in
memory, so training reads a uniform random sample of at most
``sample_size`` lines, drawn with a seed: two passes over the inputs, the first
counting lines, the second copying the chosen ones, so memory holds only the
chosen line numbers. The sample does not depend on how the lines are split into files,
only on their order: the workflow passes every shard's source text, then every
shard's target text, which is the whole corpus's source then target, whatever the
number of shards. Special ids are fixed project-wide: pad 0, unk 1, bos 2, eos 3.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm

from transformer_core.data.fetch import open_text
from transformer_core.data.progress import Progress
from transformer_core.errors import UserError
from transformer_core.files import atomic_open, sha256_of
from transformer_core.settings import SentencePieceSettings

SPECIAL_IDS = {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
BATCH_LINES = 10_000


def _lines(paths: Sequence[Path]) -> Iterator[str]:
    for path in paths:
        with open_text(path) as handle:
            for line in handle:
                yield line.rstrip("\n")


def sample_lines(
    inputs: Sequence[str | os.PathLike], sample_size: int, seed: int, out: Path
) -> dict[str, int]:
    """Write a seeded uniform sample of at most ``sample_size`` non-empty lines of ``inputs`` to ``out``."""
    paths = [Path(p) for p in inputs]
    for path in paths:
        if not path.is_file():
            raise UserError(f"{path}: no such file")
    progress = Progress("spm sample: counting", unit="lines")
    total = 0
    for line in _counted(_lines(paths), progress):
        total += bool(line.strip())
    progress.done()
    rng = np.random.default_rng(seed)
    chosen = (
        np.sort(rng.choice(total, size=sample_size, replace=False)) if total > sample_size else None
    )
    written = 0
    progress = Progress("spm sample: copying", progress.count, unit="lines")
    with open(out, "w", encoding="utf-8") as handle:
        index = 0  # among non-empty lines
        for line in _counted(_lines(paths), progress):
            if not line.strip():
                continue
            if chosen is None or (written < len(chosen) and chosen[written] == index):
                handle.write(line + "\n")
                written += 1
            index += 1
    progress.done()
    return {"lines_total": total, "lines_sampled": written}


def _counted(lines: Iterator[str], progress: Progress, every: int = 1 << 16) -> Iterator[str]:
    """``lines`` unchanged, counted on ``progress`` every ``every`` lines (cheap per line)."""
    count = 0
    for count, line in enumerate(lines, 1):
        yield line
        if count % every == 0:
            progress.update(every)
    progress.update(count % every)


def train(
    inputs: Sequence[str | os.PathLike],
    vocab_size: int,
    model_prefix: str | os.PathLike,
    settings: SentencePieceSettings | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Train a joint BPE model on a sample of ``inputs``; writes PREFIX.model and PREFIX.vocab.

    ``settings.split_by_unicode_script`` is sentencepiece's own switch (on by default): on,
    no piece mixes scripts, so a linearized tree's bracket and label (``(NP``) are always two
    pieces; off, they can be one. ``settings`` None: ``SentencePieceSettings``' defaults.
    """
    settings = settings or SentencePieceSettings()
    if vocab_size < len(SPECIAL_IDS) + 1:
        raise UserError(f"vocab_size {vocab_size} is too small")
    prefix = Path(model_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    # Fixed temporary names beside the output: the model file records its input and prefix,
    # so the same command writes the same bytes.
    sample = Path(f"{prefix}.sample.tmp")
    partial = Path(f"{prefix}.partial")
    try:
        counts = sample_lines(inputs, settings.sample_size, settings.seed, sample)
        if counts["lines_sampled"] == 0:
            raise UserError(f"no text to train on in {', '.join(map(str, inputs))}")
        spm.set_random_generator_seed(settings.seed)
        try:
            spm.SentencePieceTrainer.train(
                input=str(sample),
                model_prefix=str(partial),
                model_type="bpe",
                vocab_size=vocab_size,
                character_coverage=settings.character_coverage,
                split_by_unicode_script=settings.split_by_unicode_script,
                input_sentence_size=0,  # the sample is already bounded: use all of it
                shuffle_input_sentence=False,
                num_threads=threads or os.cpu_count() or 1,
                minloglevel=2,
                **SPECIAL_IDS,
            )
        except RuntimeError as err:
            raise UserError(
                f"sentencepiece training failed for vocab_size {vocab_size}: {err}"
            ) from None
        for suffix in (".model", ".vocab"):
            os.replace(f"{partial}{suffix}", f"{prefix}{suffix}")
    finally:
        for leftover in (sample, Path(f"{partial}.model"), Path(f"{partial}.vocab")):
            leftover.unlink(missing_ok=True)
    return {
        **counts,
        "vocab_size": vocab_size,
        "model": f"{prefix}.model",
        "model_sha256": sha256_of(f"{prefix}.model"),
        "seed": settings.seed,
    }


def load(model: str | os.PathLike) -> spm.SentencePieceProcessor:
    """Load a model, checking it uses the project's special ids."""
    if not Path(model).is_file():
        raise UserError(f"{model}: no such sentencepiece model (run `transformer-core spm train`)")
    try:
        processor = spm.SentencePieceProcessor(model_file=str(model))
    except (RuntimeError, OSError) as err:  # sentencepiece's parse error of a damaged file
        raise UserError(
            f"{model}: not a readable sentencepiece model ({str(err).strip().splitlines()[-1]}); "
            "train it again (`transformer-core spm train`)"
        ) from None
    ids = {
        "pad_id": processor.pad_id(),
        "unk_id": processor.unk_id(),
        "bos_id": processor.bos_id(),
        "eos_id": processor.eos_id(),
    }
    if ids != SPECIAL_IDS:
        raise UserError(f"{model}: special ids {ids}, the project needs {SPECIAL_IDS}")
    return processor


def batches(path: Path, size: int = BATCH_LINES) -> Iterator[list[str]]:
    """Lines of ``path`` (without line breaks) in lists of ``size``."""
    batch: list[str] = []
    with open_text(path) as handle:
        for line in handle:
            batch.append(line.rstrip("\n"))
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def _map_file(
    input: str | os.PathLike,
    output: str | os.PathLike,
    convert: Callable[[list[str], int], Iterable[str]],
) -> int:
    """Write ``convert(batch, lines_before)`` for each batch of ``input``'s lines, atomically;
    the number of lines."""
    count = 0
    with atomic_open(output) as out:
        for batch in batches(Path(input)):
            out.writelines(text + "\n" for text in convert(batch, count))
            count += len(batch)
    return count


def encode_file(
    model: str | os.PathLike, input: str | os.PathLike, output: str | os.PathLike, ids: bool = False
) -> int:
    """Encode ``input`` line by line into pieces (or ids) separated by spaces; the number of lines."""
    processor = load(model)

    def encode(batch: list[str], _: int) -> Iterable[str]:
        return (
            " ".join(map(str, e)) for e in processor.encode(batch, out_type=int if ids else str)
        )

    return _map_file(input, output, encode)


def decode_file(
    model: str | os.PathLike, input: str | os.PathLike, output: str | os.PathLike, ids: bool = False
) -> int:
    """Decode space-separated pieces (or ids) per line back to text; the number of lines."""
    processor = load(model)

    def decode(batch: list[str], before: int) -> Iterable[str]:
        if not ids:
            return processor.decode([line.split() for line in batch])
        try:
            tokens = [[int(t) for t in line.split()] for line in batch]
        except ValueError as err:
            raise UserError(f"{input}: near line {before + 1}: not ids ({err})") from None
        return processor.decode(tokens)

    return _map_file(input, output, decode)
