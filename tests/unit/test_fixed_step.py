"""decoding.fixed_step: the decoder of few shapes computes the eager decoder's hypotheses, and a
decode meets a bounded number of shapes. Eager here (the compiled step: test_compiled_paths)."""

import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.decoding.fixed_step import (
    CACHE_BLOCK,
    FixedShapeDecoder,
    sentence_slots,
    source_slots,
)
from transformer_core.decoding.search import beam_search_nbest, greedy_search

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels


def ragged_sources(sentences: int, width: int, seed: int) -> torch.Tensor:
    """``sentences`` right-padded sources of 2 to ``width`` - 1 pieces and EOS."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.zeros(sentences, width, dtype=torch.long)
    for row in range(sentences):
        length = int(torch.randint(2, width, (1,), generator=gen))
        src[row, :length] = torch.randint(4, 50, (length,), generator=gen)
        src[row, length] = 3
    return src


def test_slots_come_from_a_short_ladder_with_no_size_of_one():
    assert [sentence_slots(n) for n in (1, 2, 3, 5, 8, 9, 16, 17, 65)] == [
        2, 2, 4, 8, 8, 16, 16, 24, 72,
    ]  # fmt: skip
    assert [source_slots(n) for n in (1, 9, 16, 17, 70)] == [16, 16, 16, 24, 72]


@pytest.mark.parametrize(
    "settings",
    [
        dict(beam=4, alpha=0.6, max_len_a=1.0, max_len_b=25, nbest=2),
        dict(beam=3, alpha=1.0, max_len_a=2.0, max_len_b=3, nbest=1, min_len=2),
    ],
)
def test_fixed_shapes_give_the_eager_hypotheses(settings):
    """Sentences leave the batch at different steps (the slots shrink), the caches grow past a
    block, sources are padded: the same tokens, the scores to fp32 rounding."""
    model = tiny_model(tiny_config(), seed=5, sharp=True)
    src = ragged_sources(11, 10, seed=6)
    eager = beam_search_nbest(model, src, **settings)
    fixed = beam_search_nbest(FixedShapeDecoder(model), src, **settings)
    assert [[h.tokens for h in hs] for hs in fixed] == [[h.tokens for h in hs] for hs in eager]
    assert max(len(hs[0].tokens) for hs in eager) > CACHE_BLOCK
    for f_hyps, e_hyps in zip(fixed, eager, strict=True):
        for f, e in zip(f_hyps, e_hyps, strict=True):
            assert f.score == pytest.approx(e.score, abs=1e-5)


def test_greedy_search_on_fixed_shapes():
    model = tiny_model(tiny_config(), seed=2, sharp=True)
    src = ragged_sources(5, 8, seed=3)
    assert greedy_search(FixedShapeDecoder(model), src, max_len_b=30) == greedy_search(
        model, src, max_len_b=30
    )


def test_a_decode_meets_few_shapes():
    """Every step's (rows, positions, source positions) over a decode whose sentences end one by
    one: the rows shrink only to the ladder's sizes, the positions grow by blocks."""
    model = tiny_model(tiny_config(), seed=5, sharp=True)
    decoder = FixedShapeDecoder(model)
    shapes = []
    step = decoder.step

    def recorded(tokens, rows, position, encodings, caches, src_mask, beam):
        shapes.append((tokens.size(0), caches.self_k[0].size(2), src_mask.size(-1)))
        return step(tokens, rows, position, encodings, caches, src_mask, beam)

    decoder.step = recorded
    src = ragged_sources(11, 10, seed=6)
    beam_search_nbest(decoder, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=25)
    rows = {r for r, _, _ in shapes}
    assert rows <= {4 * sentence_slots(n) for n in range(1, 12)}
    assert {c for _, c, _ in shapes} <= {CACHE_BLOCK, 2 * CACHE_BLOCK, 3 * CACHE_BLOCK}
    assert {s for _, _, s in shapes} == {16}
    assert len(set(shapes)) < len(shapes) / 4


def test_learned_positions_up_to_the_end_of_their_table():
    """A learned table of 20 positions: outputs stop there, inside a cache of 32."""
    model = tiny_model(tiny_config(positional="learned", max_positions=20), seed=5, sharp=True)
    src = ragged_sources(6, 10, seed=7)
    settings = dict(beam=2, alpha=0.6, max_len_a=1.0, max_len_b=30, nbest=1)
    eager = beam_search_nbest(model, src, **settings)
    fixed = beam_search_nbest(FixedShapeDecoder(model), src, **settings)
    assert [h[0].tokens for h in fixed] == [h[0].tokens for h in eager]
    assert max(len(h[0].tokens) for h in eager) == 20
