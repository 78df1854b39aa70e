"""The generated smoke corpus: determinism, sizes, uniqueness, and the grammar it must carry."""

import json
import subprocess
import sys

import pytest

from transformer_core.data import smoke
from transformer_core.data.registry import load_registry

SIZES = {"train": 400, "dev": 50, "test": 50}


def lex(section, en):
    return next(row for row in smoke.lexicon()[section] if row[0] == en)


def np_(noun, plural=False, det="def", adjectives=()):
    return smoke.NounPhrase(
        lex("nouns", noun), plural, det, [lex("adjectives", a) for a in adjectives]
    )


@pytest.mark.parametrize("lang", ["de", "fr"])
def test_deterministic_sized_and_unique(lang):
    a = smoke.generate(lang, 7, SIZES)
    assert a == smoke.generate(lang, 7, SIZES)
    assert a != smoke.generate(lang, 8, SIZES)
    assert {k: len(v) for k, v in a.items()} == SIZES
    sources = [s for pairs in a.values() for s, _ in pairs]
    assert len(set(sources)) == len(sources)  # dev/test never seen in train


@pytest.mark.parametrize("lang", ["de", "fr"])
def test_vocabulary_of_a_few_hundred_words(lang):
    corpus = smoke.generate(lang, 1, {"train": 5000})["train"]
    src = {w.strip(".,").lower() for s, _ in corpus for w in s.split()}
    tgt = {w.strip(".,").lower() for _, t in corpus for w in t.split()}
    assert 200 <= len(src) <= 600 and 200 <= len(tgt) <= 800


@pytest.mark.parametrize(
    "phrase, case, expected",
    [
        (np_("dog", adjectives=["big"]), "nom", "der große Hund"),
        (np_("dog", adjectives=["big"]), "acc", "den großen Hund"),
        (np_("dog", det="indef", adjectives=["big"]), "nom", "ein großer Hund"),
        (np_("dog", det="indef", adjectives=["big"]), "acc", "einen großen Hund"),
        (np_("child", det="indef", adjectives=["small"]), "dat", "einem kleinen Kind"),
        (np_("house", det="indef", adjectives=["small"]), "acc", "ein kleines Haus"),
        (np_("cat", adjectives=["tired"]), "dat", "der müden Katze"),
        (np_("car", det="indef", adjectives=["expensive"]), "nom", "ein teures Auto"),
        (np_("dog", plural=True), "dat", "den Hunden"),
        (np_("car", plural=True), "dat", "den Autos"),
        (
            np_("dog", plural=True, det=lex("numbers", "two"), adjectives=["big"]),
            "nom",
            "zwei große Hunde",
        ),
        (
            np_("dog", plural=True, det=lex("numbers", "two"), adjectives=["big"]),
            "dat",
            "zwei großen Hunden",
        ),
        (np_("woman", plural=True, adjectives=["big", "red"]), "acc", "die großen roten Frauen"),
    ],
)
def test_german_case_gender_and_adjective_endings(phrase, case, expected):
    assert " ".join(smoke._de_np(phrase, case)) == expected


@pytest.mark.parametrize(
    "phrase, expected",
    [
        (np_("dog", adjectives=["big", "red"]), "le grand chien rouge"),
        (np_("house", det="indef", adjectives=["black"]), "une maison noire"),
        (np_("woman", plural=True, adjectives=["happy"]), "les femmes heureuses"),
        (
            np_("bird", plural=True, det=lex("numbers", "three"), adjectives=["small"]),
            "trois petits oiseaux",
        ),
    ],
)
def test_french_adjective_position_and_agreement(phrase, expected):
    assert " ".join(smoke._fr_np(phrase)) == expected


def test_reordering_and_negation():
    main = smoke.Clause(np_("man"), lex("clause_verbs", "says"), "clause")
    sub = smoke.Clause(
        np_("dog"), lex("transitive_verbs", "sees"), "transitive", obj=np_("cat"), negated=True
    )
    s = smoke.Sentence(main, conjunction=lex("conjunctions", "that"), sub=sub)
    assert smoke.english(s) == "The man says that the dog does not see the cat."
    assert smoke.german(s) == "Der Mann sagt, dass der Hund die Katze nicht sieht."  # verb-final
    assert smoke.french(s) == "L'homme dit que le chien ne voit pas le chat."  # elision, ne ... pas
    v2 = smoke.Sentence(
        smoke.Clause(np_("child"), lex("transitive_verbs", "helps"), "transitive", obj=np_("man")),
        time=lex("time_adverbs", "today"),
    )
    assert smoke.english(v2) == "Today, the child helps the man."
    assert smoke.german(v2) == "Heute hilft das Kind dem Mann."  # verb second, dative object
    assert smoke.french(v2) == "Aujourd'hui, l'enfant aide l'homme."


