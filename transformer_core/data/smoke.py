"""The smoke corpus: a seeded generator of small English->German and English->French corpora.

The point is a corpus a tiny model can learn in a couple of CPU minutes while
still needing what translation needs: word reordering and agreement, not a
word-for-word substitution. The grammar covers, over a vocabulary of a few
hundred real words (``smoke_lexicon.yaml``):

- German: gender and case of articles (der/den/dem, ein/einen/einem), the
  weak, mixed and strong adjective endings, dative plural -n, verbs that take
  the dative (helfen, folgen, danken), verb-second order after a fronted
  adverb ("Heute sieht der Hund ..."), verb-final subordinate clauses
  ("..., weil der Hund die Katze nicht sieht."), "nicht" at the clause end.
- French: adjectives after the noun except a few (grand, petit, ...), gender
  and number agreement of articles and adjectives, elision (l', qu', n'),
  the two-part negation ne ... pas.
- English: a/an, do-support in negation ("does not see"), adverbs before the verb.

Two parameters set the difficulty (the registry's ``generate`` block):
``lexicon_percent`` keeps that share of every lexicon category (stratified, so
the reduced lexicon still has every gender, both adjective positions and the
dative verbs), and ``two_clause_percent`` is the share of sentences with a
second clause. The full lexicon and 45% two-clause sentences are the default; the
smoke workflow uses 10% of the lexicon and 5%, which a 3+3-layer, d_model 64
model translates well after 200 steps of 1000 tokens (docs/measured.md, "Smoke scale");
with the full lexicon it has barely started using the source by then.

Same seed and parameters, same corpus, on every platform (only ``random.Random``
is used). Sentences are unique across train, dev and test.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from transformer_core.files import atomic_open, atomic_write_text

LANGUAGES = ("de", "fr")
DIFFICULTY = ("lexicon_percent", "two_clause_percent")  # optional ``generate`` parameters
_VOWELS = tuple("aeiouyàâéèêëîïôûh")


def _lexicon_text() -> str:
    return (
        resources.files("transformer_core.data")
        .joinpath("smoke_lexicon.yaml")
        .read_text(encoding="utf-8")
    )


@cache
def lexicon() -> dict[str, list[list[Any]]]:
    return yaml.safe_load(_lexicon_text())


# The columns that split a category into strata a reduced lexicon must keep: animacy and
# German gender of nouns, the French adjective position, the case a verb or preposition takes.
_STRATA = {
    "nouns": lambda row: (row[8], row[3]),
    "adjectives": lambda row: row[6],
    "transitive_verbs": lambda row: row[4],
    "prepositions": lambda row: row[2],
}


def reduced_lexicon(percent: int) -> dict[str, list[list[Any]]]:
    """``percent`` of every category's entries, the first ones of each stratum in lexicon order.

    Every stratum keeps at least one entry and every category at least two (a
    second conjunction, a second adverb), so each construction of the grammar
    can still be generated.
    """
    if not 1 <= percent <= 100:
        raise ValueError(f"lexicon_percent must be between 1 and 100, got {percent}")
    reduced = {}
    for category, rows in lexicon().items():
        stratum_of = _STRATA.get(category, lambda row: None)
        strata: dict[Any, list[list[Any]]] = {}
        for row in rows:
            strata.setdefault(stratum_of(row), []).append(row)
        minimum = 1 if len(strata) > 1 else 2
        keep = {
            id(row)
            for members in strata.values()
            for row in members[: max(minimum, round(len(members) * percent / 100))]
        }
        reduced[category] = [row for row in rows if id(row) in keep]
    return reduced


@dataclass
class NounPhrase:
    noun: list[Any]  # a row of lexicon["nouns"]
    plural: bool
    det: str  # "def", "indef" (singular) or a row of lexicon["numbers"] (plural)
    adjectives: list[list[Any]] = field(default_factory=list)  # 0-2 rows of lexicon["adjectives"]


@dataclass
class Clause:
    subject: NounPhrase
    verb: list[Any]
    kind: str  # "transitive", "intransitive" or "clause"
    obj: NounPhrase | None = None
    negated: bool = False
    frequency: list[str] | None = None  # a row of lexicon["frequency_adverbs"]
    prep: tuple[list[Any], NounPhrase] | None = None


@dataclass
class Sentence:
    main: Clause
    time: list[str] | None = None  # fronted adverb
    conjunction: list[str] | None = None
    sub: Clause | None = None


# ---------------------------------------------------------------- sampling


class _Sampler:
    def __init__(
        self, rng: random.Random, lex: dict[str, list[list[Any]]], two_clause_percent: int
    ) -> None:
        self.rng = rng
        self.lex = lex
        self.two_clause = two_clause_percent / 100

    def noun_phrase(self, animate: bool = False, definite: bool = False) -> NounPhrase:
        rng = self.rng
        nouns = [n for n in self.lex["nouns"] if n[8]] if animate else self.lex["nouns"]
        plural = rng.random() < 0.3
        if definite:
            det: Any = "def"
        elif plural:
            det = "def" if rng.random() < 0.7 else rng.choice(self.lex["numbers"])
        else:
            det = "def" if rng.random() < 0.6 else "indef"
        roll = rng.random()
        adjectives: list[list[Any]] = []
        if roll < 0.1:  # two: one the French put before the noun, one after ("the big red dog")
            pre = [a for a in self.lex["adjectives"] if a[6] == "pre"]
            post = [a for a in self.lex["adjectives"] if a[6] == "post"]
            adjectives = [rng.choice(pre), rng.choice(post)]
        elif roll < 0.5:
            adjectives = [rng.choice(self.lex["adjectives"])]
        return NounPhrase(rng.choice(nouns), plural, det, adjectives)

    def clause(self, kind: str | None = None) -> Clause:
        rng = self.rng
        if kind is None:
            kind = "transitive" if rng.random() < 0.65 else "intransitive"
        verb = rng.choice(self.lex[f"{kind}_verbs"])
        c = Clause(self.noun_phrase(animate=True), verb, kind)
        if kind == "clause":
            return c
        c.negated = rng.random() < 0.15
        if not c.negated and rng.random() < 0.15:
            c.frequency = rng.choice(self.lex["frequency_adverbs"])
        if kind == "transitive":
            # negating an indefinite object needs kein / pas de: keep the object definite
            c.obj = self.noun_phrase(definite=c.negated)
        if not c.negated and rng.random() < 0.25:
            c.prep = (rng.choice(self.lex["prepositions"]), self.noun_phrase())
        return c

    def sentence(self) -> Sentence:
        rng = self.rng
        if rng.random() >= self.two_clause:
            time = rng.choice(self.lex["time_adverbs"]) if rng.random() < 0.2 else None
            return Sentence(self.clause(), time=time)
        conjunctions = self.lex["conjunctions"]
        if rng.random() < 0.4:
            return Sentence(self.clause("clause"), conjunction=conjunctions[0], sub=self.clause())
        return Sentence(self.clause(), conjunction=rng.choice(conjunctions[1:]), sub=self.clause())


# ---------------------------------------------------------------- English


def _en_np(np_: NounPhrase) -> list[str]:
    words = [a[0] for a in np_.adjectives] + [np_.noun[1] if np_.plural else np_.noun[0]]
    if np_.det == "def":
        return ["the", *words]
    if np_.det == "indef":
        return ["an" if words[0].startswith(tuple("aeiou")) else "a", *words]
    return [np_.det[0], *words]


def _en_clause(c: Clause) -> list[str]:
    verb = c.verb[1] if c.subject.plural else c.verb[0]
    words = _en_np(c.subject)
    if c.negated:
        words += ["do" if c.subject.plural else "does", "not", c.verb[1]]
    elif c.frequency:
        words += [c.frequency[0], verb]
    else:
        words.append(verb)
    if c.obj:
        words += _en_np(c.obj)
    if c.prep:
        words += [c.prep[0][0], *_en_np(c.prep[1])]
    return words


def english(s: Sentence) -> str:
    words = [s.time[0] + ","] if s.time else []
    words += _en_clause(s.main)
    if s.sub:
        words += [s.conjunction[0], *_en_clause(s.sub)]
    return _finish(words)


# ---------------------------------------------------------------- German

_DE_DEF = {
    ("m", "nom"): "der", ("m", "acc"): "den", ("m", "dat"): "dem",
    ("f", "nom"): "die", ("f", "acc"): "die", ("f", "dat"): "der",
    ("n", "nom"): "das", ("n", "acc"): "das", ("n", "dat"): "dem",
    ("pl", "nom"): "die", ("pl", "acc"): "die", ("pl", "dat"): "den",
}  # fmt: skip
_DE_INDEF = {
    ("m", "nom"): "ein", ("m", "acc"): "einen", ("m", "dat"): "einem",
    ("f", "nom"): "eine", ("f", "acc"): "eine", ("f", "dat"): "einer",
    ("n", "nom"): "ein", ("n", "acc"): "ein", ("n", "dat"): "einem",
}  # fmt: skip
# adjective endings: weak (after der/die/das), mixed (after ein), strong plural (after a numeral)
_DE_WEAK = {
    ("m", "nom"): "e",
    ("f", "nom"): "e",
    ("n", "nom"): "e",
    ("f", "acc"): "e",
    ("n", "acc"): "e",
}
_DE_MIXED = {
    ("m", "nom"): "er",
    ("f", "nom"): "e",
    ("n", "nom"): "es",
    ("f", "acc"): "e",
    ("n", "acc"): "es",
}


def _de_adjective(stem: str, ending: str) -> str:
    return stem + (ending[1:] if stem.endswith("e") else ending)


def _de_np(np_: NounPhrase, case: str) -> list[str]:
    gender = "pl" if np_.plural else np_.noun[3]
    key = (gender, case)
    noun = np_.noun[4] if np_.plural else np_.noun[2]
    if np_.plural and case == "dat" and not noun.endswith(("n", "s")):
        noun += "n"
    if np_.det == "def":
        article, ending = [_DE_DEF[key]], _DE_WEAK.get(key, "en")
    elif np_.det == "indef":
        article, ending = [_DE_INDEF[key]], _DE_MIXED.get(key, "en")
    else:
        article, ending = [np_.det[1]], "en" if case == "dat" else "e"
    return [*article, *(_de_adjective(a[1], ending) for a in np_.adjectives), noun]


def _de_clause(c: Clause, order: str) -> list[str]:
    """``order``: "main" (S V ...), "inverted" (V S ..., after a fronted adverb) or "sub" (S ... V)."""
    verb = c.verb[3] if c.subject.plural else c.verb[2]
    subject = _de_np(c.subject, "nom")
    middle: list[str] = []
    if c.frequency:
        middle.append(c.frequency[1])
    if c.obj:
        middle += _de_np(c.obj, c.verb[4])
    if c.prep:
        prep, np_ = c.prep
        middle += [prep[1], *_de_np(np_, prep[2])]
    if c.negated:
        middle.append("nicht")
    if order == "main":
        return [*subject, verb, *middle]
    if order == "inverted":
        return [verb, *subject, *middle]
    return [*subject, *middle, verb]


def german(s: Sentence) -> str:
    if s.time:
        words = [s.time[1], *_de_clause(s.main, "inverted")]
    else:
        words = _de_clause(s.main, "main")
    if s.sub:
        words[-1] += ","
        words += [s.conjunction[1], *_de_clause(s.sub, "sub")]
    return _finish(words)


# ---------------------------------------------------------------- French


def _fr_np(np_: NounPhrase) -> list[str]:
    feminine = np_.noun[6] == "f"
    noun = np_.noun[7] if np_.plural else np_.noun[5]
    form = 2 + (2 if np_.plural else 0) + (1 if feminine else 0)  # index of the agreeing form
    pre = [a[form] for a in np_.adjectives if a[6] == "pre"]
    post = [a[form] for a in np_.adjectives if a[6] == "post"]
    if np_.det == "def":
        article = "les" if np_.plural else ("la" if feminine else "le")
    elif np_.det == "indef":
        article = "une" if feminine else "un"
    else:
        article = np_.det[2]
    return [article, *pre, noun, *post]


def _fr_clause(c: Clause) -> list[str]:
    verb = c.verb[-1] if c.subject.plural else c.verb[-2]
    words = _fr_np(c.subject)
    if c.negated:
        words += ["ne", verb, "pas"]
    else:
        words.append(verb)
    if c.frequency:
        words.append(c.frequency[2])
    if c.obj:
        words += _fr_np(c.obj)
    if c.prep:
        words += [c.prep[0][3], *_fr_np(c.prep[1])]
    return words


def _elide(words: list[str]) -> list[str]:
    """le/la -> l', que -> qu', ne -> n' before a vowel or mute h."""
    out: list[str] = []
    for word in words:
        if out and out[-1] in ("le", "la", "que", "ne") and word.startswith(_VOWELS):
            word = out.pop()[:-1] + "'" + word
        out.append(word)
    return out


