"""Trees: reading PTB text, removing traces and function tags, Vinyals linearization and back."""

import time
import zipfile

import pytest
from shared_data import SHARED_DATA

from transformer_core.errors import UserError
from transformer_core.parsing.trees import (
    LINEARIZATIONS,
    Repairs,
    Tree,
    clean,
    delinearize,
    is_bracket,
    linearize,
    parse_trees,
    strip_function_tags,
)

SHARED = SHARED_DATA
NLTK_ZIP = SHARED / "ptb" / "nltk_treebank.zip"

MRG = """
( (S
    (NP-SBJ-1 (NNP Mr.) (NNP Vinken) )
    (VP (VBZ is)
      (VP (VBN expected)
        (S (NP-SBJ (-NONE- *-1) )
          (VP (TO to) (VP (VB stay) )))))
    (-LRB- -LRB-) (NP=2 (CD 1) ) (-RRB- -RRB-)
    (. .) ))
( (S (NP-SBJ (PRP It) ) (VP (VBD fell) ) (. .) ))
"""


def test_reads_multiline_mrg_and_roots_at_top():
    trees = list(parse_trees(MRG, "wsj_0001.mrg"))
    assert len(trees) == 2
    assert trees[1] == parse_trees_one("(TOP (S (NP-SBJ (PRP It)) (VP (VBD fell)) (. .)))")
    assert trees[0].words()[:4] == ["Mr.", "Vinken", "is", "expected"]
    assert "*-1" in trees[0].words()


def parse_trees_one(text):
    (tree,) = parse_trees(text)
    return tree


def test_one_tree_per_line_and_root_aliases():
    lines = "(S (NP (DT a)) (VP (VBD b)))\n(ROOT (S (NP (DT c))))\n(TOP (NP (DT d)))\n"
    trees = list(parse_trees(lines))
    assert [t.label for t in trees] == ["TOP", "TOP", "TOP"]
    assert [t.children[0].label for t in trees] == ["S", "S", "NP"]
    assert str(trees[0]) == "(TOP (S (NP (DT a)) (VP (VBD b))))"


@pytest.mark.parametrize(
    "text, what",
    [
        ("(S (NP (DT a))\n(VP (VBD b))", ":2: malformed tree: unbalanced '('"),
        ("(S (NP (DT a)))\n)", ":2: malformed tree: unbalanced ')'"),
        ("(S (DT a b))", "not the only child"),
        ("(S (NP))", "empty constituent"),
        ("word (S (DT a))", "outside a tree"),
    ],
)
def test_malformed_trees_name_file_and_line(text, what):
    with pytest.raises(UserError, match="f.mrg") as err:
        list(parse_trees(text, "f.mrg"))
    assert what in str(err.value)


def test_strip_function_tags():
    assert strip_function_tags("NP-SBJ-1") == "NP"
    assert strip_function_tags("NP=2") == "NP"
    assert strip_function_tags("ADVP-LOC-PRD=3") == "ADVP"
    assert strip_function_tags("-LRB-") == "-LRB-"
    assert strip_function_tags("-NONE-") == "-NONE-"
    assert strip_function_tags("PRP$") == "PRP$"


def test_clean_removes_traces_empty_constituents_and_function_tags():
    tree = clean(next(parse_trees(MRG)))
    assert str(tree) == (
        "(TOP (S (NP (NNP Mr.) (NNP Vinken)) (VP (VBZ is) (VP (VBN expected) "
        "(S (VP (TO to) (VP (VB stay)))))) (-LRB- -LRB-) (NP (CD 1)) (-RRB- -RRB-) (. .)))"
    )
    assert clean(parse_trees_one("(S (NP (-NONE- *T*-1)))")) is None


def test_linearize_as_vinyals_et_al():
    tree = parse_trees_one("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))")
    assert " ".join(linearize(tree)) == "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S"


def test_linearize_with_tags_as_tensor2tensor():
    tree = parse_trees_one("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))")
    assert " ".join(linearize(tree, "tags")) == "(S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S"
    with pytest.raises(UserError, match="unknown linearization 'XX'; known: xx, tags, words"):
        linearize(tree, "XX")


def test_linearize_with_words():
    tree = parse_trees_one("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))")
    assert " ".join(linearize(tree, "words")) == "(S (NP John )NP (VP has (NP a dog )NP )VP . )S"
    # Predicted words need not be the sentence's: the tree is over the sentence's words.
    predicted = "(S (NP Jon )NP (VP had (NP the dog )NP )VP . )S".split()
    back, repairs = delinearize(predicted, tree.words(), tree.tags(), "words")
    assert back == tree and not repairs


