"""Beam search: hand-written probability tables, exhaustive search, greedy, batching, the penalty."""

import itertools
import math
from types import SimpleNamespace

import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.decoding.search import (
    DecodeSettings,
    beam_search,
    beam_search_nbest,
    greedy_search,
    length_penalty,
    max_output_lengths,
    row_topk,
)
from transformer_core.errors import UserError

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

PAD, UNK, BOS, EOS, A, B = 0, 1, 2, 3, 4, 5


class TableState:
    """Per row: which table (source) it decodes, and its generated prefix."""

    def __init__(self, table_ids):
        self.table_ids = table_ids
        self.prefix = torch.empty(len(table_ids), 0, dtype=torch.long)

    def reorder(self, rows, sentences=None, beam=None):
        self.table_ids = self.table_ids.index_select(0, rows)
        self.prefix = self.prefix.index_select(0, rows)


class TableModel:
    """Next-token probabilities written by hand: ``tables[source][prefix] = {token: p}``.

    The first source token, minus 10, picks the table; an unlisted prefix ends with EOS for sure.
    Records the number of rows of every ``decode_step`` call.
    """

    def __init__(self, tables, vocab_size=6):
        self.tables = tables
        self.vocab_size = vocab_size
        self.cfg = SimpleNamespace(
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
            vocab_size=vocab_size,
            positional="sinusoidal",
            max_positions=1024,
        )
        self.step_rows = []

    def encode(self, src_tokens):
        return src_tokens[:, :1].float() - 10, (src_tokens != PAD)[:, None, None, :]

    def init_state(self, memory, src_mask, beam=1, capacity=64):
        return TableState(memory[:, 0].long().repeat_interleave(beam))

    def decode_step(self, tokens, state):
        if state.prefix.size(1) > 0 or (tokens != BOS).any():
            state.prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)
        self.step_rows.append(len(tokens))
        logits = torch.full((len(tokens), self.vocab_size), -math.inf)
        for row, (table, prefix) in enumerate(
            zip(state.table_ids.tolist(), state.prefix.tolist(), strict=True)
        ):
            dist = self.tables[table].get(tuple(prefix), {EOS: 1.0})
            for token, p in dist.items():
                logits[row, token] = math.log(p)
        return logits


# Greedy takes A (0.5) then A and ends with A A; the beam finds B B (0.4 * 0.9 * 0.9).
GARDEN_PATH = {
    (): {EOS: 0.1, A: 0.5, B: 0.4},
    (A,): {EOS: 0.2, A: 0.5, B: 0.3},
    (B,): {EOS: 0.05, A: 0.05, B: 0.9},
    (B, B): {EOS: 0.9, A: 0.06, B: 0.04},
}


def src(*tables, length=3):
    """One source per table id: the id (plus 10), filler, EOS."""
    return torch.tensor([[10 + t] + [7] * (length - 2) + [EOS] for t in tables])


def test_hand_table_exact_hypotheses_and_scores():
    model = TableModel({0: GARDEN_PATH})
    [hyps] = beam_search_nbest(model, src(0), beam=2, alpha=0.6, nbest=2)
    assert [h.tokens for h in hyps] == [[B, B], [A, A]]
    assert hyps[0].log_prob == pytest.approx(math.log(0.4 * 0.9 * 0.9))
    assert hyps[1].log_prob == pytest.approx(math.log(0.5 * 0.5 * 1.0))
    lp3 = ((5 + 3) / 6) ** 0.6  # |Y| = 2 tokens + EOS
    assert hyps[0].score == pytest.approx(math.log(0.324) / lp3)
    assert hyps[1].score == pytest.approx(math.log(0.25) / lp3)
    # Both finished at step 3 and the beam (2) was spent: three decoder steps in all, the
    # first on one row (both hypotheses are still the empty one).
    assert model.step_rows == [1, 2, 2]
    assert greedy_search(TableModel({0: GARDEN_PATH}), src(0)) == [[A, A]]
    assert beam_search(TableModel({0: GARDEN_PATH}), src(0), beam=1) == [[A, A]]


# Hypotheses [] (0.45), [A] (0.55 * 0.8), [A, A] (0.55 * 0.2): longer ones have less probability.
SHORT_VS_LONG = {(): {EOS: 0.45, A: 0.55}, (A,): {EOS: 0.8, A: 0.2}}