def french(s: Sentence) -> str:
    words = [s.time[2] + ","] if s.time else []
    words += _fr_clause(s.main)
    if s.sub:
        words += [*s.conjunction[2].split(), *_fr_clause(s.sub)]
    return _finish(_elide(words))


def _finish(words: list[str]) -> str:
    text = " ".join(words) + "."
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------- corpus


def generate(
    tgt_lang: str,
    seed: int,
    sizes: dict[str, int],
    lexicon_percent: int = 100,
    two_clause_percent: int = 45,
) -> dict[str, list[tuple[str, str]]]:
    """``{split: [(english, target), ...]}`` for the splits in ``sizes`` (in that order), unique sentences."""
    if tgt_lang not in LANGUAGES:
        raise ValueError(f"the smoke corpus has target languages {LANGUAGES}, not {tgt_lang!r}")
    if not 0 <= two_clause_percent <= 100:
        raise ValueError(f"two_clause_percent must be between 0 and 100, got {two_clause_percent}")
    realize = german if tgt_lang == "de" else french
    sampler = _Sampler(
        random.Random(f"smoke-{tgt_lang}-{seed}"),
        reduced_lexicon(lexicon_percent),
        two_clause_percent,
    )
    seen: set[str] = set()
    corpus: dict[str, list[tuple[str, str]]] = {}
    for split, size in sizes.items():
        pairs = []
        draws = 0
        while len(pairs) < size:
            draws += 1
            if draws > 100 * size + 1000:  # a lexicon too small for this many distinct sentences
                raise ValueError(
                    f"the smoke grammar with lexicon_percent={lexicon_percent} produced only "
                    f"{len(seen)} distinct sentences in {draws} draws; ask for fewer sentences "
                    "or a larger lexicon_percent"
                )
            sentence = sampler.sentence()
            source = english(sentence)
            if source not in seen:
                seen.add(source)
                pairs.append((source, realize(sentence)))
        corpus[split] = pairs
    return corpus