@pytest.mark.parametrize("linearization", LINEARIZATIONS)
def test_delinearize_inverts_linearize(linearization):
    tree = parse_trees_one("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))")
    sequence = linearize(tree, linearization)
    back, repairs = delinearize(sequence, tree.words(), tree.tags(), linearization)
    assert back == tree and not repairs
    predicted, _ = delinearize(sequence, tree.words(), linearization=linearization)
    assert predicted.words() == tree.words()
    assert predicted.tags() == (tree.tags() if linearization == "tags" else ["XX"] * 5)
    assert is_bracket("(NP") and is_bracket(")NP") and not is_bracket("(")


def test_delinearize_with_tags_repairs_the_leaf_count():
    # every token that is not a bracket is a leaf: one too many is dropped, the tags are gold
    tree, repairs = delinearize("(S (NP DT NN NN )NP )S".split(), ["a", "b"], ["DT", "NN"], "tags")
    assert str(tree) == "(TOP (S (NP (DT a) (NN b))))"
    assert repairs == Repairs(leaves_dropped=1)


@pytest.mark.parametrize(
    "pred, words, expected, repairs",
    [
        # missing close brackets: closed at the end
        ("(S (NP XX )NP (VP XX", "a b", "(TOP (S (NP (XX a)) (VP (XX b))))", Repairs(unclosed_opens=2)),
        # an extra close bracket and a mismatched label: the innermost open one closes
        ("(S (NP XX )VP )S )S XX", "a b", "(TOP (S (NP (XX a))) (XX b))", Repairs(unmatched_closes=1)),
        # too many leaves: the last are dropped, and the constituent left empty goes too
        ("(S (NP XX XX )NP (VP XX )VP )S", "a b", "(TOP (S (NP (XX a) (XX b))))", Repairs(leaves_dropped=1, empty_constituents=1)),
        # extra leaves are dropped by position, not by value
        ("(S (NP XX XX )NP )S", "a", "(TOP (S (NP (XX a))))", Repairs(leaves_dropped=1)),
        # too few leaves: added under the last top-level constituent
        ("(S (NP XX )NP )S (FRAG (NP XX )NP )FRAG", "a b c d", "(TOP (S (NP (XX a))) (FRAG (NP (XX b)) (XX c) (XX d)))", Repairs(leaves_added=2)),
        # nothing usable: the words hang under TOP
        ("<unk> )S", "a b", "(TOP (XX a) (XX b))", Repairs(unknown_tokens=1, unmatched_closes=1, leaves_added=2)),
    ],
)  # fmt: skip
def test_delinearize_repairs_ill_formed_output(pred, words, expected, repairs):
    tree, found = delinearize(pred.split(), words.split())
    assert str(tree) == expected
    assert found == repairs
    assert tree.words() == words.split()


def test_delinearize_checks_tag_count():
    with pytest.raises(ValueError, match="2 tags for 1 words"):
        delinearize(["XX"], ["a"], ["DT", "NN"])


def test_tree_is_a_value():
    assert Tree("NP", [Tree("DT", ["a"])]) == parse_trees_one("(TOP (NP (DT a)))").children[0]


@pytest.mark.skipif(not NLTK_ZIP.is_file(), reason=f"NLTK treebank sample not found at {NLTK_ZIP}")
def test_round_trip_is_identity_on_the_nltk_sample():
    start = time.perf_counter()
    with zipfile.ZipFile(NLTK_ZIP) as archive:
        names = sorted(
            n
            for n in archive.namelist()
            if n.startswith("treebank/combined/wsj_") and n.endswith(".mrg")
        )
        trees = [
            clean(tree) for name in names for tree in parse_trees(archive.read(name).decode(), name)
        ]
    assert len(trees) == 3914
    for tree in trees:
        for linearization in LINEARIZATIONS:
            sequence = linearize(tree, linearization)
            back, repairs = delinearize(sequence, tree.words(), tree.tags(), linearization)
            assert back == tree, str(tree)
            assert not repairs
    # Traces and function tags are really gone.
    labels = {node.label for tree in trees for node in _nodes(tree)}
    assert "-NONE-" not in labels
    assert not any(c in lab for lab in labels if not lab.startswith("-") for c in "-=")
    print(f"NLTK round trip of {len(trees)} trees: {time.perf_counter() - start:.2f} s")


def _nodes(tree):
    yield tree
    for child in tree.children:
        if isinstance(child, Tree):
            yield from _nodes(child)