def test_generated_german_subordinate_clauses_end_in_a_verb():
    verbs = {row[i] for row in smoke.lexicon()["transitive_verbs"] for i in (2, 3)}
    verbs |= {row[i] for row in smoke.lexicon()["intransitive_verbs"] for i in (2, 3)}
    pairs = smoke.generate("de", 3, {"train": 1000})["train"]
    subordinate = [t for _, t in pairs if ", dass " in t or ", weil " in t]
    assert len(subordinate) > 100
    assert all(t.rstrip(".").split()[-1] in verbs for t in subordinate)


@pytest.mark.parametrize("name, lang", [("smoke_en_de", "de"), ("smoke_en_fr", "fr")])
def test_download_generates_the_smoke_dataset(tmp_path, name, lang):
    out = tmp_path / name
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "download",
            "--dataset",
            name,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    params = load_registry().dataset(name).generate
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["lines"] == {s: params[s] for s in ("train", "dev", "test")}
    for split in ("train", "dev", "test"):
        src = (out / f"{split}.en").read_text(encoding="utf-8").split("\n")
        tgt = (out / f"{split}.{lang}").read_text(encoding="utf-8").split("\n")
        assert len(src) == len(tgt) == params[split] + 1
    difficulty = {key: params[key] for key in smoke.DIFFICULTY if key in params}
    assert difficulty and all(manifest["generator"][k] == v for k, v in difficulty.items())
    expected = smoke.generate(
        lang, params["seed"], {s: params[s] for s in ("train", "dev", "test")}, **difficulty
    )
    assert (out / "test.en").read_text(encoding="utf-8").split("\n")[0] == expected["test"][0][0]


def test_reduced_lexicon_keeps_every_construction():
    full, reduced = smoke.lexicon(), smoke.reduced_lexicon(10)
    assert smoke.reduced_lexicon(100) == full
    for category, rows in reduced.items():
        assert 2 <= len(rows) <= max(2, len(full[category]) // 2), category
        assert all(row in full[category] for row in rows)
    nouns = reduced["nouns"]
    # every (animacy, German gender) pair of the full lexicon, so every article form
    assert {(n[8], n[3]) for n in nouns} == {(n[8], n[3]) for n in full["nouns"]}
    assert {a[6] for a in reduced["adjectives"]} == {"pre", "post"}
    assert {v[4] for v in reduced["transitive_verbs"]} == {"acc", "dat"}
    assert {p[2] for p in reduced["prepositions"]} == {p[2] for p in full["prepositions"]}
    assert reduced["conjunctions"][0][0] == "that"  # the clause verbs' conjunction
    with pytest.raises(ValueError, match="lexicon_percent"):
        smoke.reduced_lexicon(0)


@pytest.mark.parametrize("lang", ["de", "fr"])
def test_difficulty_parameters(lang):
    sizes = {"train": 2000}
    easy = smoke.generate(lang, 1, sizes, lexicon_percent=10, two_clause_percent=5)["train"]
    full = smoke.generate(lang, 1, sizes)["train"]
    words = smoke.reduced_lexicon(10)
    english_words = {w.strip(".,").lower() for s, _ in easy for w in s.split()}
    assert len(english_words) < 0.4 * len(
        {w.strip(".,").lower() for s, _ in full for w in s.split()}
    )
    assert english_words >= {n[0] for n in words["nouns"]}  # the reduced lexicon is all used

    def two_clause_share(pairs):
        conjunctions = {f" {c[0]} " for c in smoke.lexicon()["conjunctions"]}
        return sum(any(c in s for c in conjunctions) for s, _ in pairs) / len(pairs)

    assert 0.02 < two_clause_share(easy) < 0.08
    assert 0.40 < two_clause_share(full) < 0.50
    none = smoke.generate(lang, 1, {"train": 300}, two_clause_percent=0)["train"]
    assert two_clause_share(none) == 0
    with pytest.raises(ValueError, match="two_clause_percent"):
        smoke.generate(lang, 1, sizes, two_clause_percent=101)


def test_reduced_german_is_still_german():
    verbs = {row[i] for row in smoke.lexicon()["transitive_verbs"] for i in (2, 3)}
    verbs |= {row[i] for row in smoke.lexicon()["intransitive_verbs"] for i in (2, 3)}
    pairs = smoke.generate("de", 3, {"train": 2000}, lexicon_percent=10, two_clause_percent=5)
    subordinate = [t for _, t in pairs["train"] if ", dass " in t or ", weil " in t]
    assert subordinate and all(t.rstrip(".").split()[-1] in verbs for t in subordinate)
