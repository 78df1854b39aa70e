"""The tree constraint of beam search: which pieces it allows, and well-formed outputs from a
random model, for both linearizations and for pieces split at the unicode script."""

import pytest
import sentencepiece as spm
import torch
from conftest import tiny_config, tiny_model, train_spm

from transformer_core.decoding.search import beam_search
from transformer_core.errors import UserError
from transformer_core.parsing.constraint import (
    BARE,
    CLOSE,
    CONT_CLOSE,
    CONT_LEAF,
    CONT_OPEN,
    LEAF,
    MAX_OPEN_RUN,
    OPEN,
    TreeConstraint,
    piece_category,
)
from transformer_core.parsing.smoke import generate_treebank
from transformer_core.parsing.trees import delinearize, is_bracket, linearize

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

EOS = 3
# A hand-made vocabulary: specials, then the pieces the tests name.
PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁(S", "▁)S", "▁(NP", "▁)NP", "▁NN", "▁", "(VP",
          ")VP", "NN", "▁the", "P"]  # fmt: skip
ID = {piece: i for i, piece in enumerate(PIECES)}


def allowed(state) -> set[str]:
    log_probs = state.mask_(torch.zeros(state.words.numel(), len(PIECES)), step=1)
    return {PIECES[i] for i in torch.isfinite(log_probs[0]).nonzero().flatten().tolist()}


def walk(constraint, words, pieces):
    """The state of one hypothesis of a ``words``-word sentence after ``pieces``."""
    src = torch.tensor([[ID["▁the"]] * words + [EOS]])
    state = constraint.start(src, beam=1, max_lens=torch.tensor([100]))
    for piece in pieces:
        assert piece in allowed(state), f"{piece} refused after {pieces}"
        state.advance(torch.tensor([0]), torch.tensor([ID[piece]]))
    return state


@pytest.fixture
def constraint():
    return TreeConstraint(PIECES, special=[0, 1, 2], eos_id=EOS, linearization="tags")


def test_piece_categories():
    assert piece_category("▁(NP") == OPEN
    assert piece_category("▁)NP") == CLOSE
    assert piece_category("▁NN") == LEAF
    assert piece_category("▁XX") == LEAF
    assert piece_category("▁") == BARE
    assert piece_category("(NP") == CONT_OPEN
    assert piece_category(")NP") == CONT_CLOSE
    assert piece_category("P") == CONT_LEAF


def test_source_words_are_the_pieces_that_start_a_word(constraint):
    src = torch.tensor([[ID["▁the"], ID["P"], ID["▁"], ID["NN"], EOS], [ID["▁NN"], EOS, 0, 0, 0]])
    assert constraint.words(src).tolist() == [2, 1]


def test_a_tree_opens_first_and_holds_one_leaf_per_word(constraint):
    start = allowed(walk(constraint, 2, []))
    assert start == {"▁(S", "▁(NP", "▁"}  # no leaf outside a bracket, no close, no EOS
    opened = allowed(walk(constraint, 2, ["▁(S"]))
    assert "▁)S" not in opened and "</s>" not in opened  # no empty constituent
    assert {"▁NN", "▁(NP", "NN", "P"} <= opened  # continuations extend the label
    # The root cannot close while words are left, so nothing can follow it.
    assert "▁)S" not in allowed(walk(constraint, 2, ["▁(S", "▁NN"]))
    full = allowed(walk(constraint, 2, ["▁(S", "▁(NP", "▁NN", "▁)NP", "▁NN"]))
    # No third leaf, no new bracket, no end: a close (of any label) or a continuation.
    assert full == {"▁)S", "▁)NP", "▁", "NN", "P", "(VP", ")VP"}
    done = allowed(walk(constraint, 2, ["▁(S", "▁(NP", "▁NN", "▁)NP", "▁NN", "▁)S"]))
    assert "</s>" in done and not done & {"▁(S", "▁(NP", "▁NN", "▁)S"}


