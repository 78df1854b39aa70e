"""Treebanks for Table 4 and the files the parsing experiment reads.

Sources: the WSJ part of the Penn Treebank in the LDC layout (sections 02-21
train, 22 dev, 23 test; the user supplies it, it cannot be downloaded), and
NLTK's free 10% sample of it (a real-data check). Both are cleaned (traces and
function tags removed) and written as the same parallel files:

- ``{split}.words``: the sentence, space-separated (the model's input);
- ``{split}.tree``: its linearized tree (the model's output), with ``XX``, each
  word's tag or the word itself at the leaves (``trees.LINEARIZATIONS``);
- ``{split}.tags`` and ``{split}.gold`` for dev and test: gold part-of-speech tags
  (``treebank delinearize`` gives them back to predicted trees, so that EVALB
  deletes the same punctuation on both sides) and gold trees for EVALB.

The semi-supervised setting adds a parsed corpus the user supplies (the
paper's 17M sentences are not public) in the same format, ``train.words`` and
``train.tree``, to the treebank's training files (``merge_training_files``).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from itertools import zip_longest
from pathlib import Path

from transformer_core.errors import UserError
from transformer_core.files import atomic_open
from transformer_core.parsing.trees import (
    POS_PLACEHOLDER,
    Tree,
    check_linearization,
    clean,
    is_bracket,
    leaves_of,
    linearize,
    parse_trees,
)

SPLITS = ("train", "dev", "test")
WSJ_SECTIONS = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}
_WSJ_LAYOUT = (
    "expected the LDC layout DIR/wsj/SS/wsj_SSNN.mrg or DIR/SS/wsj_SSNN.mrg with sections 02-23 "
    "(for example treebank_3/parsed/mrg, or its wsj folder)"
)
NLTK_MEMBER_PREFIX = "treebank/combined/wsj_"


def clean_all(trees: Iterable[Tree]) -> list[Tree]:
    """Cleaned trees; a tree with nothing but traces is dropped."""
    return [t for t in (clean(tree) for tree in trees) if t is not None]


def wsj_section_files(directory: str | os.PathLike) -> dict[str, list[Path]]:
    """The .mrg files of each split, from a WSJ treebank folder in the LDC layout."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such directory; {_WSJ_LAYOUT}")
    root = directory / "wsj" if (directory / "wsj").is_dir() else directory
    files: dict[str, list[Path]] = {}
    missing = []
    for split, sections in WSJ_SECTIONS.items():
        files[split] = []
        for section in sections:
            found = sorted((root / f"{section:02d}").glob(f"wsj_{section:02d}[0-9][0-9].mrg"))
            if not found:
                missing.append(f"{section:02d}")
            files[split].extend(found)
    if len(missing) == sum(len(sections) for sections in WSJ_SECTIONS.values()):
        raise UserError(f"{root}: no WSJ section folders with wsj_SSNN.mrg files; {_WSJ_LAYOUT}")
    if missing:
        raise UserError(
            f"{root}: no wsj_SSNN.mrg files for section(s) {', '.join(missing)}; {_WSJ_LAYOUT}"
        )
    return files


def read_wsj(directory: str | os.PathLike) -> dict[str, list[Tree]]:
    """Cleaned trees of the standard splits: 02-21 train, 22 dev, 23 test."""
    splits = {}
    for split, paths in wsj_section_files(directory).items():
        trees: list[Tree] = []
        for path in paths:
            trees.extend(parse_trees(path.read_text(encoding="utf-8", errors="replace"), str(path)))
        splits[split] = clean_all(trees)
    return splits


def nltk_files(zip_path: str | os.PathLike, held_out_files: int) -> list[str]:
    """The sorted ``.mrg`` members of NLTK's treebank.zip, checked to leave training files
    after ``held_out_files`` dev and as many test files; a UserError naming the zip else."""
    zip_path = Path(zip_path)
    try:
        archive = zipfile.ZipFile(zip_path)
    except FileNotFoundError:
        raise UserError(f"{zip_path}: no such file") from None
    except zipfile.BadZipFile:
        raise UserError(f"{zip_path}: not a zip file") from None
    with archive:
        names = sorted(
            n for n in archive.namelist() if n.startswith(NLTK_MEMBER_PREFIX) and n.endswith(".mrg")
        )
    if not names:
        raise UserError(f"{zip_path}: no {NLTK_MEMBER_PREFIX}*.mrg members (NLTK's treebank.zip?)")
    if held_out_files < 1 or 2 * held_out_files >= len(names):
        raise UserError(
            f"--test-files {held_out_files}: need 1 <= N and 2N < {len(names)} files in {zip_path}"
        )
    return names