def write_dataset(dataset, out: Path, splits: Sequence[str]) -> dict[str, Any]:
    """Generate a registry ``smoke_*`` dataset into ``out`` like a download would; the manifest.

    All splits are generated (uniqueness across splits needs them all), the
    requested ones written.
    """
    params = dataset.generate
    sizes = {split: params[split] for split in ("train", "dev", "test")}
    difficulty = {key: params[key] for key in DIFFICULTY if key in params}
    corpus = generate(dataset.tgt, params["seed"], sizes, **difficulty)
    out.mkdir(parents=True, exist_ok=True)
    for split in splits:
        with (
            atomic_open(out / f"{split}.{dataset.src}") as src,
            atomic_open(out / f"{split}.{dataset.tgt}") as tgt,
        ):
            for english_side, target_side in corpus[split]:
                src.write(english_side + "\n")
                tgt.write(target_side + "\n")
    manifest = {
        "dataset": dataset.name,
        "description": dataset.description,
        "src_lang": dataset.src,
        "tgt_lang": dataset.tgt,
        "lines": {split: len(corpus[split]) for split in splits},
        "generator": {
            "module": __name__,
            "seed": params["seed"],
            **difficulty,
            "lexicon_sha256": hashlib.sha256(_lexicon_text().encode("utf-8")).hexdigest(),
        },
    }
    atomic_write_text(
        out / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    )
    return manifest
