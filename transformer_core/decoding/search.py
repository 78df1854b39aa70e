"""Batched beam search (and greedy search) on the Transformer's incremental decoder.

The decoding recipe of the paper (section 6.1, via tensor2tensor; ``DecodeSettings``): beam size 4,
the GNMT length penalty ``lp(|Y|) = ((5 + |Y|) / 6) ** alpha`` with alpha 0.6,
maximum output length ``max_len_a * source_length + max_len_b`` (1 and 50 for
translation, 1 and 300 for parsing) and early termination. A hypothesis is
scored by ``log P(Y | X) / lp(|Y|)``, where ``|Y|`` counts the generated tokens
including EOS (tensor2tensor's convention). This is not fairseq's ``lenpen``,
which divides by ``|Y| ** lenpen``.

One step for every unfinished sentence at once (shapes with A active sentences,
beam k, vocabulary V):

1. ``decode_step`` gives log-probs (A*k, V); pad and BOS are never generated,
   EOS is blocked until ``min_len`` real tokens exist, and a ``constraint`` (the
   parser's ``TreeConstraint``) masks the pieces that would break a tree.
2. The 2k best extensions of each sentence's k live hypotheses are taken
   (2 x beam size in case half are EOS).
3. Extensions among the k best that end in EOS, or that reach the sentence's
   maximum length, are finished as they are; the k best of the rest stay live,
   so the live beam always holds k hypotheses.
4. A sentence is done when (a) k hypotheses have finished (the beam is spent,
   as in fairseq; this makes beam size 1 exactly greedy search), (b) no live
   hypothesis can still beat the ``nbest``-th best finished one, or (c) it has
   reached its maximum length. Done sentences leave the batch: the decoder state
   is shrunk with ``DecoderState.reorder``, so they stop costing compute.

Everything above stays on the device: finished hypotheses are written into
device buffers (``FinishedHypotheses``), and the host reads one small thing per
step, which sentences are done, to know when to stop and whom to drop. A
batch's hypotheses come back to the host in one transfer at its end.

The bound of (b). A live hypothesis with log-prob L <= 0 after t tokens can only
end as some Y' with log P(Y') <= L (every further token has probability <= 1)
and t < |Y'| <= max_len. Its score is therefore at most
``L / max(lp(n) for t < n <= max_len)``, and since lp is monotone in n that
maximum is ``max(lp(t + 1), lp(max_len))`` (``lp(max_len)`` when alpha >= 0).
Sorting makes the first live hypothesis the one with the largest L, so the
sentence's bound is that hypothesis' L over this penalty. When the bound is no
higher than the ``nbest``-th best finished score, no continuation can change
the returned ``nbest`` list: stopping there is exact, not a heuristic.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from transformer_core.model.decoder_state import PositionBuffer
from transformer_core.settings import DecodeSettings

if TYPE_CHECKING:
    from transformer_core.parsing.constraint import TreeConstraint


def _options(options: DecodeSettings | None, settings: dict[str, Any]) -> DecodeSettings:
    """``options`` (default: the paper's) with ``settings``, keyword values of its fields, applied.

    So that ``beam_search(model, src, DecodeSettings(beam=2))`` and
    ``beam_search(model, src, beam=2)`` are the same call.
    """
    return dataclasses.replace(options if options is not None else DecodeSettings(), **settings)


@dataclass(frozen=True)
class Hypothesis:
    """One finished output: token ids without BOS/EOS, its length-penalized and raw log-prob."""

    tokens: list[int]
    score: float  # log P(Y | X) / lp(|Y|)
    log_prob: float  # log P(Y | X), EOS included when the hypothesis ended with EOS


def length_penalty(length: Tensor | float, alpha: float) -> Tensor | float:
    """GNMT's lp(|Y|) = ((5 + |Y|) / 6) ** alpha; |Y| counts generated tokens including EOS."""
    return ((5.0 + length) / 6.0) ** alpha


def max_output_lengths(
    src_tokens: Tensor,
    pad_id: int,
    max_len_a: float,
    max_len_b: int,
    max_positions: int | None = None,
) -> Tensor:
    """Per sentence: ``int(max_len_a * source_length + max_len_b)`` generated tokens, at least 1.

    ``source_length`` counts the non-pad source tokens (EOS included). With learned
    positions the decoder cannot go past its position table: pass ``max_positions``
    to cap the length there.
    """
    src_lengths = (src_tokens != pad_id).sum(dim=1).to(torch.float64)
    lengths = (max_len_a * src_lengths + max_len_b).floor().long().clamp(min=1)
    if max_positions is not None:
        lengths = lengths.clamp(max=max_positions)
    return lengths


def _position_cap(model: nn.Module) -> int | None:
    cfg = model.cfg
    return cfg.max_positions if getattr(cfg, "positional", "sinusoidal") == "learned" else None


def blocked_tokens(cfg, device: torch.device) -> tuple[Tensor, Tensor]:
    """Two lists of token ids whose log-probs are set to -inf: pad and BOS (never generated),
    and the same with EOS too (before ``min_len`` real tokens exist)."""
    never = torch.tensor([cfg.pad_id, cfg.bos_id], device=device)
    return never, torch.cat([never, torch.tensor([cfg.eos_id], device=device)])


def _next_log_probs(
    model: nn.Module, tokens: Tensor, state, step: int, min_len: int, blocked: tuple[Tensor, Tensor]
) -> Tensor:
    """Log-probs (rows, V) of the next token, in fp32, with the never-generated tokens masked.

    ``step`` is the number of tokens generated once this one is chosen (1-based);
    ``blocked`` is ``blocked_tokens``'s pair. The mask fills those few columns (not a pass
    over the whole (rows, V) tensor).
    """
    log_probs = model.decode_step(tokens, state).float()
    torch.log_softmax(log_probs, dim=-1, out=log_probs)  # in place: no second (rows, V) tensor
    # EOS now would leave fewer than min_len real tokens: blocked with the never-generated ones.
    return log_probs.index_fill_(1, blocked[1] if step - 1 < min_len else blocked[0], -math.inf)


class FinishedHypotheses:
    """The finished hypotheses of a batch, kept on the device until the batch ends.

    Per sentence, up to ``slots`` of them in the order they finished (a sentence
    takes at most k per step and is done once k have finished, so fewer than 2k ever
    do), each with its tokens, length, score and log-prob; and the ``nbest`` best
    scores so far, which the stopping rule needs every step. ``results`` brings
    everything to the host in one transfer.
    """

    def __init__(self, sentences: int, beam: int, nbest: int, capacity: int, device):
        self.slots, self.nbest = 2 * beam, nbest
        dump = self.slots + 1  # one more slot: where candidates that did not finish are written
        self.tokens = torch.zeros(
            sentences, dump, max(1, capacity), dtype=torch.long, device=device
        )
        self.lengths = torch.zeros(sentences, dump, dtype=torch.long, device=device)
        self.scores = torch.zeros(sentences, dump, device=device)
        self.log_probs = torch.zeros(sentences, dump, device=device)
        self.count = torch.zeros(sentences, dtype=torch.long, device=device)
        self.best = torch.full((sentences, nbest), -math.inf, device=device)  # sorted, best first

    def add(
        self,
        sentences: Tensor,
        finished: Tensor,
        history: Tensor,
        tokens: Tensor,
        log_probs: Tensor,
        penalty: float,
        eos_id: int,
    ) -> None:
        """Record the candidates ``finished`` (A, k) of sentences ``sentences`` (A,): their
        earlier tokens ``history`` (A, k, t - 1), last tokens ``tokens`` (A, k) (not kept
        when EOS) and log-probs ``log_probs`` (A, k); a score is log-prob / ``penalty``."""
        steps = history.size(2) + 1
        if steps > self.tokens.size(2):  # a cache of too little capacity grew: so do we
            grown = torch.zeros_like(self.tokens).repeat(1, 1, 2)
            grown[:, :, : self.tokens.size(2)] = self.tokens
            self.tokens = grown
        count = self.count[sentences]
        slot = count[:, None] + finished.cumsum(1) - 1  # (A, k): the next free slots, in order
        slot = torch.where(finished, slot, self.slots)  # the rest to the dump slot
        row = sentences[:, None].expand_as(slot)
        self.tokens[row, slot, : steps - 1] = history
        self.tokens[row, slot, steps - 1] = tokens
        self.lengths[row, slot] = steps - (tokens == eos_id).long()
        scores = log_probs / penalty
        self.scores[row, slot] = scores
        self.log_probs[row, slot] = log_probs
        self.count[sentences] = count + finished.sum(1)
        candidates = torch.where(finished, scores, -math.inf)
        merged = torch.cat([self.best[sentences], candidates], dim=1)
        self.best[sentences] = merged.topk(self.nbest, dim=1).values

    def results(self, nbest: int) -> list[list[Hypothesis]]:
        """Each sentence's ``nbest`` best hypotheses, best first (ties: the one that finished
        first), read from the device once the batch is done."""
        slots = slice(0, self.slots)
        count, lengths, scores, log_probs = (
            t.tolist()
            for t in (
                self.count,
                self.lengths[:, slots],
                self.scores[:, slots],
                self.log_probs[:, slots],
            )
        )
        tokens = self.tokens[:, slots].tolist()
        out = []
        for s, n in enumerate(count):
            order = sorted(range(n), key=lambda j: -scores[s][j])  # stable
            out.append(
                [
                    Hypothesis(tokens[s][j][: lengths[s][j]], scores[s][j], log_probs[s][j])
                    for j in order[:nbest]
                ]
            )
        return out


def row_topk(values: Tensor, k: int, block: int = 128) -> tuple[Tensor, Tensor]:
    """``values.topk(k, dim=1)`` of a (rows, width) tensor, exact, found through block maxima.

    Cut each row into blocks of ``block`` entries: its k largest entries lie in the k
    blocks with the largest maxima (any other block has k blocks above it whose maxima
    are k larger entries), so only those blocks, and the short tail, are searched. On a
    CPU this takes a third to a quarter of the time of one topk over a whole vocabulary;
    which of several equal entries is returned may differ, as topk leaves it open too.
    """
    rows, width = values.shape
    blocks = width // block
    if values.device.type != "cpu" or blocks <= k:
        return values.topk(min(k, width), dim=1)
    split = values[:, : blocks * block].view(rows, blocks, block)
    best = split.amax(dim=2).topk(k, dim=1).indices  # (rows, k) blocks
    offsets = torch.arange(block, device=values.device)
    candidates = split.gather(1, best[:, :, None].expand(rows, k, block)).view(rows, k * block)
    where = (best[:, :, None] * block + offsets).view(rows, k * block)
    if width > blocks * block:  # the tail is always searched
        candidates = torch.cat([candidates, values[:, blocks * block :]], dim=1)
        tail = torch.arange(blocks * block, width, device=values.device).expand(rows, -1)
        where = torch.cat([where, tail], dim=1)
    top, index = candidates.topk(k, dim=1)
    return top, where.gather(1, index)


@torch.inference_mode()
def beam_search_nbest(
    model: nn.Module,
    src_tokens: Tensor,
    options: DecodeSettings | None = None,
    *,
    nbest: int = 1,
    constraint: TreeConstraint | None = None,
    **settings: Any,
) -> list[list[Hypothesis]]:
    """The ``nbest`` best hypotheses of each sentence of ``src_tokens`` (B, S), best first.

    ``src_tokens`` is right-padded with ``model.cfg.pad_id`` and holds the source
    pieces followed by EOS. ``options`` and keyword ``settings`` (``DecodeSettings``
    fields, e.g. ``beam=2``) say how to search. A ``constraint``
    (``parsing.constraint.TreeConstraint``) masks the pieces that would make a
    hypothesis an ill-formed tree.
    """
    options = _options(options, settings)
    k, alpha, min_len = options.beam, options.alpha, options.min_len
    if not 1 <= nbest <= k:
        raise ValueError(f"nbest must be in [1, beam={k}], got {nbest}")
    cfg = model.cfg
    batch = src_tokens.size(0)
    device = src_tokens.device
    if batch == 0:
        return []

    max_lens = max_output_lengths(
        src_tokens, cfg.pad_id, options.max_len_a, options.max_len_b, _position_cap(model)
    )  # (N,) on the device
    longest = int(max_lens.max())  # one read per batch: the length the buffers need
    memory, src_mask = model.encode(src_tokens)
    # One decoder row per sentence at the first step: its k hypotheses are all the empty one.
    # The first reorder spreads each sentence over k rows.
    state = model.init_state(memory, src_mask, capacity=longest)
    finished = FinishedHypotheses(batch, k, nbest, longest, device)
    blocked = blocked_tokens(cfg, device)
    tree = constraint.start(src_tokens, 1, max_lens) if constraint is not None else None

    active = list(range(batch))  # original index of each active sentence (host)
    active_index = torch.arange(batch, device=device)  # the same, on the device
    active_max_lens = max_lens  # (A,)
    max_len_penalty = length_penalty(max_lens.to(torch.float32), alpha)  # (A,) lp(max_len)
    # Only beam 0 is real at the start; the others duplicate it (same row) and are never chosen
    # before it, as in a search that ran k identical rows.
    scores = torch.full((batch, k), -math.inf, device=device)  # (A, k) log-probs of live hypotheses
    scores[:, 0] = 0.0
    tokens = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=device)  # last inputs
    history = PositionBuffer(batch * k, (), 1, longest, tokens)  # (A*k, t) generated so far
    sentence_rows = torch.arange(batch, device=device)[:, None]  # (A, 1) each sentence's first row
    order_rank = torch.arange(2 * k, device=device)
    beam_rows = 1  # decoder rows per sentence: 1 at the first step, k after

    step = 0
    while True:  # until every sentence is done
        step += 1
        n_active = len(active)
        # 2 x beam size in case half are EOS. A sentence's 2k best extensions are among
        # the 2k best of each of its rows, so the per-row top 2k are the only candidates.
        log_probs = _next_log_probs(model, tokens, state, step, min_len, blocked)  # (A*k, V)
        if tree is not None:
            tree.mask_(log_probs, step)
        row_log_probs, row_tokens = row_topk(log_probs, 2 * k)
        per_row = row_log_probs.size(1)  # 2k, or V if smaller
        # (A, k, per_row): hypothesis j's extensions (at the first step all k share one row's).
        row_log_probs = row_log_probs.view(n_active, beam_rows, per_row)
        row_tokens = row_tokens.view(n_active, beam_rows, per_row).expand(n_active, k, per_row)
        candidates = (scores[:, :, None] + row_log_probs).view(n_active, k * per_row)
        width = min(2 * k, k * per_row)
        cand_scores, cand_index = candidates.topk(width, dim=1)  # (A, 2k) best first
        cand_parent = torch.div(cand_index, per_row, rounding_mode="floor")
        cand_token = row_tokens.reshape(n_active, k * per_row).gather(1, cand_index)
        at_max = (active_max_lens <= step)[:, None]  # (A, 1)
        ends = (cand_token == cfg.eos_id) | at_max  # (A, 2k)
        # (A, 2k) decoder rows of the parents (at the first step, every parent is the one row).
        cand_rows = sentence_rows[:n_active] * beam_rows + cand_parent.clamp(max=beam_rows - 1)

        # Finished: ending candidates among the k best with a finite score.
        fin = ends[:, :k] & torch.isfinite(cand_scores[:, :k])
        parents = history.values.index_select(0, cand_rows[:, :k].reshape(-1))
        finished.add(
            active_index,
            fin,
            parents.view(n_active, k, step - 1),
            cand_token[:, :k],
            cand_scores[:, :k],
            length_penalty(float(step), alpha),
            cfg.eos_id,
        )

        # Live: the k best candidates that do not end (ending ones ranked after all others).
        rank = order_rank[:width] + ends * width
        order = rank.topk(k, dim=1, largest=False).indices  # (A, k), best first
        live_scores = cand_scores.gather(1, order)  # (A, k)
        live_rows = cand_rows.gather(1, order)
        live_token = cand_token.gather(1, order)

        # Which sentences are done: the step's one read of the device.
        lp_bound = max_len_penalty.clamp(min=length_penalty(float(step + 1), alpha))
        bound = live_scores[:, 0] / lp_bound
        n_finished = finished.count[active_index]
        done = (
            at_max[:, 0]
            | (n_finished >= k)
            | ~torch.isfinite(bound)
            | ((n_finished >= nbest) & (bound <= finished.best[active_index, nbest - 1]))
        ).tolist()
        if all(done):
            break
        kept = None  # the sentences that stay, when some are done
        if any(done):
            keep = [a for a, d in enumerate(done) if not d]
            active = [active[a] for a in keep]
            kept = torch.tensor(keep, device=device)
            active_index = active_index[kept]
            active_max_lens = active_max_lens[kept]
            max_len_penalty = max_len_penalty[kept]
            live_scores, live_rows, live_token = (
                live_scores[kept],
                live_rows[kept],
                live_token[kept],
            )
        rows = live_rows.reshape(-1)
        state.reorder(rows, kept, beam=k)
        beam_rows = k
        tokens = live_token.reshape(-1)
        if tree is not None:
            tree.advance(rows, tokens)
        history.append(tokens[:, None], rows)
        scores = live_scores

    # Only a model that gives every allowed token probability 0 leaves a sentence empty-handed.
    return [hyps or [Hypothesis([], -math.inf, -math.inf)] for hyps in finished.results(nbest)]


