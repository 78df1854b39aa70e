"""Treebank files for Table 4: WSJ layout and splits, NLTK sample, generated smoke treebank, CLI."""

import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import SHARED_DATA

from transformer_core.errors import UserError
from transformer_core.parsing.corpora import (
    merge_training_files,
    read_nltk_sample,
    read_wsj,
    wsj_section_files,
)
from transformer_core.parsing.smoke import LEXICON, generate_treebank
from transformer_core.parsing.trees import delinearize, linearize, parse_trees

SHARED = SHARED_DATA
NLTK_ZIP = SHARED / "ptb" / "nltk_treebank.zip"
needs_nltk = pytest.mark.skipif(
    not NLTK_ZIP.is_file(), reason=f"NLTK sample not found at {NLTK_ZIP}"
)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", *args], capture_output=True, text=True
    )


def _fake_wsj(root: Path, sections=range(0, 25)) -> None:
    """One .mrg file per section; its tree's first word names the section."""
    for section in sections:
        folder = root / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text(
            f"( (S (NP-SBJ (NNP S{section:02d}) ) (VP (VBD ran) (NP (-NONE- *T*-1) )) (. .) ))\n"
        )


@pytest.mark.parametrize("nested", [True, False])
def test_wsj_splits_from_either_ldc_layout(tmp_path, nested):
    _fake_wsj(tmp_path / "wsj" if nested else tmp_path)
    splits = read_wsj(tmp_path)
    assert [t.words()[0] for t in splits["train"]] == [f"S{s:02d}" for s in range(2, 22)]
    assert [t.words()[0] for t in splits["dev"]] == ["S22"]
    assert [t.words()[0] for t in splits["test"]] == ["S23"]
    assert str(splits["test"][0]) == "(TOP (S (NP (NNP S23)) (VP (VBD ran)) (. .)))"


def test_wsj_layout_errors_say_what_was_expected(tmp_path):
    with pytest.raises(UserError, match="no such directory; expected the LDC layout"):
        wsj_section_files(tmp_path / "missing")
    with pytest.raises(UserError, match="no WSJ section folders.*DIR/wsj/SS/wsj_SSNN.mrg"):
        wsj_section_files(tmp_path)
    _fake_wsj(tmp_path, sections=[s for s in range(2, 24) if s not in (5, 23)])
    with pytest.raises(UserError, match=r"section\(s\) 05, 23; expected"):
        wsj_section_files(tmp_path)


def test_smoke_treebank_is_reproducible_distinct_and_in_the_lexicon():
    sizes = {"train": 300, "dev": 30, "test": 30}
    first, again = generate_treebank(sizes, seed=7), generate_treebank(sizes, seed=7)
    assert [str(t) for t in first["train"]] == [str(t) for t in again["train"]]
    assert [str(t) for t in generate_treebank(sizes, seed=8)["train"]] != [
        str(t) for t in first["train"]
    ]
    sentences = [" ".join(t.words()) for split in first.values() for t in split]
    assert len(set(sentences)) == len(sentences) == 360
    vocabulary = {w for words in LEXICON.values() for w in words}
    assert {w for s in sentences for w in s.split()} <= vocabulary
    labels = {node.label for split in first.values() for t in split for node in _nodes(t)}
    assert {"S", "NP", "VP", "PP", "SBAR", "."} <= labels
    lengths = [len(t.words()) for t in first["train"]]
    assert 5 < sum(lengths) / len(lengths) < 15 and max(lengths) < 60


def test_smoke_trees_round_trip():
    for tree in generate_treebank({"train": 200}, seed=1)["train"]:
        assert delinearize(linearize(tree), tree.words(), tree.tags())[0] == tree


@needs_nltk
def test_nltk_sample_splits_by_file():
    splits = read_nltk_sample(NLTK_ZIP, held_out_files=20)
    # wsj_0001-0159 train, wsj_0160-0179 dev, wsj_0180-0199 test
    assert {split: len(trees) for split, trees in splits.items()} == {
        "train": 3396,
        "dev": 273,
        "test": 245,
    }
    with pytest.raises(UserError, match="need 1 <= N"):
        read_nltk_sample(NLTK_ZIP, held_out_files=100)


def test_treebank_smoke_cli_writes_the_layout(tmp_path):
    out = tmp_path / "smoke"
    sizes = ["--train", "40", "--dev", "5", "--test", "6"]
    proc = _cli("treebank", "smoke", "--out", str(out), "--seed", "3", *sizes)
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [f"{s}.{k}" for s in ("train", "dev", "test") for k in ("words", "tree")]
        + [f"{s}.{k}" for s in ("dev", "test") for k in ("tags", "gold")]
    )
    words = (out / "test.words").read_text().splitlines()
    trees = (out / "test.tree").read_text().splitlines()
    tags = (out / "test.tags").read_text().splitlines()
    gold = list(parse_trees((out / "test.gold").read_text()))
    assert len(words) == len(trees) == len(tags) == len(gold) == 6
    for w, lin, t, g in zip(words, trees, tags, gold, strict=True):
        assert g.words() == w.split() and g.tags() == t.split() and linearize(g) == lin.split()