@pytest.mark.parametrize("alpha", [0.0, 0.6, 4.0, 10.0])
def test_length_penalty_orders_hypotheses_by_the_formula(alpha):
    [hyps] = beam_search_nbest(TableModel({0: SHORT_VS_LONG}), src(0), beam=3, alpha=alpha, nbest=3)
    raw = {(): 0.45, (A,): 0.55 * 0.8, (A, A): 0.55 * 0.2}
    expected = sorted(raw, key=lambda y: -math.log(raw[y]) / ((5 + len(y) + 1) / 6) ** alpha)
    assert [tuple(h.tokens) for h in hyps] == expected
    for h in hyps:
        assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, alpha))
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_alpha_decides_between_short_and_long():
    model = TableModel({0: SHORT_VS_LONG})
    # log 0.45 / lp(1) against log 0.44 / lp(2): [A] wins from alpha ~0.18;
    # log 0.11 / lp(3) beats [A] only from alpha ~7.4.
    assert beam_search(model, src(0), beam=3, alpha=0.0) == [[]]
    assert beam_search(model, src(0), beam=3, alpha=0.6) == [[A]]
    assert beam_search(model, src(0), beam=3, alpha=10.0) == [[A, A]]


def test_early_stop_when_no_live_hypothesis_can_win():
    # EOS first with 0.6; the live A has log 0.4 at best, below log 0.6 once alpha = 0.
    table = {(): {EOS: 0.6, A: 0.4}, **{(A,) * n: {A: 1.0} for n in range(1, 10)}}
    model = TableModel({0: table})
    assert beam_search(model, src(0), beam=4, alpha=0.0, max_len_a=0, max_len_b=10) == [[]]
    assert model.step_rows == [1]
    # With a strong penalty the live A could still win at the maximum length: search goes on,
    # and the length-10 hypothesis A^10 (log 0.4, no EOS) does win.
    model = TableModel({0: table})
    assert beam_search(model, src(0), beam=4, alpha=2.0, max_len_a=0, max_len_b=10) == [[A] * 10]
    assert len(model.step_rows) == 10


def test_finished_sentences_leave_the_batch():
    ends_now = {(): {EOS: 1.0}}
    model = TableModel({0: ends_now, 1: GARDEN_PATH})
    out = beam_search(model, src(0, 1), beam=2, alpha=0.6)
    assert out == [[], [B, B]]
    assert model.step_rows == [2, 2, 2]  # one row per sentence, then the one left's beam of 2


def test_max_length_finishes_hypotheses_as_they_are():
    forever = {(A,) * n: {A: 1.0} for n in range(10)}
    # Source of 3 non-pad tokens, padded to 5: max length 1 * 3 + 1 = 4 generated tokens.
    padded = torch.tensor([[10, 7, EOS, PAD, PAD]])
    assert max_output_lengths(padded, PAD, 1.0, 1).tolist() == [4]
    [hyps] = beam_search_nbest(TableModel({0: forever}), padded, beam=2, max_len_a=1.0, max_len_b=1)
    assert hyps[0].tokens == [A] * 4
    assert hyps[0].log_prob == pytest.approx(0.0)


def test_min_len_blocks_eos():
    # Without min_len the best output is [] (EOS first, 0.6).
    table = {(): {EOS: 0.6, A: 0.4}, **{(A,) * n: {EOS: 0.5, A: 0.5} for n in range(1, 10)}}
    assert beam_search(TableModel({0: table}), src(0), beam=2, alpha=0.0) == [[]]
    for min_len in (1, 3):
        [hyps] = beam_search_nbest(
            TableModel({0: table}), src(0), beam=2, alpha=0.0, min_len=min_len
        )
        assert hyps[0].tokens == [A] * min_len
        assert hyps[0].log_prob == pytest.approx(math.log(0.4 * 0.5**min_len))


def test_a_sentence_without_any_possible_output_gets_an_empty_one():
    # EOS is blocked by min_len and nothing else has probability.
    assert beam_search(TableModel({0: {}}), src(0), beam=2, min_len=1) == [[]]


def test_nbest_must_fit_the_beam():
    with pytest.raises(ValueError, match="nbest"):
        beam_search_nbest(TableModel({0: GARDEN_PATH}), src(0), beam=2, nbest=3)


def test_options_object_keywords_and_the_beam_check():
    """An options object, keywords, or both (keywords win) are the same search; beam < 1 is a
    UserError wherever it comes from."""
    options = DecodeSettings(beam=3, alpha=10.0)
    model = TableModel({0: SHORT_VS_LONG})
    assert beam_search(model, src(0), options) == beam_search(model, src(0), beam=3, alpha=10.0)
    assert beam_search(model, src(0), options, alpha=0.0) == [[]]
    assert DecodeSettings() == DecodeSettings(beam=4, alpha=0.6, max_len_a=1.0, max_len_b=50)
    for call in (
        lambda: DecodeSettings(beam=0),
        lambda: beam_search(model, src(0), beam=0),
        lambda: greedy_search(model, src(0), options, beam=0),
    ):
        with pytest.raises(UserError, match="--beam must be at least 1, got 0"):
            call()


# -- a tiny random Transformer ------------------------------------------------------------


