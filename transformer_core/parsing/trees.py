"""Penn Treebank trees for Table 4: reading, cleaning, and the linearization of Vinyals et al.

Trees are read from bracketed text (``.mrg`` files with one tree over many
lines, or one tree per line). Every tree is rooted at ``TOP``: the PTB's
unlabeled outer bracket ``( (S ...) )`` and a ``ROOT`` wrapper become ``TOP``,
and a bare ``(S ...)`` gets one.

``clean`` removes what the parser is not asked to predict: traces (``-NONE-``
leaves and the constituents left empty without them) and function tags and
indices (``NP-SBJ-1`` and ``NP=2`` become ``NP``; ``-LRB-``/``-RRB-`` stay).

Vinyals et al. (2015, "Grammar as a Foreign Language") turn a tree into a
token sequence: an opening label ``(S``, a closing label ``)S``, and ``XX`` for
every part-of-speech tag (linearization ``xx``). The paper's own code,
tensor2tensor's ``wsj_parsing``, keeps each word's tag instead of ``XX``
(linearization ``tags``): a tag depends on its word, so predicting it makes the
model align its output with its input. Linearization ``words`` puts each word itself at its
leaf, so the output copies the input between the brackets (not the paper's; on the NLTK sample
it learns fastest, docs/table4.md). ``delinearize`` turns any of them back into a tree over
the sentence's words, repairing what a model may get wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from transformer_core.errors import UserError

POS_PLACEHOLDER = "XX"
TRACE_TAG = "-NONE-"
ROOT_LABEL = "TOP"
LINEARIZATIONS = ("xx", "tags", "words")  # the leaf token: XX, the word's tag, the word
_ROOT_ALIASES = ("", "ROOT", ROOT_LABEL)
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_FUNCTION_TAG = re.compile(r"[-=]")


@dataclass(eq=True, slots=True)
class Tree:
    """A constituent: a label and its children; a preterminal's one child is its word."""

    label: str
    children: list[Tree | str] = field(default_factory=list)

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def preterminals(self) -> Iterator[Tree]:
        """The (tag, word) nodes, left to right."""
        if self.is_preterminal:
            yield self
            return
        for child in self.children:
            if isinstance(child, Tree):
                yield from child.preterminals()

    def words(self) -> list[str]:
        return [node.children[0] for node in self.preterminals()]

    def tags(self) -> list[str]:
        return [node.label for node in self.preterminals()]

    def __str__(self) -> str:
        """One line of bracketed text, the form EVALB reads."""
        inner = " ".join(str(child) for child in self.children)
        return f"({self.label} {inner})"


# --- reading -----------------------------------------------------------------------------


def parse_trees(text: str, source: str = "<text>") -> Iterator[Tree]:
    """All trees in bracketed text, each rooted at TOP; a malformed tree is a UserError."""
    stack: list[Tree] = []
    expect_label = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if expect_label:
            expect_label = False
            if token not in ("(", ")"):
                stack[-1].label = token
                continue
        if token == "(":
            node = Tree("")
            if stack:
                parent = stack[-1]
                if parent.children and isinstance(parent.children[0], str):
                    raise _malformed(
                        text, match.start(), source, "a word and a constituent share a bracket"
                    )
                parent.children.append(node)
            stack.append(node)
            expect_label = True
        elif token == ")":
            if not stack:
                raise _malformed(text, match.start(), source, "unbalanced ')'")
            node = stack.pop()
            if not node.children:
                raise _malformed(text, match.start(), source, f"empty constituent ({node.label})")
            if not stack:
                yield _rooted(node)
        else:
            if not stack:
                raise _malformed(text, match.start(), source, f"word {token!r} outside a tree")
            node = stack[-1]
            if node.children:
                raise _malformed(
                    text, match.start(), source, f"{token!r} is not the only child of ({node.label}"
                )
            node.children.append(token)
    if stack:
        raise _malformed(text, len(text), source, "unbalanced '(' at end of input")


def _malformed(text: str, offset: int, source: str, what: str) -> UserError:
    line = text.count("\n", 0, offset) + 1
    return UserError(f"{source}:{line}: malformed tree: {what}")


def _rooted(tree: Tree) -> Tree:
    if tree.label in _ROOT_ALIASES:
        tree.label = ROOT_LABEL
        return tree
    return Tree(ROOT_LABEL, [tree])


