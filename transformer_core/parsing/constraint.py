"""Well-formed trees by construction: a beam-search constraint for linearized parse trees.

A parser trained on few trees counts badly: its outputs open brackets they never close and
hold more or fewer leaves than the sentence has words, and every repair ``delinearize`` makes
costs EVALB brackets. With ``--tree-constraint LINEARIZATION`` the search
(``search.beam_search_nbest``) only extends a hypothesis by pieces that keep it a prefix of a
tree ``delinearize`` reads without a repair:

- one root: ``(X`` opens the tree as its first token, and the tree ends when it closes;
- a leaf (``XX``, or under ``tags`` any other token) only inside a bracket, and at most one
  leaf per source word;
- ``)X`` only when its bracket holds something, and the root's only after the last leaf;
- EOS only after the root has closed over exactly one leaf per source word;
- no piece after which the tree could not be finished within the maximum output length.

Labels are not matched (``delinearize`` takes the opening label). This is a departure from
the paper, which decodes without constraints (docs/departures.md); it is off by default.

The rules see sentencepiece pieces, not tokens. A piece that begins with ``▁`` starts a
token; other pieces continue it. A token is a bracket when it is ``(`` or ``)`` followed by a
label, as ``delinearize`` reads it, so a piece that is ``▁(`` or ``▁)`` alone must be followed
by a continuation (the label), and a piece that is ``▁`` alone leaves the token's kind to the
next piece. Source words are counted as the source pieces that begin with ``▁``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from transformer_core.errors import UserError
from transformer_core.parsing.trees import POS_PLACEHOLDER, check_linearization

WORD_START = "\u2581"  # sentencepiece's ▁

# Piece categories, the columns of the per-row table of allowed categories. "_BARE": the
# bracket character alone, so the label must follow; "CONT_": a piece that does not start a
# token; BARE: ▁ alone.
(OPEN, OPEN_BARE, CLOSE, CLOSE_BARE, LEAF, BARE, CONT_OPEN, CONT_OPEN_BARE, CONT_CLOSE,
 CONT_CLOSE_BARE, CONT_LEAF, EOS, NEVER) = range(13)  # fmt: skip
CONTINUATIONS = (CONT_OPEN, CONT_OPEN_BARE, CONT_CLOSE, CONT_CLOSE_BARE, CONT_LEAF)


def piece_category(piece: str) -> int:
    """The category of one (non-special) piece: see the module docstring."""
    if piece == WORD_START:
        return BARE
    started = piece.startswith(WORD_START)
    body = piece[1:] if started else piece
    if body[0] in "()":
        bare = len(body) == 1
        if body[0] == "(":
            return (
                (OPEN_BARE if bare else OPEN)
                if started
                else (CONT_OPEN_BARE if bare else CONT_OPEN)
            )
        return (
            (CLOSE_BARE if bare else CLOSE)
            if started
            else (CONT_CLOSE_BARE if bare else CONT_CLOSE)
        )
    return LEAF if started else CONT_LEAF


class TreeConstraint:
    """The categories of a vocabulary's pieces; ``start`` gives a search's per-hypothesis state.

    Under the ``xx`` linearization the only leaf is the piece ``▁XX``; under ``tags`` every
    token that is not a bracket is one.
    """

    def __init__(
        self, pieces: Sequence[str], special: Sequence[int], eos_id: int, linearization: str
    ):
        check_linearization(linearization)
        categories = [piece_category(piece) if piece else NEVER for piece in pieces]
        for i in special:  # pad, unk, BOS, other control pieces: never generated
            categories[i] = NEVER
        categories[eos_id] = EOS
        if linearization == "xx":
            leaf = WORD_START + POS_PLACEHOLDER
            if leaf not in pieces:
                raise UserError(
                    f"--tree-constraint xx: the sentencepiece model has no piece {leaf!r}, so "
                    "it was not trained on XX-linearized trees"
                )
            categories = [
                NEVER if c == LEAF and piece != leaf else c
                for c, piece in zip(categories, pieces, strict=True)
            ]
        for kind, pieces_of_kind in (("opens", (OPEN, OPEN_BARE)), ("closes", (CLOSE, CLOSE_BARE))):
            if not any(c in pieces_of_kind for c in categories):
                raise UserError(
                    f"--tree-constraint: no piece of the sentencepiece model {kind} a bracket "
                    "(▁( or ▁)), so it was not trained on linearized trees"
                )
        self.category = torch.tensor(categories, dtype=torch.long)
        # After a bare ▁, which kinds some piece can go on with (XX never needs it).
        self.after_bare = (
            CONT_OPEN in categories or CONT_OPEN_BARE in categories,
            CONT_CLOSE in categories or CONT_CLOSE_BARE in categories,
            CONT_LEAF in categories and linearization != "xx",
        )
        # The fewest pieces a close and a leaf take: one where the vocabulary has them whole.
        self.costs = (1 if CLOSE in categories else 2, 1 if LEAF in categories else 2)
        self.word_start = torch.tensor(
            [piece.startswith(WORD_START) and i not in special for i, piece in enumerate(pieces)]
        )

    @classmethod
    def from_sentencepiece(cls, sp, linearization: str) -> TreeConstraint:
        """The constraint of a sentencepiece model (a ``SentencePieceProcessor``)."""
        size = sp.get_piece_size()
        special = [
            i for i in range(size) if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)
        ]
        return cls([sp.id_to_piece(i) for i in range(size)], special, sp.eos_id(), linearization)

    def words(self, src_tokens: Tensor) -> Tensor:
        """(B,) the number of words of each source row: its pieces that begin with ``▁``."""
        return self.word_start.to(src_tokens.device)[src_tokens].sum(dim=1)

    def start(self, src_tokens: Tensor, beam: int, max_lens: Tensor) -> TreeState:
        """The state of ``beam`` empty hypotheses per source row, rows grouped by sentence;
        ``max_lens`` (B,) caps each sentence's output, EOS included."""
        device = src_tokens.device
        words = self.words(src_tokens).repeat_interleave(beam)
        return TreeState(
            self.category.to(device),
            self.after_bare,
            self.costs,
            words,
            max_lens.repeat_interleave(beam),
        )