def test_no_piece_leaves_too_few_tokens_to_finish_the_tree(constraint):
    # 2 words in at most 6 tokens: (S NN NN )S EOS fits, (S (NP NN )NP NN )S EOS does not.
    state = constraint.start(torch.tensor([[ID["▁the"], ID["▁the"], EOS]]), 1, torch.tensor([6]))
    state.advance(torch.tensor([0]), torch.tensor([ID["▁(S"]]))
    finite = torch.isfinite(state.mask_(torch.zeros(1, len(PIECES)), step=2)[0]).nonzero()
    leaves = {"▁NN", "▁the"}  # under tags, any token that is not a bracket
    assert {PIECES[i] for i in finite.flatten().tolist()} == {*leaves, "▁", "NN", "P", "(VP", ")VP"}
    for piece in ["NN", "▁NN"]:  # a continuation spends a token
        state.advance(torch.tensor([0]), torch.tensor([ID[piece]]))
    finite = torch.isfinite(state.mask_(torch.zeros(1, len(PIECES)), step=4)[0]).nonzero()
    assert {PIECES[i] for i in finite.flatten().tolist()} == leaves  # only the last leaf fits


def test_under_xx_the_only_leaf_is_xx():
    pieces = [*PIECES, "▁XX"]
    constraint = TreeConstraint(pieces, special=[0, 1, 2], eos_id=EOS, linearization="xx")
    src = torch.tensor([[ID["▁the"], EOS]])
    state = constraint.start(src, beam=1, max_lens=torch.tensor([100]))
    state.advance(torch.tensor([0]), torch.tensor([ID["▁(S"]]))
    finite = torch.isfinite(state.mask_(torch.zeros(1, len(pieces)), 2)[0]).nonzero().flatten()
    # No other leaf than XX (not ▁NN, not ▁the); brackets and continuations as under tags.
    expected = {"▁XX", "▁(S", "▁(NP", "▁", "(VP", ")VP", "NN", "P"}
    assert {pieces[i] for i in finite.tolist()} == expected
    # A bare ▁ can only start a bracket here: its continuation cannot be a leaf.
    state.advance(torch.tensor([0]), torch.tensor([ID["▁"]]))
    finite = torch.isfinite(state.mask_(torch.zeros(1, len(pieces)), 2)[0]).nonzero().flatten()
    assert {pieces[i] for i in finite.tolist()} == {"(VP"}
    with pytest.raises(UserError, match="no piece '▁XX'"):
        TreeConstraint(PIECES, special=[0, 1, 2], eos_id=EOS, linearization="xx")


def test_a_bracket_needs_its_label_and_a_bare_start_its_kind(constraint):
    pieces = [*PIECES, "▁(", "(", "S"]
    with_bare = TreeConstraint(pieces, special=[0, 1, 2], eos_id=EOS, linearization="tags")
    src = torch.tensor([[ID["▁the"], EOS]])
    state = with_bare.start(src, 1, torch.tensor([50]))

    def allowed_now(step):
        finite = torch.isfinite(state.mask_(torch.zeros(1, len(pieces)), step)[0]).nonzero()
        return {pieces[i] for i in finite.flatten().tolist()}

    assert allowed_now(1) == {"▁(S", "▁(NP", "▁", "▁("}
    state.advance(torch.tensor([0]), torch.tensor([len(PIECES)]))  # ▁(
    assert allowed_now(2) == {"(VP", ")VP", "NN", "P", "(", "S"}  # only its label
    state = with_bare.start(src, 1, torch.tensor([50]))
    state.advance(torch.tensor([0]), torch.tensor([ID["▁"]]))  # ▁ first: a tree still opens
    assert allowed_now(2) == {"(VP", "("}


def test_a_bare_word_start_takes_its_kind_from_the_next_piece(constraint):
    state = walk(constraint, 1, ["▁(S", "▁"])
    assert allowed(state) == {"(VP", "NN", "P"}  # an opening or a leaf; nothing is open empty
    state = walk(constraint, 1, ["▁(S", "▁", "(VP", "▁NN", "▁"])
    assert allowed(state) == {")VP"}  # the one word is placed: only a close
    state = walk(constraint, 1, ["▁(S", "▁", "(VP", "▁NN", "▁", ")VP", "▁)S"])
    assert state.depth.item() == 0 and state.leaves.item() == 1
    assert "</s>" in allowed(state)