# --- cleaning ----------------------------------------------------------------------------


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``; labels that start with '-' (-LRB-) stay."""
    if label.startswith("-"):
        return label
    return _FUNCTION_TAG.split(label, maxsplit=1)[0]


def clean(tree: Tree) -> Tree | None:
    """The tree without traces and function tags; None if nothing but traces is left.

    Part-of-speech tags are kept as they are: only constituent labels carry
    function tags.
    """
    if tree.is_preterminal:
        return None if tree.label == TRACE_TAG else Tree(tree.label, list(tree.children))
    children = [c for c in (clean(child) for child in tree.children) if c is not None]
    if not children:
        return None
    return Tree(strip_function_tags(tree.label), children)


# --- linearization -----------------------------------------------------------------------


def linearize(tree: Tree, linearization: str = "xx") -> list[str]:
    """The target sequence: ``(S (NP XX XX )NP (VP XX )VP XX )S`` (``xx``, Vinyals et al.),
    ``(S (NP NNP NNP )NP (VP VBZ )VP . )S`` (``tags``, tensor2tensor's) or
    ``(S (NP Pierre Vinken )NP (VP sings )VP . )S`` (``words``).

    The TOP root is not part of the sequence; its children are. (A word never holds a
    bracket: ``parse_trees`` splits at them.)
    """
    check_linearization(linearization)
    tokens: list[str] = []
    leaf = {"xx": lambda node: POS_PLACEHOLDER, "tags": lambda node: node.label}.get(
        linearization, lambda node: node.children[0]
    )

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            tokens.append(leaf(node))
            return
        tokens.append("(" + node.label)
        for child in node.children:
            visit(child)
        tokens.append(")" + node.label)

    for child in tree.children if tree.label == ROOT_LABEL else [tree]:
        visit(child)
    return tokens


def check_linearization(linearization: str) -> None:
    if linearization not in LINEARIZATIONS:
        raise UserError(
            f"unknown linearization {linearization!r}; known: {', '.join(LINEARIZATIONS)}"
        )


def is_bracket(token: str) -> bool:
    """``(NP`` or ``)NP``: a bracket with its label (``(`` alone is not one)."""
    return len(token) > 1 and token[0] in "()"


def leaves_of(tokens: Sequence[str], linearization: str) -> int:
    """How many leaf tokens a linearized tree has: one per word when it is well formed."""
    if linearization == "xx":
        return sum(token == POS_PLACEHOLDER for token in tokens)
    return sum(not is_bracket(token) for token in tokens)


@dataclass
class Repairs:
    """What ``delinearize`` had to fix in one predicted sequence."""

    unknown_tokens: int = 0
    unmatched_closes: int = 0
    unclosed_opens: int = 0
    leaves_dropped: int = 0
    leaves_added: int = 0
    empty_constituents: int = 0

    def __bool__(self) -> bool:
        return any(vars(self).values())


def delinearize(
    tokens: Sequence[str],
    words: Sequence[str],
    tags: Sequence[str] | None = None,
    linearization: str = "xx",
) -> tuple[Tree, Repairs]:
    """A TOP-rooted tree over ``words`` from a predicted sequence, repaired to be well formed.

    The leaves are the ``XX`` tokens (``xx``) or every token that is not a bracket
    (``tags``: the predicted tags; ``words``: the predicted words, which need not be the
    sentence's: the tree is over ``words`` either way). Repairs: other tokens of an ``xx``
    sequence are ignored; a closing bracket closes the innermost open constituent whatever its
    label,
    and one with nothing open is ignored; constituents still open at the end
    are closed; ``XX`` leaves beyond the number of words are dropped from the
    end, missing ones are added under the last top-level constituent;
    constituents left without leaves are removed. Preterminals get ``tags``
    (the gold tags when scoring with EVALB, which deletes punctuation by its
    tag), else the predicted tags (``tags``) or ``XX`` (``xx``, ``words``).
    """
    check_linearization(linearization)
    if tags is not None and len(tags) != len(words):
        raise ValueError(f"{len(tags)} tags for {len(words)} words")
    repairs = Repairs()
    root = Tree(ROOT_LABEL)
    stack = [root]
    leaves: list[tuple[Tree, Tree]] = []  # (parent, placeholder), left to right
    for token in tokens:
        if token == POS_PLACEHOLDER or (linearization != "xx" and not is_bracket(token)):
            leaf = Tree(token)
            stack[-1].children.append(leaf)
            leaves.append((stack[-1], leaf))
        elif len(token) > 1 and token[0] == "(":
            node = Tree(token[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif len(token) > 1 and token[0] == ")":
            if len(stack) > 1:
                stack.pop()
            else:
                repairs.unmatched_closes += 1
        else:
            repairs.unknown_tokens += 1
    repairs.unclosed_opens = len(stack) - 1

    for parent, leaf in leaves[len(words) :]:
        parent.children = [c for c in parent.children if c is not leaf]  # by identity, not ==
        repairs.leaves_dropped += 1
    slots = {id(leaf) for _, leaf in leaves[: len(words)]}
    missing = len(words) - len(slots)
    if missing > 0:
        constituents = [c for c in root.children if id(c) not in slots]
        target = constituents[-1] if constituents else root
        added = [Tree(POS_PLACEHOLDER) for _ in range(missing)]
        target.children.extend(added)
        slots.update(id(leaf) for leaf in added)
        repairs.leaves_added = missing

    repairs.empty_constituents = _prune_empty(root, slots)
    for i, node in enumerate(_slots_in_order(root, slots)):
        if tags is not None:
            node.label = tags[i]
        elif linearization == "words":  # the leaf token was a word, not a tag
            node.label = POS_PLACEHOLDER
        node.children = [words[i]]
    return root, repairs


def _slots_in_order(node: Tree, slots: set[int]) -> Iterator[Tree]:
    for child in node.children:
        if id(child) in slots:
            yield child
        else:
            yield from _slots_in_order(child, slots)


def _prune_empty(node: Tree, slots: set[int]) -> int:
    """Remove constituents without a leaf slot below them; return how many went."""
    removed = 0
    kept: list[Tree | str] = []
    for child in node.children:
        if id(child) not in slots:
            removed += _prune_empty(child, slots)
            if not child.children:
                removed += 1
                continue
        kept.append(child)
    node.children = kept
    return removed
