"""A treebank PCFG on Table 4's NLTK split: the standard baseline beside the Transformer parser.

The grammar is NLTK's ``induce_pcfg`` (relative frequencies) over the training trees after
NLTK's own transforms: unary chains collapsed (``collapse_unary``), then binarized
(``chomsky_normal_form``) with horizontal Markovization ``--horz-markov`` and parent annotation
``--vert-markov``. Words seen once in training are replaced by a signature (capitalized, number,
hyphen, common suffixes), so the lexicon gives unseen test words the tags that rare words had.

Parsing is exact Viterbi CKY over that grammar, vectorized with numpy. NLTK's own
``ViterbiParser`` was tried first: on this grammar (about 16K rules) it stops at its 5 s limit
on a 5-word sentence. A sentence longer than ``--max-words``, or one whose parse runs past
``--time-limit`` seconds or finds no tree, counts as a failure: it is written as a flat tree,
which scores no brackets, so failures cost recall and are counted in the output.

Trees are scored with the project's EVALB (COLLINS.prm), the same scorer as Table 4, on the split
the workflow uses (``transformer-core treebank nltk``: the last 20 files test, the 20 before dev).
NLTK is not a project dependency: ``pip install nltk`` first.

    python -m bench.pcfg_baseline --split dev --horz-markov 1 --vert-markov 0
    python -m bench.pcfg_baseline --split test --out bench/results/HARDWARE/table4_pcfg_baseline/test_h1_v1.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.lib.hardware import cpu_model, write_result
from bench.lib.shared_data import SHARED_DATA
from transformer_core.errors import UserError
from transformer_core.parsing.corpora import read_nltk_sample
from transformer_core.parsing.evalb import evalb

try:
    import nltk
except ImportError as err:  # a benchmark's optional dependency
    raise SystemExit("the PCFG baseline needs NLTK: pip install nltk") from err

_SUFFIXES = ("ing", "ed", "ly", "s", "ion", "er", "est", "al", "ity", "y")


def signature(word: str) -> str:
    """The class of a rare or unseen word: what its shape says about its tag."""
    parts = ["UNK"]
    if word[0].isupper():
        parts.append("CAP")
    if any(c.isdigit() for c in word):
        parts.append("NUM")
    if "-" in word:
        parts.append("DASH")
    lower = word.lower()
    for suffix in _SUFFIXES:
        if lower.endswith(suffix) and len(lower) > len(suffix) + 2:
            parts.append(suffix)
            break
    return "-".join(parts)


class Grammar:
    """A binarized PCFG as arrays: lexical, unary and binary rules with log probabilities."""

    def __init__(self, trees: list[nltk.Tree], horz_markov: int, vert_markov: int) -> None:
        counts = Counter(w for t in trees for w in t.leaves())
        self.known = {w for w, n in counts.items() if n > 1}
        productions = []
        for tree in trees:
            tree = tree.copy(deep=True)
            for position in tree.treepositions("leaves"):
                tree[position] = self.terminal(tree[position])
            tree.collapse_unary(collapsePOS=False, collapseRoot=False)
            tree.chomsky_normal_form(horzMarkov=horz_markov, vertMarkov=vert_markov)
            productions += tree.productions()
        pcfg = nltk.induce_pcfg(nltk.Nonterminal("TOP"), productions)
        self.rules = len(pcfg.productions())
        symbols = sorted({str(p.lhs()) for p in pcfg.productions()})
        self.index = {s: i for i, s in enumerate(symbols)}
        self.symbols = symbols
        self.top = self.index["TOP"]
        lexical: dict[str, list[tuple[int, float]]] = {}
        unary, binary = [], []
        for p in pcfg.productions():
            lhs, rhs, logp = self.index[str(p.lhs())], p.rhs(), math.log(p.prob())
            if len(rhs) == 1 and isinstance(rhs[0], str):
                lexical.setdefault(rhs[0], []).append((lhs, logp))
            elif len(rhs) == 1:
                unary.append((lhs, self.index[str(rhs[0])], logp))
            else:
                binary.append((lhs, self.index[str(rhs[0])], self.index[str(rhs[1])], logp))
        self.lexical = lexical
        self.unary = tuple(np.array(c) for c in zip(*unary, strict=True))
        self.binary = tuple(np.array(c) for c in zip(*binary, strict=True))

    def terminal(self, word: str) -> str:
        return word if word in self.known else signature(word)


def viterbi(grammar: Grammar, words: list[str], deadline: float) -> nltk.Tree | None:
    """The most probable binarized tree over ``words`` (CKY), or None if none or past the deadline."""
    n, size = len(words), len(grammar.symbols)
    u_lhs, u_child, u_logp = grammar.unary
    b_lhs, b_left, b_right, b_logp = grammar.binary
    score: dict[tuple[int, int], np.ndarray] = {}
    back: dict[tuple[int, int], list[np.ndarray]] = {}  # per layer: [binary split/child, unary]

    def close_unary(i: int, j: int, cell: np.ndarray) -> None:
        layers = []
        for _ in range(3):  # collapse_unary leaves chains of at most TOP -> X -> tag
            candidate = u_logp + cell[u_child]
            best = np.full(size, -np.inf)
            np.maximum.at(best, u_lhs, candidate)
            better = best > cell
            child = np.full(size, -1)
            order = np.lexsort((-candidate, u_lhs))
            first = order[np.r_[True, u_lhs[order][1:] != u_lhs[order][:-1]]]
            child[u_lhs[first]] = u_child[first]
            child[~better] = -1
            cell = np.where(better, best, cell)
            layers.append(child)
        score[i, j], back[i, j] = cell, [back.get((i, j), None), *layers]

    for i, word in enumerate(words):
        cell = np.full(size, -np.inf)
        for tag, logp in grammar.lexical.get(grammar.terminal(word), ()):
            cell[tag] = logp
        back[i, i + 1] = None
        close_unary(i, i + 1, cell)
    for length in range(2, n + 1):
        if time.monotonic() > deadline:
            return None
        for i in range(n - length + 1):
            j = i + length
            splits = np.stack([score[i, k][b_left] + score[k, j][b_right] for k in range(i + 1, j)])
            best_split = splits.argmax(axis=0)
            candidate = b_logp + splits[best_split, np.arange(len(b_logp))]
            cell = np.full(size, -np.inf)
            np.maximum.at(cell, b_lhs, candidate)
            order = np.lexsort((-candidate, b_lhs))
            first = order[np.r_[True, b_lhs[order][1:] != b_lhs[order][:-1]]]
            rule = np.full(size, -1)
            rule[b_lhs[first]] = first
            back[i, j] = (rule, best_split + i + 1)
            close_unary(i, j, cell)
    if not np.isfinite(score[0, n][grammar.top]):
        return None
    return _build(grammar, back, words, 0, n, grammar.top, 3)


def _build(grammar, back, words, i, j, symbol, layer) -> nltk.Tree:
    """The tree under ``symbol`` over words[i:j], read from the backpointers of ``layer``."""
    binary, *unary = back[i, j]
    while layer > 0:
        child = unary[layer - 1][symbol]
        layer -= 1
        if child >= 0:
            return nltk.Tree(
                grammar.symbols[symbol], [_build(grammar, back, words, i, j, child, layer)]
            )
    if binary is None:  # a word
        return nltk.Tree(grammar.symbols[symbol], [words[i]])
    rule, split = binary
    r = rule[symbol]
    k = int(split[r])
    _, b_left, b_right, _ = grammar.binary
    return nltk.Tree(
        grammar.symbols[symbol],
        [
            _build(grammar, back, words, i, k, int(b_left[r]), 3),
            _build(grammar, back, words, k, j, int(b_right[r]), 3),
        ],
    )


def parse(grammar: Grammar, words: list[str], time_limit: float, max_words: int) -> str | None:
    """The parse of ``words`` as one line of bracketed text rooted at TOP, or None (a failure)."""
    if len(words) > max_words:
        return None
    tree = viterbi(grammar, words, time.monotonic() + time_limit)
    if tree is None:
        return None
    tree.un_chomsky_normal_form(expandUnary=True)
    return tree.pformat(margin=10**9)


def flat(words: list[str]) -> str:
    """A failed sentence: its words under TOP, no constituent to score."""
    return "(TOP " + " ".join(f"(XX {w})" for w in words) + ")"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zip", default=SHARED_DATA / "ptb" / "nltk_treebank.zip", type=Path)
    parser.add_argument("--held-out-files", type=int, default=20, help="as table4.held_out_files")
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument(
        "--horz-markov", type=int, default=1, help="siblings kept in binarized labels"
    )
    parser.add_argument("--vert-markov", type=int, default=0, help="parents kept in labels")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per sentence")
    parser.add_argument("--max-words", type=int, default=70, help="longer sentences fail")
    parser.add_argument("--out", type=Path, help="JSON result (default: print only)")
    args = parser.parse_args()

    splits = read_nltk_sample(args.zip, args.held_out_files)
    started = time.monotonic()
    grammar = Grammar(
        [nltk.Tree.fromstring(str(t)) for t in splits["train"]], args.horz_markov, args.vert_markov
    )
    trained = time.monotonic() - started
    gold = [str(t) for t in splits[args.split]]
    test, failures = [], 0
    for number, tree in enumerate(splits[args.split], 1):
        words = tree.words()
        line = parse(grammar, words, args.time_limit, args.max_words)
        failures += line is None
        test.append(line or flat(words))
        if number % 50 == 0:
            print(f"{number}/{len(gold)} sentences, {failures} failures", flush=True)
    parsed = time.monotonic() - started - trained
    scores = evalb(gold, test).as_dict()["all"]
    result = {
        "split": args.split,
        "sentences": len(gold),
        "failures": failures,
        "horz_markov": args.horz_markov,
        "vert_markov": args.vert_markov,
        "rules": grammar.rules,
        "time_limit_s": args.time_limit,
        "max_words": args.max_words,
        "f1": round(scores["f1"], 2),
        "recall": round(scores["recall"], 2),
        "precision": round(scores["precision"], 2),
        "grammar_s": round(trained, 1),
        "parse_s": round(parsed, 1),
        "cpu": cpu_model(),
    }
    print(json.dumps(result, indent=1))
    if args.out:
        write_result(args.out, result)


if __name__ == "__main__":
    try:
        main()
    except UserError as err:  # a missing or unreadable treebank zip
        raise SystemExit(str(err)) from None