def sequence_log_probs(model, src_tokens, outputs):
    """log P(output | src) of each output, by one full (non-incremental) forward pass."""
    width = max(len(out) for out in outputs)
    tgt_in = torch.full((len(outputs), width), PAD)
    for row, out in enumerate(outputs):
        tgt_in[row, : len(out)] = torch.tensor([BOS] + out[:-1])  # causal: padding after is unseen
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src_tokens.expand(len(outputs), -1), tgt_in), dim=-1)
    return [
        sum(log_probs[row, i, token].item() for i, token in enumerate(out))
        for row, out in enumerate(outputs)
    ]


@pytest.mark.parametrize("seed", [0, 4, 9, 11])  # with 4, 9 and 11 greedy search misses the best
def test_large_beam_finds_the_exhaustive_best(seed):
    model = tiny_model(tiny_config(vocab_size=6), seed=seed, sharp=True)
    source = torch.tensor([[4, 5, 5, 4, EOS]])
    max_len, alpha = 4, 0.6
    words = [UNK, A, B]  # every token but pad, BOS and EOS
    # Every output: n < max_len words then EOS, or max_len words (finished at the maximum length).
    scored = [list(p) + [EOS] for n in range(max_len) for p in itertools.product(words, repeat=n)]
    scored += [list(p) for p in itertools.product(words, repeat=max_len)]
    results = []
    for out, log_prob in zip(scored, sequence_log_probs(model, source, scored), strict=True):
        tokens = out[:-1] if out[-1] == EOS else out
        results.append((log_prob / length_penalty(len(out), alpha), tokens, log_prob))
    results.sort(key=lambda r: -r[0])
    beam = 4 * 3 ** (max_len - 1)  # every candidate of the last step fits in the beam
    [hyps] = beam_search_nbest(
        model, source, beam=beam, alpha=alpha, max_len_a=0, max_len_b=max_len, nbest=10
    )
    assert [h.tokens for h in hyps] == [r[1] for r in results[:10]]
    for h, (score, _, log_prob) in zip(hyps, results, strict=False):
        assert h.score == pytest.approx(score, abs=1e-4)
        assert h.log_prob == pytest.approx(log_prob, abs=1e-4)


def random_sources(vocab_size, lengths, seed=0):
    gen = torch.Generator().manual_seed(seed)
    batch = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        batch[i, : n - 1] = torch.randint(4, vocab_size, (n - 1,), generator=gen)
        batch[i, n - 1] = EOS
    return batch


def test_beam_one_equals_greedy():
    model = tiny_model(tiny_config(vocab_size=20), seed=3, sharp=True)
    sources = random_sources(20, [5, 9, 2, 7, 4, 6], seed=1)
    for min_len in (0, 3):
        greedy = greedy_search(model, sources, max_len_a=1.0, max_len_b=5, min_len=min_len)
        beam = beam_search(model, sources, beam=1, max_len_a=1.0, max_len_b=5, min_len=min_len)
        assert beam == greedy
    assert any(len(g) > 0 for g in greedy)


@pytest.mark.parametrize("beam", [2, 4])
def test_batch_equals_sentence_by_sentence(beam):
    model = tiny_model(tiny_config(vocab_size=20), seed=4, sharp=True)
    sources = random_sources(20, [5, 9, 2, 7, 4, 6, 3], seed=2)
    batched = beam_search_nbest(model, sources, beam=beam, max_len_a=1.0, max_len_b=4, nbest=2)
    lengths = (sources != PAD).sum(dim=1).tolist()
    for i, n in enumerate(lengths):
        [alone] = beam_search_nbest(
            model, sources[i : i + 1, :n], beam=beam, max_len_a=1.0, max_len_b=4, nbest=2
        )
        assert [h.tokens for h in batched[i]] == [h.tokens for h in alone]
        for b, a in zip(batched[i], alone, strict=True):
            assert b.score == pytest.approx(a.score, abs=1e-4)


def test_learned_positions_cap_the_output_length():
    model = tiny_model(
        tiny_config(vocab_size=20, positional="learned", max_positions=6), seed=5, sharp=True
    )
    out = beam_search(
        model,
        random_sources(20, [5], seed=3),
        beam=2,
        max_len_a=1.0,
        max_len_b=50,
        min_len=100,
    )
    assert len(out[0]) == 6


def test_empty_batch():
    assert beam_search(TableModel({}), torch.empty(0, 3, dtype=torch.long)) == []


@pytest.mark.parametrize("width", [5, 1000, 1024, 8000, 8001])
def test_row_topk_equals_topk(width):
    gen = torch.Generator().manual_seed(width)
    values = torch.randn(6, width, generator=gen).log_softmax(dim=1)
    values[0, : width // 2] = -math.inf  # masked tokens, as pad and BOS are
    values[1, -1] = 10.0  # the best entry in the tail
    top, index = row_topk(values, 8)
    expected = values.topk(min(8, width), dim=1)
    assert torch.equal(top, expected.values)
    assert torch.equal(values.gather(1, index), top)  # the indices point at those values
