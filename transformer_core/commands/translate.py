"""``transformer-core translate``: beam-search a text file with a checkpoint and a sentencepiece model."""

from __future__ import annotations

import argparse
import sys

from transformer_core.commands import add_compile_argument, add_inference_arguments
from transformer_core.config import DecodeOptions
from transformer_core.parsing.trees import LINEARIZATIONS

HELP = "Decode a text file line by line with beam search (sentencepiece in and out, order kept)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    paper = DecodeOptions()
    parser.add_argument("--checkpoint", required=True, help="model checkpoint (.pt)")
    parser.add_argument(
        "--spm", required=True, help="sentencepiece model (.model) of the source and target"
    )
    parser.add_argument("--input", required=True, help="source text, one sentence per line")
    parser.add_argument("--output", required=True, help="output text, one line per input line")
    parser.add_argument(
        "--beam",
        type=int,
        default=paper.beam_size,
        help=f"beam size (default: {paper.beam_size}; 1 is greedy)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=paper.alpha,
        help=f"length penalty ((5+|Y|)/6)^alpha (default: {paper.alpha})",
    )
    parser.add_argument(
        "--max-len-a",
        type=float,
        default=paper.max_len_a,
        help=f"maximum output length = a * source length + b (default a: {paper.max_len_a})",
    )
    parser.add_argument(
        "--max-len-b", type=int, default=paper.max_len_b, help=f"(default b: {paper.max_len_b})"
    )
    parser.add_argument(
        "--tree-constraint",
        choices=LINEARIZATIONS,
        help="parsing: extend hypotheses only into well-formed trees of this linearization, "
        "with one leaf per source word (transformer_core/parsing/constraint.py; default: "
        "unconstrained, as the paper decodes)",
    )
    add_inference_arguments(
        parser,
        "source tokens",
        "decode even though the checkpoint records another sentencepiece model "
        "(its sha256) than --spm",
        "auto",
        "; scores stay fp32",
    )
    add_compile_argument(parser, "the encoder and the decoder's steps")


def run(args: argparse.Namespace) -> int:
    from transformer_core.device import cpu_threads, precision_name, setup_device, use_compile
    from transformer_core.io import atomic_write_text, check_input_file, check_output, read_lines
    from transformer_core.parsing.constraint import TreeConstraint
    from transformer_core.translate import Progress, load_translation_model, translate_lines

    options = DecodeOptions(args.beam, args.alpha, args.max_len_a, args.max_len_b)  # checks --beam
    check_output(args.output, "--output")  # before the decode, not after it
    check_input_file(args.input, "--input")
    device, autocast = setup_device(args.device, args.precision, args.num_threads)
    print(
        f"decoding on {device} ({cpu_threads()}), precision {precision_name(autocast)} "
        "(scores in fp32)",
        file=sys.stderr,
    )
    model, sp = load_translation_model(args.checkpoint, args.spm, device, args.allow_vocab_mismatch)
    constraint = None
    if args.tree_constraint:
        constraint = TreeConstraint.from_sentencepiece(sp, args.tree_constraint)
    lines = read_lines(args.input, strip_cr=True)  # a CRLF file translates as the same file in LF
    progress = Progress(len(lines), sys.stderr)
    outputs = translate_lines(
        model,
        sp,
        lines,
        options,
        args.max_tokens,
        autocast,
        source_name=args.input,
        progress=progress,
        compile=use_compile(device, args.compile, "decode"),
        constraint=constraint,
    )
    progress.report()
    atomic_write_text(args.output, "".join(line + "\n" for line in outputs))
    return 0