def beam_search(
    model: nn.Module,
    src_tokens: Tensor,
    options: DecodeSettings | None = None,
    *,
    constraint: TreeConstraint | None = None,
    **settings: Any,
) -> list[list[int]]:
    """The best hypothesis of each sentence, as token ids without BOS and EOS.

    Arguments as ``beam_search_nbest``.
    """
    best = beam_search_nbest(model, src_tokens, _options(options, settings), constraint=constraint)
    return [hyps[0].tokens for hyps in best]


@torch.inference_mode()
def greedy_search(
    model: nn.Module, src_tokens: Tensor, options: DecodeSettings | None = None, **settings: Any
) -> list[list[int]]:
    """Reference: take the most probable token each step, until EOS or the maximum length.

    Deliberately plain (no batch shrinking): the tests check beam size 1 against it.
    Arguments as ``beam_search_nbest``; ``beam`` and ``alpha`` play no part.
    """
    options = _options(options, settings)
    cfg, min_len = model.cfg, options.min_len
    batch = src_tokens.size(0)
    max_lens = max_output_lengths(
        src_tokens, cfg.pad_id, options.max_len_a, options.max_len_b, _position_cap(model)
    ).tolist()
    state = model.init_state(*model.encode(src_tokens), capacity=max(max_lens))
    blocked = blocked_tokens(cfg, src_tokens.device)
    tokens = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=src_tokens.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    for step in range(1, max(max_lens) + 1):
        tokens = _next_log_probs(model, tokens, state, step, min_len, blocked).argmax(dim=-1)
        for i, token in enumerate(tokens.tolist()):
            if done[i]:
                continue
            if token == cfg.eos_id:
                done[i] = True
                continue
            outputs[i].append(token)
            done[i] = len(outputs[i]) >= max_lens[i]
        if all(done):
            break
    return outputs
