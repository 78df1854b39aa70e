"""Well-formed trees by construction: a beam-search constraint for linearized parse trees.

A parser trained on few trees counts badly: its outputs open brackets they never close and
hold more or fewer leaves than the sentence has words, and every repair ``delinearize`` makes
costs EVALB brackets. With ``--tree-constraint LINEARIZATION`` the search
(``search.beam_search_nbest``) only extends a hypothesis by pieces that keep it a prefix of a
tree ``delinearize`` reads without a repair:

- one root: ``(X`` opens the tree as its first token, and the tree ends when it closes;
- a leaf (``XX``, or under ``tags`` any other token) only inside a bracket, and at most one
  leaf per source word; under ``words`` each leaf is the source's next word, piece by piece,
  with the rules that keep that search on its track (``WordCopy``);
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
# The most brackets opened in a row, between two leaves, under the copy: the NLTK sample's 3,396
# training trees open at most 6 (25 runs of 5, 2,533 of 3).
MAX_OPEN_RUN = 6
LABEL_CHARACTERS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ$-|")  # phrase labels: PRP$, -LRB-, ADVP|PRT


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
    token that is not a bracket is one; under ``words`` the source's next word (``WordCopy``).
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
        self.linearization = linearization
        self.label_piece = torch.tensor([set(piece) <= LABEL_CHARACTERS for piece in pieces])
        index = {piece: i for i, piece in enumerate(pieces)}
        self.close_of = torch.tensor(  # ▁(NP -> the id of ▁)NP, where both are whole pieces
            [
                index.get(WORD_START + ")" + piece[2:], -1) if categories[i] == OPEN else -1
                for i, piece in enumerate(pieces)
            ]
        )
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
        category = self.category.to(device)
        copy = (
            WordCopy(
                category,
                self.label_piece.to(device),
                self.close_of.to(device),
                src_tokens.repeat_interleave(beam, dim=0),
            )
            if self.linearization == "words"
            else None
        )
        costs = self.costs if copy is None else (self.costs[0], 1)  # a leaf piece is one copied
        return TreeState(
            category, self.after_bare, costs, words, max_lens.repeat_interleave(beam), copy
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
        copy: WordCopy | None = None,
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
        self.copy = copy

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
        if self.copy is None:
            leaves_need = (self.words - self.leaves) * self.leaf_cost
            word_goes_on = 0  # a continuation ends nothing
        else:  # the source's pieces left to copy, one output piece each
            leaves_need = self.copy.pieces_left()
            word_goes_on = self.copy.in_word.long()  # a word's next piece is one of them
        need = leaves_need + self.depth * self.close_cost + 1

        def can_open(extra: int) -> Tensor:
            return room & (inside | ~self.started) & (need + self.close_cost + extra <= left)

        def can_close(extra: int) -> Tensor:
            last = (self.depth > 1) | ~room  # the root closes after the last leaf
            return inside & ~self.empty & last & (need - self.close_cost + extra <= left)

        def can_leaf(extra: int) -> Tensor:
            return inside & room & (need - self.leaf_cost + extra <= left)

        free = ~self.pending & ~self.labelling
        goes_on = self.started & ~self.pending & (need - word_goes_on <= left)
        kinds = (can_open, can_close, can_leaf)
        after_bare = [self.pending & can(0) for can in kinds]
        never = torch.zeros_like(free)
        via_bare = never  # ▁ now, and what some piece can make of it next
        # A copied ▁ is one of the source's pieces, which the copy's need already counts.
        extras = (1, 1, 0 if self.copy is not None else 1)
        for ok, can, extra in zip(self.after_bare, kinds, extras, strict=True):
            via_bare = via_bare | can(extra) if ok else via_bare
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
        if self.copy is not None:  # a row the copy leaves nothing keeps the tree's pieces
            copied = self.copy.allowed()
            copied &= allowed
            allowed = torch.where(copied.any(dim=1, keepdim=True), copied, allowed)
        return log_probs.masked_fill_(~allowed, float("-inf"))

    def advance(self, rows: Tensor, tokens: Tensor) -> None:
        """Keep the hypotheses at ``rows`` (of the previous step's rows) and extend them by ``tokens``."""
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name).index_select(0, rows))
        if self.copy is not None:
            self.copy.advance(rows, tokens)
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


