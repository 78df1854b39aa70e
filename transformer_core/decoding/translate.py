"""Translating a file: sentencepiece in, batched beam search, sentencepiece out, input order kept.

Sentences are sorted by length (longest first, so a batch that does not fit
fails at once) and grouped so that a batch holds at most ``max_tokens`` source
tokens, padding included; outputs go back to their input positions. A line
with no pieces (empty or blank) is not decoded and gives an empty output line,
so the output never shifts against the input. Nothing here is specific to
translation: the parsing experiments run the same code with a sentencepiece
model of linearized trees.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

import torch
from torch import nn

from transformer_core.decoding.inference import DEFAULT_RUNTIME, DecodingRuntime, inference_model
from transformer_core.decoding.search import beam_search
from transformer_core.errors import UserError
from transformer_core.parsing.constraint import TreeConstraint
from transformer_core.settings import DecodeSettings


def make_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped longest first, each group at most ``max_tokens`` tokens padded.

    A group of n sentences padded to its longest one, L, costs n * L tokens. A
    sentence longer than ``max_tokens`` gets a group of its own.
    """
    if max_tokens < 1:
        raise UserError(f"--max-tokens must be positive, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep input order
    batches: list[list[int]] = []
    for i in order:
        # Sorted longest first: the group's first sentence is its longest.
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


class Progress:
    """Sentences done and target tokens per second, on stderr, at most every ``interval`` s."""

    def __init__(
        self,
        total: int,
        stream: TextIO = sys.stderr,
        interval: float = 10.0,
        label: str = "translate",
    ):
        self.total, self.stream, self.interval, self.label = total, stream, interval, label
        self.sentences = self.tokens = 0
        self.start = self.last = time.perf_counter()

    def update(self, sentences: int, tokens: int) -> None:
        self.sentences += sentences
        self.tokens += tokens
        now = time.perf_counter()
        if now - self.last >= self.interval:
            self.last = now
            self.report(now)

    def report(self, now: float | None = None) -> None:
        elapsed = max((now or time.perf_counter()) - self.start, 1e-9)
        print(
            f"{self.label}: {self.sentences}/{self.total} sentences, {self.tokens} target tokens, "
            f"{self.tokens / elapsed:.0f} target tokens/s, {elapsed:.1f} s",
            file=self.stream,
            flush=True,
        )


def translate_ids(
    model: nn.Module,
    sources: Sequence[Sequence[int]],
    options: DecodeSettings,
    runtime: DecodingRuntime = DEFAULT_RUNTIME,
    on_batch: Callable[[int, int], None] | None = None,
    constraint: TreeConstraint | None = None,
) -> list[list[int]]:
    """Best output ids (no BOS/EOS) for each source id list (pieces only, EOS is appended here).

    An empty source gives an empty output without decoding. ``on_batch(sentences,
    target_tokens)`` is called after each batch (progress reporting). Batches hold
    ``runtime.max_tokens``; under its bf16 ``autocast`` the search runs a bf16 copy of the
    model (``inference.inference_model``), its scores fp32; its ``compile`` compiles that
    copy's steps; its ``int8`` decodes with a dynamic int8 copy (``quantize.int8_model``).
    ``constraint`` goes to the search (``search.beam_search_nbest``).
    """
    autocast, max_tokens = runtime.autocast, runtime.max_tokens
    model = inference_model(model, autocast, runtime.compile, runtime.int8)
    cfg = model.cfg
    device = next(model.parameters()).device
    outputs: list[list[int]] = [[] for _ in sources]
    todo = [i for i, ids in enumerate(sources) if len(ids) > 0]
    lengths = [len(sources[i]) + 1 for i in todo]  # + EOS
    if on_batch is not None and len(todo) < len(sources):
        on_batch(len(sources) - len(todo), 0)  # empty sources are done already
    for group in make_batches(lengths, max_tokens):
        indices = [todo[j] for j in group]
        batch = torch.full((len(indices), lengths[group[0]]), cfg.pad_id, dtype=torch.long)
        for row, i in enumerate(indices):
            batch[row, : len(sources[i])] = torch.as_tensor(sources[i], dtype=torch.long)
            batch[row, len(sources[i])] = cfg.eos_id
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            hyps = beam_search(model, batch.to(device), options, constraint=constraint)
        for i, hyp in zip(indices, hyps, strict=True):
            outputs[i] = hyp
        if on_batch is not None:
            on_batch(len(indices), sum(len(h) for h in hyps))
    return outputs


def load_translation_model(
    checkpoint: str | os.PathLike,
    spm_path: str | os.PathLike,
    device: torch.device,
    allow_vocab_mismatch: bool = False,
):
    """The model of ``checkpoint`` on ``device`` and its sentencepiece model, checked together.

    The checkpoint must record ``spm_path``'s fingerprint (unless ``allow_vocab_mismatch``)
    and the model's vocabulary must be the sentencepiece model's; each failure is one
    ``UserError`` naming the file.
    """
    import sentencepiece as spm

    from transformer_core.model.checkpoint import check_spm, load_checkpoint, model_from_payload

    try:
        sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    except (OSError, RuntimeError) as err:
        raise UserError(f"cannot load sentencepiece model {spm_path}: {err}") from err
    payload = load_checkpoint(checkpoint, map_location=device)
    check_spm(payload, checkpoint, spm_path, allow_vocab_mismatch)
    model = model_from_payload(payload, checkpoint, map_location=device)
    check_vocabulary(model, sp, spm_path)
    return model, sp


def check_vocabulary(model: nn.Module, sp, spm_path: str | os.PathLike) -> None:
    """The sentencepiece model must use the model's special ids and have its vocabulary size."""
    cfg = model.cfg
    if sp.get_piece_size() > cfg.vocab_size:
        raise UserError(
            f"{spm_path} has {sp.get_piece_size()} pieces, more than the model's "
            f"vocab_size={cfg.vocab_size}"
        )
    if sp.get_piece_size() < cfg.vocab_size:
        raise UserError(
            f"{spm_path} has {sp.get_piece_size()} pieces, fewer than the model's "
            f"vocab_size={cfg.vocab_size}: it is not the sentencepiece model of the "
            "checkpoint's data (the model could emit ids it cannot decode)"
        )
    expected = {"pad": cfg.pad_id, "bos": cfg.bos_id, "eos": cfg.eos_id}
    found = {"pad": sp.pad_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
    if found != expected:
        raise UserError(
            f"{spm_path} uses special ids {found}, the model {expected}: "
            "train sentencepiece with the project's ids (pad=0, unk=1, bos=2, eos=3)"
        )


def encode_lines(model: nn.Module, sp, lines: Sequence[str], source_name: str) -> list[list[int]]:
    """Piece ids of each line; a line too long for learned positions is an error naming it."""
    cfg = model.cfg
    sources = [sp.encode(line) for line in lines]
    if cfg.positional == "learned":
        for number, ids in enumerate(sources, start=1):
            if len(ids) + 1 > cfg.max_positions:
                raise UserError(
                    f"{source_name}: line {number} has {len(ids)} pieces + EOS, more than the "
                    f"{cfg.max_positions} learned positions of the model (model.max_positions)"
                )
    return sources


def translate_lines(
    model: nn.Module,
    sp,
    lines: Sequence[str],
    options: DecodeSettings,
    runtime: DecodingRuntime = DEFAULT_RUNTIME,
    source_name: str = "input",
    progress: Progress | None = None,
) -> list[str]:
    """Detokenized best output for each input line, in input order (empty in, empty out),
    decoded as ``runtime`` says (``translate_ids``).

    ``options.tree_constraint`` (a linearization) makes the search write only well-formed
    trees of it in ``sp``'s pieces (``parsing.constraint``).
    """
    if options.beam > model.cfg.vocab_size:  # more hypotheses than can differ at a step
        raise UserError(
            f"--beam {options.beam} is more than the model's vocabulary of "
            f"{model.cfg.vocab_size} pieces: give a beam of at most {model.cfg.vocab_size}"
        )
    constraint = None
    if options.tree_constraint:
        constraint = TreeConstraint.from_sentencepiece(sp, options.tree_constraint)
    sources = encode_lines(model, sp, lines, source_name)
    on_batch = progress.update if progress is not None else None
    outputs = translate_ids(model, sources, options, runtime, on_batch, constraint)
    # A decoded piece can never smuggle a line break in and shift the output.
    return [sp.decode(ids).replace("\n", " ").replace("\r", " ") for ids in outputs]