def read_nltk_sample(zip_path: str | os.PathLike, held_out_files: int) -> dict[str, list[Tree]]:
    """Cleaned trees of NLTK's treebank.zip: the last N files are test, the N before them dev."""
    names = nltk_files(zip_path, held_out_files)
    with zipfile.ZipFile(zip_path) as archive:
        n = held_out_files
        groups = {"train": names[: -2 * n], "dev": names[-2 * n : -n], "test": names[-n:]}
        return {
            split: clean_all(
                tree
                for name in members
                for tree in parse_trees(archive.read(name).decode("utf-8", errors="replace"), name)
            )
            for split, members in groups.items()
        }


def write_parsing_corpus(
    out: str | os.PathLike, splits: dict[str, list[Tree]], linearization: str = "xx"
) -> dict[str, int]:
    """Write the parallel files of every split (see the module docstring); return tree counts."""
    check_linearization(linearization)
    out = Path(out)
    for split in SPLITS:
        trees = splits[split]
        if not trees:
            raise UserError(f"the {split} split has no trees")
        _write_lines(out / f"{split}.words", (" ".join(t.words()) for t in trees))
        _write_lines(out / f"{split}.tree", (" ".join(linearize(t, linearization)) for t in trees))
        if split != "train":
            _write_lines(out / f"{split}.tags", (" ".join(t.tags()) for t in trees))
            _write_lines(out / f"{split}.gold", (str(t) for t in trees))
    return {split: len(splits[split]) for split in SPLITS}


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with atomic_open(path) as handle:
        for line in lines:
            handle.write(line + "\n")


def merge_training_files(
    treebank: str | os.PathLike,
    corpus: str | os.PathLike,
    out: str | os.PathLike,
    linearization: str = "xx",
) -> dict[str, int]:
    """``OUT/train.{words,tree}``: the treebank's training pairs, then the corpus's.

    Streams both; every line is checked as it is copied: as many leaves in the tree
    (``XX``, tags for ``tags``, the sentence's own words for ``words``) as words in the sentence, and as many lines in both files
    (a misaligned corpus would otherwise train on nonsense without a sign).
    Returns the pair counts of each part.
    """
    treebank, corpus, out = Path(treebank), Path(corpus), Path(out)
    counts = {}
    with atomic_open(out / "train.words") as words_out, atomic_open(out / "train.tree") as tree_out:
        for name, folder in (("treebank", treebank), ("corpus", corpus)):
            counts[name] = _copy_pairs(
                folder / "train.words", folder / "train.tree", words_out, tree_out, linearization
            )
    return counts


def _copy_pairs(words_path: Path, tree_path: Path, words_out, tree_out, linearization: str) -> int:
    for path in (words_path, tree_path):
        if not path.is_file():
            raise UserError(f"{path}: no such file")
    count = 0
    with open(words_path, encoding="utf-8") as words, open(tree_path, encoding="utf-8") as trees:
        for count, (sentence, tree) in enumerate(zip_longest(words, trees), start=1):
            if sentence is None or tree is None:
                raise UserError(f"{words_path} and {tree_path} have different numbers of lines")
            tokens = tree.split()
            if linearization == "tags" and POS_PLACEHOLDER in tokens:
                raise UserError(
                    f"{tree_path}:{count}: an {POS_PLACEHOLDER} leaf, but table4.linearization is "
                    "'tags' (each leaf a part-of-speech tag): linearize the corpus the same way"
                )
            if linearization == "words":
                leaf_words = [token for token in tokens if not is_bracket(token)]
                if leaf_words != sentence.split():
                    raise UserError(
                        f"{tree_path}:{count}: the leaves are not the words of "
                        f"{words_path}:{count}, but table4.linearization is 'words' (each leaf "
                        "the word itself): linearize the corpus the same way"
                    )
            leaves = leaves_of(tokens, linearization)
            if leaves != len(sentence.split()):
                raise UserError(
                    f"{tree_path}:{count}: {leaves} leaves for {len(sentence.split())} words in "
                    f"{words_path}:{count} (a tree linearized as table4.linearization "
                    f"{linearization!r} has one leaf token per word)"
                )
            words_out.write(sentence.rstrip("\n") + "\n")
            tree_out.write(tree.rstrip("\n") + "\n")
    return count