class WordCopy:
    """Under ``words``, a leaf is the source's next word, piece by piece: the search copies the
    sentence between the brackets and decides only the brackets.

    A small parser loses its place in a long sentence (it skips, repeats or misspells words),
    and the brackets around a lost word go wrong with it. The source's pieces are the target
    leaves' pieces (one sentencepiece model encodes both sides, word by word), so per
    hypothesis row it keeps the position of the next source piece to copy:

    - a piece that starts a leaf (``LEAF``, or a bare ``▁``) is allowed only where it is that
      piece;
    - inside a copied word the word's next piece is the only one allowed, and once the word is
      whole no continuation piece is (it would lengthen the word);
    - after a bracket, a continuation piece only of label characters (capitals, ``$``, ``-``,
      ``|``): else the words the copy refuses come back glued to a label (``(ADJPnur``);
    - at most ``MAX_OPEN_RUN`` brackets open in a row: a parser that cannot place the next
      word otherwise opens brackets until the output's length runs out;
    - a close matches the innermost open (``▁)NP`` for ``▁(NP``) where the vocabulary has both
      whole, and, while words are left to copy, does not close a bracket whose only child is
      a bracket of its own label (``(NP (NP …)NP )NP``: a unary chain the treebank all but
      lacks, which a lost parser writes to stall);
    - a source piece sentencepiece could not encode (``<unk>``) lets any leaf stand for it.

    Where the copy would leave a row no piece at all (an ``<unk>`` after a bare ``▁``), that row
    keeps what the tree allows (``TreeState.mask_``).
    """

    FIELDS = (
        "source", "length", "position", "in_word", "open_run", "expected", "children", "depth",
        "last_close",
    )  # fmt: skip

    def __init__(self, category: Tensor, label_piece: Tensor, close_of: Tensor, source: Tensor):
        self.starts_leaf = (category == LEAF) | (category == BARE)  # (V,)
        self.continues = torch.isin(category, torch.tensor(CONTINUATIONS, device=category.device))
        self.opens = (category == OPEN) | (category == OPEN_BARE)
        self.closes = (category == CLOSE) | (category == CLOSE_BARE)
        self.close_of = close_of
        self.unknown = category == NEVER
        # Each piece's kind, the columns of the per-row table ``allowed`` builds (0: EOS and
        # specials; 1: starts a leaf; 2: continues a label or a word; 3: continues a word only;
        # 4: opens; 5: closes).
        kind = torch.zeros_like(category)
        for value, pieces in enumerate(
            (self.starts_leaf, self.continues & label_piece, self.continues & ~label_piece,
             self.opens, self.closes),
            start=1,
        ):  # fmt: skip
            kind[pieces] = value
        self.kind = kind
        self.source = source  # (rows, S): each row's source pieces, EOS and padding
        self.length = (category[source] == EOS).int().argmax(dim=1)  # pieces before EOS
        self.position = torch.zeros(source.shape[0], dtype=torch.long, device=source.device)
        self.in_word = torch.zeros(source.shape[0], dtype=torch.bool, device=source.device)
        self.open_run = torch.zeros_like(self.position)  # brackets opened since the last leaf
        # The close each open bracket needs (-1: any), innermost at depth - 1.
        self.expected = torch.full(
            (source.shape[0], MAX_OPEN_RUN * source.shape[1] + 1), -1, device=source.device
        )
        self.children = torch.zeros_like(self.expected)  # each open bracket's children so far
        self.depth = torch.zeros_like(self.position)
        self.last_close = torch.full_like(self.position, -1)  # the last piece, where it closes

    def next_piece(self) -> Tensor:
        """(rows,) the source piece each row copies next (EOS once every word is copied)."""
        last = self.source.shape[1] - 1
        return self.source.gather(1, self.position.clamp(max=last)[:, None]).squeeze(1)

    def pieces_left(self) -> Tensor:
        """(rows,) the source pieces each row has still to copy."""
        return self.length - self.position

    def allowed(self) -> Tensor:
        """(rows, V) the pieces the copy allows each row next: a table of (rows, kinds) spread
        over the vocabulary, then each row's own next piece and matching close."""
        following = self.next_piece()
        finish = self.in_word & self.continues[following]  # the word has pieces left: only them
        slot = (self.depth - 1).clamp(min=0)[:, None]
        innermost = self.expected.gather(1, slot).squeeze(1)
        # Closing now would leave a unary chain of one label: the innermost bracket's one child
        # is the bracket just closed, with the same label (where words are left to go in it).
        unary = (self.last_close == innermost) & (self.children.gather(1, slot).squeeze(1) == 1)
        unary &= self.pieces_left() > 0
        table = torch.stack(
            [
                torch.ones_like(finish),  # EOS (the tree says when)
                self.unknown[following],  # a leaf: the next piece (below), any for an <unk>
                ~self.in_word,  # a label goes on after a bracket, not after a whole word
                torch.zeros_like(finish),  # a word goes on only while it has pieces (below)
                self.open_run < MAX_OPEN_RUN,
                innermost < 0,  # a close: the innermost open's (below), any for a split label
            ],
            dim=1,
        )
        allowed = (table & ~finish[:, None]).index_select(1, self.kind)
        rows = torch.arange(following.numel(), device=following.device)
        allowed[rows, following] |= finish | self.starts_leaf[following]
        allowed[rows, innermost.clamp(min=0)] |= (innermost >= 0) & ~finish & ~unary
        return allowed

    def advance(self, rows: Tensor, tokens: Tensor) -> None:
        """Keep the rows at ``rows`` and extend them by ``tokens``, as ``TreeState.advance``."""
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name).index_select(0, rows))
        following = self.next_piece()
        starts = self.starts_leaf[tokens]
        copied = (tokens == following) & (starts | self.in_word & self.continues[tokens])
        copied |= self.unknown[following] & starts
        self.position = self.position + copied.long()
        self.in_word = copied
        opens, closes = self.opens[tokens], self.closes[tokens]
        self.open_run = torch.where(copied, 0, self.open_run + opens.long())
        each = torch.arange(tokens.numel(), device=tokens.device)
        deepest = self.expected.shape[1] - 1  # reached only past the cap, where the copy gave way
        at = self.depth.clamp(max=deepest)
        parent = (self.depth - 1).clamp(min=0, max=deepest)
        self.children[each, parent] += (opens | copied & starts) & (self.depth > 0)
        self.children[each, at] = torch.where(opens, 0, self.children[each, at])
        self.expected[each, at] = torch.where(opens, self.close_of[tokens], self.expected[each, at])
        self.depth = self.depth + opens.long() - closes.long()
        # A continuation of a close's label leaves it the last close (the chain stays one).
        self.last_close = torch.where(
            closes, tokens, torch.where(self.continues[tokens], self.last_close, -1)
        )
