"""``transformer-core treebank``: parsing data for Table 4, and trees back from model output.

Actions: ``wsj`` (the user's LDC WSJ treebank), ``smoke`` (a generated treebank),
``nltk`` (NLTK's free WSJ sample) write ``OUT/{train,dev,test}.{words,tree}`` plus
``OUT/{dev,test}.{tags,gold}``; ``merge`` adds a parsed corpus to a treebank's
training files (the semi-supervised setting); ``delinearize`` turns predicted
sequences into repaired trees for EVALB.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from transformer_core.commands import check_outputs
from transformer_core.errors import UserError
from transformer_core.files import atomic_open, read_lines
from transformer_core.settings import TreebankSettings, add_options, parse_seed

HELP = (
    "Treebank files for parsing (wsj, smoke, nltk; merge for semi-supervised training) "
    "and predicted trees for EVALB (delinearize)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    wsj = actions.add_parser("wsj", help="WSJ sections 02-21/22/23 from an LDC treebank folder")
    wsj.add_argument(
        "--dir", required=True, help="folder with wsj/SS/wsj_SSNN.mrg or SS/wsj_SSNN.mrg"
    )
    wsj.add_argument("--out", required=True, help="output folder")
    add_options(wsj, TreebankSettings)

    smoke = actions.add_parser(
        "smoke", help="a small treebank generated from a probabilistic grammar"
    )
    smoke.add_argument("--out", required=True, help="output folder")
    add_options(smoke, TreebankSettings)
    smoke.add_argument("--seed", type=parse_seed, default=0, help="random seed (default: 0)")
    smoke.add_argument("--train", type=int, default=3000, help="training trees (default: 3000)")
    smoke.add_argument("--dev", type=int, default=250, help="dev trees (default: 250)")
    smoke.add_argument("--test", type=int, default=250, help="test trees (default: 250)")

    nltk = actions.add_parser("nltk", help="NLTK's Penn Treebank sample (treebank.zip)")
    nltk.add_argument(
        "--zip", required=True, help="NLTK's treebank.zip (treebank/combined/wsj_*.mrg)"
    )
    nltk.add_argument("--out", required=True, help="output folder")
    add_options(nltk, TreebankSettings)
    nltk.add_argument(
        "--test-files",
        type=int,
        default=20,
        help="the last N files are test, the N before them dev (default: 20)",
    )

    merge = actions.add_parser(
        "merge", help="training files of a treebank followed by a parsed corpus's (semi-supervised)"
    )
    merge.add_argument(
        "--treebank",
        required=True,
        help="folder with train.words and train.tree (this command's output)",
    )
    merge.add_argument(
        "--corpus",
        required=True,
        help="folder with a parsed corpus in the same format: train.words and train.tree",
    )
    merge.add_argument("--out", required=True, help="output folder: train.words and train.tree")
    add_options(merge, TreebankSettings)

    delin = actions.add_parser(
        "delinearize", help="predicted sequences -> repaired trees for EVALB"
    )
    delin.add_argument("--words", required=True, help="the input sentences, one per line")
    delin.add_argument("--pred", required=True, help="predicted linearized trees, one per line")
    delin.add_argument("--out", required=True, help="trees, one per line, rooted at TOP")
    delin.add_argument(
        "--tags",
        help="gold part-of-speech tags, one line per sentence (OUT/test.tags); without them "
        "every tag is XX (or the predicted one, with --linearization tags) and EVALB cannot "
        "delete punctuation",
    )
    add_options(delin, TreebankSettings)


def run(args: argparse.Namespace) -> int:
    if args.action == "delinearize":
        check_outputs({"--out": args.out})
        return _delinearize(args)
    check_outputs(folders={"--out": args.out})
    from transformer_core.parsing.corpora import (
        merge_training_files,
        read_nltk_sample,
        read_wsj,
        write_parsing_corpus,
    )

    if args.action == "merge":
        counts = merge_training_files(args.treebank, args.corpus, args.out, args.linearization)
        print(
            f"train: {counts['treebank']} treebank + {counts['corpus']} corpus pairs -> {args.out}"
        )
        return 0

    if args.action == "wsj":
        splits = read_wsj(args.dir)
    elif args.action == "nltk":
        splits = read_nltk_sample(args.zip, args.test_files)
    else:
        from transformer_core.parsing.smoke import generate_treebank

        sizes = {"train": args.train, "dev": args.dev, "test": args.test}
        if min(sizes.values()) < 1:
            raise UserError(f"every split needs at least one tree, not {sizes}")
        splits = generate_treebank(sizes, args.seed)
    counts = write_parsing_corpus(args.out, splits, args.linearization)
    print(", ".join(f"{split} {n} trees" for split, n in counts.items()) + f" -> {args.out}")
    return 0


def _delinearize(args: argparse.Namespace) -> int:
    from transformer_core.parsing.trees import Repairs, delinearize

    words, preds = read_lines(args.words), read_lines(args.pred)
    tags = read_lines(args.tags) if args.tags else None
    if len(words) != len(preds) or (tags is not None and len(tags) != len(words)):
        counts = f"words {args.words}: {len(words)}, pred {args.pred}: {len(preds)}"
        if tags is not None:
            counts += f", tags {args.tags}: {len(tags)}"
        raise UserError(f"line counts differ: {counts}")
    totals = {f.name: 0 for f in fields(Repairs)}
    repaired = 0
    with atomic_open(args.out) as out:
        for i, (sentence, pred) in enumerate(zip(words, preds, strict=True)):
            sentence_words = sentence.split()
            sentence_tags = tags[i].split() if tags is not None else None
            if sentence_tags is not None and len(sentence_tags) != len(sentence_words):
                raise UserError(
                    f"{args.tags}:{i + 1}: {len(sentence_tags)} tags for {len(sentence_words)} words"
                )
            tree, repairs = delinearize(
                pred.split(), sentence_words, sentence_tags, args.linearization
            )
            out.write(f"{tree}\n")
            repaired += bool(repairs)
            for name in totals:
                totals[name] += getattr(repairs, name)
    details = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in totals.items() if n)
    print(f"{len(words)} trees, {repaired} repaired" + (f" ({details})" if details else ""))
    return 0
