"""Batched beam search (and greedy search) on the Transformer's incremental decoder.

The decoding recipe of the paper (section 6.1, via tensor2tensor; ``DecodeOptions``): beam size 4,
the GNMT length penalty ``lp(|Y|) = ((5 + |Y|) / 6) ** alpha`` with alpha 0.6,
maximum output length ``max_len_a * source_length + max_len_b`` (1 and 50 for
translation, 1 and 300 for parsing) and early termination. A hypothesis is
scored by ``log P(Y | X) / lp(|Y|)``, where ``|Y|`` counts the generated tokens
including EOS (tensor2tensor's convention). This is not fairseq's ``lenpen``,
which divides by ``|Y| ** lenpen``.

One step for every unfinished sentence at once (shapes with A active sentences,
beam k, vocabulary V):

1. ``decode_step`` gives log-probs (A*k, V); pad and BOS are never generated,
   EOS is blocked until ``min_len`` real tokens exist.
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
from typing import Any

import torch
from torch import Tensor, nn

from transformer_core.config import DecodeOptions


def _options(options: DecodeOptions | None, settings: dict[str, Any]) -> DecodeOptions:
    """``options`` (default: the paper's) with ``settings``, keyword values of its fields, applied.

    So that ``beam_search(model, src, DecodeOptions(beam_size=2))`` and
    ``beam_search(model, src, beam_size=2)`` are the same call.
    """
    return dataclasses.replace(options if options is not None else DecodeOptions(), **settings)


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


def _next_log_probs(model: nn.Module, tokens: Tensor, state, step: int, min_len: int) -> Tensor:
    """Log-probs (rows, V) of the next token, in fp32, with the never-generated tokens masked.

    ``step`` is the number of tokens generated once this one is chosen (1-based).
    """
    cfg = model.cfg
    log_probs = model.decode_step(tokens, state).float()
    torch.log_softmax(log_probs, dim=-1, out=log_probs)  # in place: no second (rows, V) tensor
    log_probs[:, cfg.pad_id] = -math.inf
    log_probs[:, cfg.bos_id] = -math.inf
    if step - 1 < min_len:  # EOS now would leave fewer than min_len real tokens
        log_probs[:, cfg.eos_id] = -math.inf
    return log_probs


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
    options: DecodeOptions | None = None,
    *,
    nbest: int = 1,
    **settings: Any,
) -> list[list[Hypothesis]]:
    """The ``nbest`` best hypotheses of each sentence of ``src_tokens`` (B, S), best first.

    ``src_tokens`` is right-padded with ``model.cfg.pad_id`` and holds the source
    pieces followed by EOS. ``options`` and keyword ``settings`` (``DecodeOptions``
    fields, e.g. ``beam_size=2``) say how to search.
    """
    options = _options(options, settings)
    k, alpha, min_len = options.beam_size, options.alpha, options.min_len
    if not 1 <= nbest <= k:
        raise ValueError(f"nbest must be in [1, beam_size={k}], got {nbest}")
    cfg = model.cfg
    batch = src_tokens.size(0)
    device = src_tokens.device
    if batch == 0:
        return []
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]  # best first, fewer than 2k

    max_lens = max_output_lengths(
        src_tokens, cfg.pad_id, options.max_len_a, options.max_len_b, _position_cap(model)
    )
    memory, src_mask = model.encode(src_tokens)
    state = model.init_state(memory, src_mask, beam=k)  # k decoder rows per sentence

    active = torch.arange(batch)  # original index of each active sentence (CPU)
    active_max_lens = max_lens.to(device)  # (A,)
    # Only beam 0 is real at the start; the others would duplicate it.
    scores = torch.full((batch, k), -math.inf, device=device)  # (A, k) log-probs of live hypotheses
    scores[:, 0] = 0.0
    tokens = torch.full((batch * k,), cfg.bos_id, dtype=torch.long, device=device)  # last inputs
    history = torch.empty(
        batch * k, 0, dtype=torch.long, device=device
    )  # (A*k, t) generated so far
    kth_finished = torch.full((batch,), -math.inf)  # nbest-th best finished score (CPU)
    n_finished = torch.zeros(batch, dtype=torch.long)  # (CPU)
    offsets = torch.arange(batch, device=device)[:, None] * k

    step = 0
    while True:  # until every sentence is done
        step += 1
        n_active = active.numel()
        # 2 x beam size in case half are EOS. A sentence's 2k best extensions are among
        # the 2k best of each of its rows, so the per-row top 2k are the only candidates.
        log_probs = _next_log_probs(model, tokens, state, step, min_len)  # (A*k, V)
        row_log_probs, row_tokens = row_topk(log_probs, 2 * k)
        per_row = row_log_probs.size(1)  # 2k, or V if smaller
        candidates = (scores.view(-1, 1) + row_log_probs).view(n_active, k * per_row)
        cand_scores, cand_index = candidates.topk(
            min(2 * k, k * per_row), dim=1
        )  # (A, 2k) best first
        cand_parent = torch.div(cand_index, per_row, rounding_mode="floor")
        cand_token = row_tokens.view(n_active, k * per_row).gather(1, cand_index)
        at_max = (active_max_lens <= step)[:, None]  # (A, 1)
        ends = (cand_token == cfg.eos_id) | at_max  # (A, 2k)
        cand_rows = offsets[:n_active] + cand_parent  # (A, 2k) rows of the parents

        # Finished: ending candidates among the k best with a finite score.
        fin = ends[:, :k] & torch.isfinite(cand_scores[:, :k])
        fin_where = fin.nonzero().tolist()
        if fin_where:
            fin_rows = cand_rows[:, :k][fin]
            fin_tok = cand_token[:, :k][fin]
            fin_log_prob = cand_scores[:, :k][fin]
            fin_score = (fin_log_prob / length_penalty(float(step), alpha)).tolist()
            fin_hist = history.index_select(0, fin_rows).tolist()
            fin_tok = fin_tok.tolist()
            fin_log_prob = fin_log_prob.tolist()
            touched = set()
            for j, (a, _) in enumerate(fin_where):
                seq = fin_hist[j] if fin_tok[j] == cfg.eos_id else fin_hist[j] + [fin_tok[j]]
                sentence = int(active[a])
                finished[sentence].append(Hypothesis(seq, fin_score[j], fin_log_prob[j]))
                touched.add(sentence)
            for sentence in touched:
                hyps = finished[sentence]
                hyps.sort(key=lambda h: -h.score)  # stable: ties keep the earlier (shorter) one
                n_finished[sentence] = len(hyps)
                if len(hyps) >= nbest:
                    kth_finished[sentence] = hyps[nbest - 1].score

        # Live: the k best candidates that do not end (ending ones ranked after all others).
        rank = torch.arange(ends.size(1), device=device) + ends * ends.size(1)
        order = rank.topk(k, dim=1, largest=False).indices  # (A, k), best first
        live_scores = cand_scores.gather(1, order)  # (A, k)
        live_rows = cand_rows.gather(1, order)
        live_token = cand_token.gather(1, order)

        # Which sentences are done (on the CPU: one small transfer per step).
        lp_bound = length_penalty(active_max_lens.to(live_scores.dtype), alpha).clamp(
            min=length_penalty(float(step + 1), alpha)
        )  # max(lp(t + 1), lp(max_len))
        bound = (live_scores[:, 0] / lp_bound).cpu()
        nf = n_finished[active]
        done = (
            at_max[:, 0].cpu()
            | (nf >= k)
            | ~torch.isfinite(bound)
            | ((nf >= nbest) & (bound <= kth_finished[active]))
        )
        keep = (~done).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        kept = None  # the sentences that stay, when some are done
        if keep.numel() < n_active:
            kept = keep.to(device)
            active = active[keep]
            active_max_lens = active_max_lens[kept]
            live_scores, live_rows, live_token = (
                live_scores[kept],
                live_rows[kept],
                live_token[kept],
            )
        rows = live_rows.reshape(-1)
        state.reorder(rows, kept)
        history = torch.cat([history.index_select(0, rows), live_token.reshape(-1, 1)], dim=1)
        tokens = live_token.reshape(-1)
        scores = live_scores

    # Only a model that gives every allowed token probability 0 leaves a sentence empty-handed.
    return [hyps[:nbest] or [Hypothesis([], -math.inf, -math.inf)] for hyps in finished]


def beam_search(
    model: nn.Module, src_tokens: Tensor, options: DecodeOptions | None = None, **settings: Any
) -> list[list[int]]:
    """The best hypothesis of each sentence, as token ids without BOS and EOS.

    Arguments as ``beam_search_nbest``.
    """
    best = beam_search_nbest(model, src_tokens, _options(options, settings))
    return [hyps[0].tokens for hyps in best]


@torch.inference_mode()
def greedy_search(
    model: nn.Module, src_tokens: Tensor, options: DecodeOptions | None = None, **settings: Any
) -> list[list[int]]:
    """Reference: take the most probable token each step, until EOS or the maximum length.

    Deliberately plain (no batch shrinking): the tests check beam size 1 against it.
    Arguments as ``beam_search_nbest``; ``beam_size`` and ``alpha`` play no part.
    """
    options = _options(options, settings)
    cfg, min_len = model.cfg, options.min_len
    batch = src_tokens.size(0)
    max_lens = max_output_lengths(
        src_tokens, cfg.pad_id, options.max_len_a, options.max_len_b, _position_cap(model)
    ).tolist()
    state = model.init_state(*model.encode(src_tokens))
    tokens = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=src_tokens.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    for step in range(1, max(max_lens) + 1):
        tokens = _next_log_probs(model, tokens, state, step, min_len).argmax(dim=-1)
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