# A words vocabulary: the leaves are words, some in two pieces.
WORD_PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁(S", "▁)S", "▁(NP", "▁)NP", "▁the", "▁dog",
               "▁", "s", "he", "NN"]  # fmt: skip
WORD_ID = {piece: i for i, piece in enumerate(WORD_PIECES)}


def copy_walk(source, pieces):
    """A ``words`` hypothesis of the source ``source`` (pieces) after ``pieces``, and what it
    allows next."""
    constraint = TreeConstraint(WORD_PIECES, special=[0, 1, 2], eos_id=EOS, linearization="words")
    src = torch.tensor([[WORD_ID[piece] for piece in source] + [EOS]])
    state = constraint.start(src, beam=1, max_lens=torch.tensor([100]))
    for piece in pieces:
        state.advance(torch.tensor([0]), torch.tensor([WORD_ID[piece]]))
    finite = torch.isfinite(state.mask_(torch.zeros(1, len(WORD_PIECES)), len(pieces) + 1)[0])
    return state, {WORD_PIECES[i] for i in finite.nonzero().flatten().tolist()}


def test_under_words_each_leaf_is_the_next_source_word_piece_by_piece():
    source = ["▁the", "▁dog", "s"]  # "the dogs"
    assert copy_walk(source, ["▁(S"])[1] == {"▁(S", "▁(NP", "▁the", "NN"}  # not ▁dog, not ▁
    # "the" is whole: no continuation may lengthen it ("s", "he"); the next leaf is "dog".
    assert copy_walk(source, ["▁(S", "▁the"])[1] == {"▁(S", "▁(NP", "▁dog"}
    assert copy_walk(source, ["▁(S", "▁the", "▁dog"])[1] == {"s"}  # the word goes on
    state, after = copy_walk(source, ["▁(S", "▁the", "▁dog", "s"])
    assert after == {"▁)S"} and state.copy.position.item() == 3  # both words copied
    # A word that starts with a bare ▁: the ▁ only where the source has it, then its piece.
    assert copy_walk(["▁", "he"], ["▁(S"])[1] == {"▁(S", "▁(NP", "▁", "NN"}
    assert copy_walk(["▁", "he"], ["▁(S", "▁"])[1] == {"he"}


def test_under_words_a_row_the_copy_leaves_nothing_keeps_the_trees_pieces():
    # A bare ▁ before a piece sentencepiece could not encode: no piece is that <unk>, so the
    # row may go on as the tree allows (a continuation), and the search goes on.
    assert copy_walk(["▁", "<unk>"], ["▁(S", "▁"])[1] == {"s", "he", "NN"}


def test_under_words_a_label_goes_on_only_in_capitals_and_a_close_matches_its_open():
    # After a bracket a continuation extends its label: "NN" can, "he" and "s" cannot.
    assert {"NN"} == copy_walk(["▁the"], ["▁(S", "▁(NP"])[1] & {"NN", "he", "s"}
    # The innermost open is NP: its close is )NP, not )S.
    assert copy_walk(["▁the", "▁dog"], ["▁(S", "▁(NP", "▁the"])[1] == {"▁)NP", "▁(S", "▁(NP",
                                                                        "▁dog"}  # fmt: skip


