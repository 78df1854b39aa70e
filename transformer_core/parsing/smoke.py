"""A small generated treebank for the smoke scale of Table 4.

The real WSJ treebank is licensed, so the smoke run parses sentences drawn
from a probabilistic grammar instead: 284 words, NP/VP/PP/SBAR recursion, Penn
Treebank labels and tags, punctuation that EVALB deletes. Every word has one
tag, the preposition decides where a PP attaches (of/with/from to a noun, the
others to a verb), and no sentence has two parses, so a tiny model can learn
the grammar in a minute or two of CPU training and score far above zero.
"""

from __future__ import annotations

import random

from transformer_core.parsing.trees import ROOT_LABEL, Tree

# Lexical categories: the part before "_" is the Penn Treebank tag.
LEXICON: dict[str, tuple[str, ...]] = {
    name: tuple(words.split())
    for name, words in {
        "DT": "the a every this some no each",
        "NN": (
            "man woman child dog cat bird teacher student doctor farmer king queen soldier "
            "painter writer singer driver baker judge nurse house garden river city village "
            "school market bridge tower forest mountain road car boat train letter book song "
            "story picture window door table chair apple bread coin key lamp ring sword box "
            "horse fox wolf bear cup hat coat map"
        ),
        "NNS": (
            "men women children dogs cats birds teachers students doctors farmers kings "
            "soldiers painters writers singers houses gardens rivers cities villages schools "
            "markets bridges towers forests roads cars boats trains letters books songs stories "
            "pictures windows apples coins keys horses"
        ),
        "JJ": (
            "old young big small red green blue happy sad quiet loud tall short dark bright "
            "cold warm new strange clever brave lazy kind proud rich poor gentle wild tired "
            "hungry famous angry careful curious honest lucky lonely busy calm"
        ),
        "NNP": (
            "Anna Peter Maria John Laura Paul Sara Tom Emma David Lucy Mark Clara Simon Alice "
            "Henry Julia Oscar Nina Victor Paris London Berlin Rome Vienna Oslo Madrid Prague "
            "Lisbon Dublin"
        ),
        "PRP": "he she it they we I you",
        "VBD_T": (
            "saw found took gave liked loved helped called followed watched built painted wrote "
            "read carried opened closed bought sold visited met chased caught lost kept moved "
            "cleaned fixed sent held pushed pulled brought left heard noticed remembered "
            "forgot washed"
        ),
        "VBD_I": (
            "slept laughed smiled cried arrived waited danced sang walked ran swam "
            "jumped worked rested stayed fell shouted listened"
        ),
        "VBD_S": "said thought knew believed hoped claimed feared",
        "VBZ": "is",
        "IN_N": "of with from",
        "IN_V": "in on near after before under behind",
        "IN_C": "that whether",
        "RB_D": "very quite rather too so",
        "RB_M": (
            "quickly slowly quietly happily sadly carefully loudly suddenly rarely often "
            "gladly calmly bravely politely softly"
        ),
        "CC": "and but or",
        ",": ",",
        ".": ".",
    }.items()
}

_BASE_NP = (
    (4.0, ("DT", "NN"), False),
    (2.0, ("DT", "JJ", "NN"), False),
    (2.0, ("DT", "NNS"), False),
    (1.0, ("JJ", "NNS"), False),
    (2.0, ("NNP",), False),
    (2.0, ("PRP",), False),
)
_CLAUSE = (
    (10.0, ("NP", "VP"), False),
    (1.0, ("ADVP", ",", "NP", "VP"), False),
)
# (weight, right-hand side, recursive?) per symbol; a phrase's label is the name before "_".
# Coordination joins two clauses (S_C) and a PP's object is a base NP (NP_B), so that
# no sentence has two parses: the grammar can be learnt exactly.
GRAMMAR: dict[str, tuple[tuple[float, tuple[str, ...], bool], ...]] = {
    "S": _CLAUSE + ((1.5, ("S_C", ",", "CC", "S_C"), False),),
    "S_C": _CLAUSE,
    "NP": _BASE_NP + ((2.5, ("NP_B", "PP_N"), False),),
    "NP_B": _BASE_NP,
    "VP": (
        (4.0, ("VBD_T", "NP"), False),
        (2.0, ("VBD_T", "NP", "PP_V"), False),
        (1.5, ("VBD_I",), False),
        (1.5, ("VBD_I", "PP_V"), False),
        (1.0, ("VBD_I", "ADVP"), False),
        (1.5, ("VBD_S", "SBAR"), True),
        (1.5, ("VBZ", "ADJP"), False),
    ),
    "PP_N": ((1.0, ("IN_N", "NP_B"), False),),
    "PP_V": ((1.0, ("IN_V", "NP"), False),),
    "SBAR": ((1.0, ("IN_C", "S_C"), False),),
    "ADJP": ((2.0, ("JJ",), False), (1.0, ("RB_D", "JJ"), False)),
    "ADVP": ((1.0, ("RB_M",), False),),
}
MAX_RECURSION = 3
RECURSION_DECAY = 0.5


def _expand(symbol: str, rng: random.Random, depth: int) -> Tree:
    tag = symbol.split("_")[0]
    if symbol in LEXICON:
        return Tree(tag, [rng.choice(LEXICON[symbol])])
    rules = [
        (weight * (RECURSION_DECAY**depth if recursive else 1.0), rhs, recursive)
        for weight, rhs, recursive in GRAMMAR[symbol]
        if not (recursive and depth >= MAX_RECURSION)
    ]
    _, rhs, recursive = rng.choices(rules, weights=[r[0] for r in rules])[0]
    return Tree(tag, [_expand(child, rng, depth + recursive) for child in rhs])


def generate_tree(rng: random.Random) -> Tree:
    """One sentence: an S from the grammar with a final period, rooted at TOP."""
    sentence = _expand("S", rng, 0)
    sentence.children.append(Tree(".", ["."]))
    return Tree(ROOT_LABEL, [sentence])


def generate_treebank(sizes: dict[str, int], seed: int = 0) -> dict[str, list[Tree]]:
    """Distinct sentences for each split (in the order given), reproducible from the seed."""
    rng = random.Random(seed)
    seen: set[str] = set()
    splits: dict[str, list[Tree]] = {}
    for split, size in sizes.items():
        trees: list[Tree] = []
        attempts = 0
        while len(trees) < size:
            attempts += 1
            if attempts > 100 * (size + 10):
                raise ValueError(f"cannot draw {size} distinct sentences for {split}")
            tree = generate_tree(rng)
            key = " ".join(tree.words())
            if key not in seen:
                seen.add(key)
                trees.append(tree)
        splits[split] = trees
    return splits