def test_treebank_wsj_cli(tmp_path):
    _fake_wsj(tmp_path / "ptb" / "wsj")
    proc = _cli("treebank", "wsj", "--dir", str(tmp_path / "ptb"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "train.words").read_text().count("\n") == 20
    assert (tmp_path / "out" / "test.tree").read_text() == "(S (NP XX )NP (VP XX )VP XX )S\n"
    bad = _cli("treebank", "wsj", "--dir", str(tmp_path / "nothing"), "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "expected the LDC layout" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_treebank_delinearize_cli(tmp_path):
    (tmp_path / "w").write_text("the dog barked .\nhi\n")
    (tmp_path / "t").write_text("DT NN VBD .\nUH\n")
    (tmp_path / "p").write_text("(S (NP XX XX )NP (VP XX )VP XX )S\n(FRAG XX XX )FRAG\n")
    out = tmp_path / "trees"
    args = ["--words", str(tmp_path / "w"), "--pred", str(tmp_path / "p"), "--out", str(out)]
    proc = _cli("treebank", "delinearize", *args, "--tags", str(tmp_path / "t"))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().splitlines() == [
        "(TOP (S (NP (DT the) (NN dog)) (VP (VBD barked)) (. .)))",
        "(TOP (FRAG (UH hi)))",
    ]
    assert "2 trees, 1 repaired (leaves dropped 1)" in proc.stdout
    (tmp_path / "p").write_text("(S XX )S\n")
    bad = _cli("treebank", "delinearize", *args)
    assert bad.returncode == 2 and f"pred {tmp_path / 'p'}: 1" in bad.stderr


def _nodes(tree):
    yield tree
    for child in tree.children:
        if not isinstance(child, str):
            yield from _nodes(child)


def _corpus(folder: Path, words: str, trees: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "train.words").write_text(words)
    (folder / "train.tree").write_text(trees)
    return folder


def test_merge_appends_a_parsed_corpus_to_the_treebank(tmp_path):
    treebank = _corpus(tmp_path / "tb", "the dog barked .\n", "(S (NP XX XX )NP (VP XX )VP XX )S\n")
    corpus = _corpus(
        tmp_path / "semi", "hi\nshe left", "(FRAG XX )FRAG\n(S (NP XX )NP (VP XX )VP )S"
    )
    counts = merge_training_files(treebank, corpus, tmp_path / "out")
    assert counts == {"treebank": 1, "corpus": 2}
    assert (tmp_path / "out" / "train.words").read_text() == "the dog barked .\nhi\nshe left\n"
    assert (tmp_path / "out" / "train.tree").read_text().splitlines()[1:] == [
        "(FRAG XX )FRAG",
        "(S (NP XX )NP (VP XX )VP )S",
    ]
    proc = _cli(
        "treebank",
        "merge",
        "--treebank",
        str(treebank),
        "--corpus",
        str(corpus),
        "--out",
        str(tmp_path / "cli"),
    )
    assert proc.returncode == 0 and "1 treebank + 2 corpus pairs" in proc.stdout


def test_merge_checks_the_corpus_has_the_treebanks_linearization(tmp_path):
    treebank = _corpus(tmp_path / "tb", "the dog\n", "(NP DT NN )NP\n")
    corpus = _corpus(tmp_path / "xx", "hi\n", "(FRAG XX )FRAG\n")
    assert merge_training_files(treebank, treebank, tmp_path / "ok", "tags") == {
        "treebank": 1,
        "corpus": 1,
    }
    with pytest.raises(UserError, match=r"xx/train.tree:1: an XX leaf, but table4.linearization"):
        merge_training_files(treebank, corpus, tmp_path / "out", "tags")
    with pytest.raises(UserError, match=r"tb/train.tree:1: 0 leaves for 2 words"):
        merge_training_files(treebank, corpus, tmp_path / "out", "xx")
    words = _corpus(tmp_path / "words", "the dog\n", "(NP the dog )NP\n")
    assert merge_training_files(words, words, tmp_path / "w", "words")["corpus"] == 1
    with pytest.raises(UserError, match=r"tb/train.tree:1: the leaves are not the words of"):
        merge_training_files(treebank, words, tmp_path / "out", "words")


@pytest.mark.parametrize(
    ("words", "trees", "message"),
    [
        ("a b\n", "(S XX )S\n", r"train.tree:1: 1 leaves for 2 words"),
        ("a\nb\n", "(S XX )S\n", "different numbers of lines"),
        ("a\n", "(S XX )S\n(S XX )S\n", "different numbers of lines"),
    ],
)
def test_merge_rejects_a_misaligned_corpus(tmp_path, words, trees, message):
    treebank = _corpus(tmp_path / "tb", "x\n", "(S XX )S\n")
    corpus = _corpus(tmp_path / "semi", words, trees)
    with pytest.raises(UserError, match=message):
        merge_training_files(treebank, corpus, tmp_path / "out")
    assert not (tmp_path / "out" / "train.words").exists()  # nothing half-written
    proc = _cli(
        "treebank",
        "merge",
        "--treebank",
        str(treebank),
        "--corpus",
        str(tmp_path / "none"),
        "--out",
        str(tmp_path / "out"),
    )
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
