"""``transformer-core score``: BLEU of a detokenized hypothesis file, both ways, as JSON."""

from __future__ import annotations

import argparse
import json

from transformer_core.errors import UserError
from transformer_core.evaluation.bleu import read_pair, score_lines
from transformer_core.evaluation.significance import line_intervals
from transformer_core.files import (
    atomic_write_text,
    check_input_file,
    check_not_inputs,
    check_output,
)
from transformer_core.settings import BootstrapSettings, add_options, settings_of

HELP = (
    "BLEU of a detokenized hypothesis file: paper-style (tokenized, ##AT##), sacreBLEU 13a, and "
    "the Multi30k literature's (lowercased, punctuation-normalized, Moses-tokenized)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hyp", required=True, help="detokenized system output, one line per segment (.gz ok)"
    )
    parser.add_argument(
        "--ref", required=True, help="detokenized reference, same number of lines (.gz ok)"
    )
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument(
        "--lang",
        default="de",
        help="target language of the Moses tokenizer of the paper-style and the lowercased "
        "tokenized scores (default: de)",
    )
    parser.add_argument(
        "--decoding",
        metavar="JSON",
        help="the decoding settings file (`decode_choice`'s) the hypothesis was decoded with: "
        "its beam, alpha and their origin are recorded beside the score (left out: translate's "
        "record beside the hypothesis file, where there is one)",
    )
    add_options(parser, BootstrapSettings)


def run(args: argparse.Namespace) -> int:
    bootstrap = settings_of(BootstrapSettings, args)
    check_input_file(args.hyp, "--hyp")
    check_input_file(args.ref, "--ref")
    check_output(args.out, "--out")
    check_not_inputs(
        {"--out": args.out},
        {"--hyp": args.hyp, "--ref": args.ref, "--decoding": args.decoding},
    )
    from transformer_core.decoding.dev_choice import (
        decoding_summary,
        read_settings,
        recorded_translation,
    )

    decoding = recorded_translation(args.hyp)  # translate's record of these translations
    if args.decoding is not None:
        given = decoding_summary(read_settings(args.decoding))
        if decoding and (decoding["beam"], decoding["alpha"]) != (given["beam"], given["alpha"]):
            raise UserError(
                f"--decoding {args.decoding} says beam {given['beam']} and alpha "
                f"{given['alpha']:g}, but {args.hyp} was decoded with beam {decoding['beam']} "
                f"and alpha {decoding['alpha']:g} (its translate record)"
            )
        decoding = given
    hyps, refs = read_pair(args.hyp, args.ref)  # once: a pipe can be read only once
    if not hyps and not refs:
        raise UserError(f"{args.hyp} and {args.ref} are both empty: there is nothing to score")
    result = score_lines(hyps, refs, args.lang, args.hyp, args.ref)
    if bootstrap.resamples:
        result |= line_intervals(hyps, refs, bootstrap.resamples, bootstrap.seed, args.lang)
    if decoding is not None:
        result["decoding"] = decoding
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    intervals = {
        name: f" (mu {ci['mean']:.2f} +- {ci['half_width']:.2f})"
        for name in ("bleu_paper_style", "sacrebleu", "bleu_lowercased_tokenized")
        if (ci := result.get(f"{name}_ci"))
    }
    print(
        f"BLEU paper-style {result['bleu_paper_style']:.2f}{intervals.get('bleu_paper_style', '')}, "
        f"sacreBLEU {result['sacrebleu']:.2f}{intervals.get('sacrebleu', '')} "
        f"({result['sacrebleu_signature']}), lowercased tokenized "
        f"{result['bleu_lowercased_tokenized']:.2f}"
        f"{intervals.get('bleu_lowercased_tokenized', '')}, {result['n_lines']} lines"
    )
    return 0