def test_under_words_no_bracket_closes_over_one_bracket_of_its_own_label():
    # (S (NP (NP the )NP: closing the outer NP now would make the unary chain NP -> NP.
    state, after = copy_walk(["▁the", "▁dog"], ["▁(S", "▁(NP", "▁(NP", "▁the", "▁)NP"])
    assert "▁)NP" not in after and {"▁(NP", "▁dog"} <= after
    # With a second child it closes; so does an NP over one S, and an NP over one word.
    steps = ["▁(S", "▁(NP", "▁(NP", "▁the", "▁)NP", "▁dog"]
    assert "▁)NP" in copy_walk(["▁the", "▁dog"], steps)[1]
    assert "▁)NP" in copy_walk(["▁the"], ["▁(S", "▁(NP", "▁(S", "▁the", "▁)S"])[1]
    assert "▁)NP" in copy_walk(["▁the"], ["▁(S", "▁(NP", "▁the"])[1]
    # A label piece after the inner close leaves it the last close: still no )NP.
    steps = ["▁(S", "▁(NP", "▁(NP", "▁the", "▁)NP", "NN"]
    assert "▁)NP" not in copy_walk(["▁the", "▁dog"], steps)[1]
    # After the last word the chain can only close, and does.
    assert "▁)NP" in copy_walk(["▁the"], ["▁(S", "▁(NP", "▁(NP", "▁the", "▁)NP"])[1]


def test_under_words_brackets_open_at_most_max_open_run_in_a_row():
    opens = ["▁(S"] + ["▁(NP"] * (MAX_OPEN_RUN - 1)
    assert "▁(NP" not in copy_walk(["▁the"], opens)[1]
    assert "▁(NP" in copy_walk(["▁the"], opens[:-1])[1]
    # A leaf starts a new run.
    assert "▁(NP" in copy_walk(["▁the", "▁dog"], [*opens, "▁the"])[1]


def test_state_follows_the_kept_rows(constraint):
    src = torch.tensor([[ID["▁the"], EOS], [ID["▁the"], EOS]])
    state = constraint.start(
        src, beam=2, max_lens=torch.tensor([9, 9])
    )  # rows 0, 1: sentence 0; rows 2, 3: sentence 1
    state.advance(torch.arange(4), torch.tensor([ID["▁(S"], ID["▁(NP"], ID["▁(S"], ID["▁(NP"]]))
    state.advance(torch.tensor([1, 1, 2, 3]), torch.tensor([ID["▁NN"]] * 4))
    assert state.depth.tolist() == [1, 1, 1, 1] and state.leaves.tolist() == [1, 1, 1, 1]
    state.advance(torch.tensor([0, 3]), torch.tensor([ID["▁)NP"], ID["▁)NP"]]))  # sentence 0 left
    assert state.depth.tolist() == [0, 0] and state.words.tolist() == [1, 1]


@pytest.mark.parametrize(
    "linearization, split_by_script",
    [("tags", False), ("xx", True), ("tags", True), ("words", False)],
)
def test_a_random_model_decodes_only_well_formed_trees(tmp_path, linearization, split_by_script):
    trees = generate_treebank({"train": 300})["train"]
    words = [" ".join(tree.words()) for tree in trees]
    targets = [" ".join(linearize(tree, linearization)) for tree in trees]
    path = train_spm(
        tmp_path / "trees.model", words + targets, 120, split_by_unicode_script=split_by_script
    )
    sp = spm.SentencePieceProcessor(model_file=str(path))
    constraint = TreeConstraint.from_sentencepiece(sp, linearization)
    model = tiny_model(tiny_config(vocab_size=sp.get_piece_size()), sharp=True)
    sentences = words[:12]
    sources = [sp.encode(line) + [EOS] for line in sentences]
    batch = torch.zeros(len(sources), max(map(len, sources)), dtype=torch.long)
    for row, ids in enumerate(sources):
        batch[row, : len(ids)] = torch.tensor(ids)
    free = beam_search(model, batch, beam=3, max_len_b=60)
    constrained = beam_search(model, batch, beam=3, max_len_b=60, constraint=constraint)
    repaired = 0
    for sentence, unconstrained, ids in zip(sentences, free, constrained, strict=True):
        tokens = sp.decode(ids).split()
        _, repairs = delinearize(tokens, sentence.split(), linearization=linearization)
        assert not repairs, (sentence, tokens, repairs)
        if linearization == "words":  # the leaves are the sentence, copied
            assert [t for t in tokens if not is_bracket(t)] == sentence.split()
        repaired += bool(delinearize(sp.decode(unconstrained).split(), sentence.split(),
                                     linearization=linearization)[1])  # fmt: skip
    assert repaired > 0  # the random model alone makes ill-formed trees: the test can fail