class TreeState:
    """Per hypothesis row: bracket depth, leaves so far, and where its last token stands."""

    FIELDS = ("words", "max_lens", "depth", "leaves", "started", "pending", "labelling", "empty")

    def __init__(
        self,
        category: Tensor,
        after_bare: tuple[bool, bool, bool],
        costs: tuple[int, int],
        words: Tensor,
        max_lens: Tensor,
    ):
        self.category, self.after_bare, (self.close_cost, self.leaf_cost) = (
            category,
            after_bare,
            costs,
        )
        self.words, self.max_lens = words, max_lens
        self.depth = torch.zeros_like(words)
        self.leaves = torch.zeros_like(words)
        self.started = torch.zeros(words.shape, dtype=torch.bool, device=words.device)
        self.pending = torch.zeros_like(self.started)  # after a bare ▁: the next piece says what
        self.labelling = torch.zeros_like(self.started)  # after ▁( or ▁): a label must follow
        self.empty = torch.zeros_like(self.started)  # the innermost bracket holds nothing yet

    def mask_(self, log_probs: Tensor, step: int) -> Tensor:
        """Set ``log_probs`` (rows, V) of the ``step``-th output token (1-based) to -inf wherever
        a piece would break the tree, or leave too few tokens to finish it; in place.

        A tree with ``l`` of its ``n`` leaves and ``d`` brackets open needs at least
        ``(n - l) * leaf_cost + d * close_cost + 1`` more pieces (EOS the last), where the costs
        are the fewest pieces a leaf and a close take in this vocabulary; a piece is allowed
        when what it leaves to do (one piece more after a bracket without its label, or after a
        bare ``▁``) fits in the pieces left after it.
        """
        inside = self.depth > 0
        room = self.leaves < self.words
        left = self.max_lens - step  # pieces after this one
        need = (self.words - self.leaves) * self.leaf_cost + self.depth * self.close_cost + 1

        def can_open(extra: int) -> Tensor:
            return room & (inside | ~self.started) & (need + self.close_cost + extra <= left)

        def can_close(extra: int) -> Tensor:
            last = (self.depth > 1) | ~room  # the root closes after the last leaf
            return inside & ~self.empty & last & (need - self.close_cost + extra <= left)

        def can_leaf(extra: int) -> Tensor:
            return inside & room & (need - self.leaf_cost + extra <= left)

        free = ~self.pending & ~self.labelling
        goes_on = self.started & ~self.pending & (need <= left)  # a continuation ends nothing
        kinds = (can_open, can_close, can_leaf)
        after_bare = [self.pending & can(0) for can in kinds]
        never = torch.zeros_like(free)
        via_bare = never  # ▁ now, and what some piece can make of it next
        for ok, can in zip(self.after_bare, kinds, strict=True):
            via_bare = via_bare | can(1) if ok else via_bare
        columns = {
            OPEN: free & can_open(0),
            OPEN_BARE: free & can_open(1),
            CLOSE: free & can_close(0),
            CLOSE_BARE: free & can_close(1),
            LEAF: free & can_leaf(0),
            BARE: free & via_bare,
            CONT_OPEN: goes_on | after_bare[0],
            CONT_OPEN_BARE: goes_on | self.pending & can_open(1),
            CONT_CLOSE: goes_on | after_bare[1],
            CONT_CLOSE_BARE: goes_on | self.pending & can_close(1),
            CONT_LEAF: goes_on | (after_bare[2] if self.after_bare[2] else never),
            EOS: free & self.started & ~inside & ~room,
            NEVER: never,
        }
        table = torch.stack([columns[c] for c in range(NEVER + 1)], dim=1)  # (rows, categories)
        allowed = table.index_select(1, self.category)  # (rows, V)
        return log_probs.masked_fill_(~allowed, float("-inf"))

    def advance(self, rows: Tensor, tokens: Tensor) -> None:
        """Keep the hypotheses at ``rows`` (of the previous step's rows) and extend them by ``tokens``."""
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name).index_select(0, rows))
        category = self.category[tokens]
        free = ~self.pending & ~self.labelling

        def chosen(*categories: int) -> Tensor:
            return torch.isin(category, torch.tensor(categories, device=category.device))

        opens = free & chosen(OPEN, OPEN_BARE) | self.pending & chosen(CONT_OPEN, CONT_OPEN_BARE)
        closes = free & chosen(CLOSE, CLOSE_BARE) | self.pending & chosen(
            CONT_CLOSE, CONT_CLOSE_BARE
        )
        leaf = free & chosen(LEAF) | self.pending & chosen(CONT_LEAF)
        self.depth = self.depth + opens.long() - closes.long()
        self.leaves = self.leaves + leaf.long()
        self.empty = opens | self.empty & ~(closes | leaf)
        self.labelling = free & chosen(OPEN_BARE, CLOSE_BARE) | self.pending & chosen(
            CONT_OPEN_BARE, CONT_CLOSE_BARE
        )
        self.pending = free & chosen(BARE)
        self.started = self.started | opens | closes | leaf  # a bare ▁ alone starts nothing
