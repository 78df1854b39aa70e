"""``transformer-core translate``: beam-search a text file with a checkpoint and a sentencepiece model."""

from __future__ import annotations

import argparse
import sys

from transformer_core.commands import add_decode_arguments, add_model_files, decode_options
from transformer_core.settings import QUANTIZE_MODES, InferenceSettings, add_options, settings_of

HELP = "Decode a text file line by line with beam search (sentencepiece in and out, order kept)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_files(parser)
    parser.add_argument("--input", required=True, help="source text, one sentence per line")
    parser.add_argument("--output", required=True, help="output text, one line per input line")
    add_decode_arguments(parser, settings_file=True)
    add_options(parser, InferenceSettings)
    parser.add_argument(
        "--allow-vocab-mismatch",
        action="store_true",
        help="decode even though the checkpoint records another sentencepiece model (its "
        "sha256) than --spm",
    )
    parser.add_argument(
        "--detokenize",
        metavar="LANG",
        help="the model writes Moses-tokenized text (its data was prepared with --tokenize): "
        "write running text instead, unescaped and detokenized by the Moses rules of LANG",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_MODES,
        default="off",
        help="int8: decode with dynamic int8 matrix products (CPU, FBGEMM; activations and "
        "everything else fp32, so --precision auto means fp32 here; BLEU beside fp32 in "
        "docs/ctranslate2.md) (default: off)",
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.decoding.dev_choice import record_translation
    from transformer_core.decoding.inference import resolve_inference
    from transformer_core.decoding.translate import (
        Progress,
        load_translation_model,
        translate_lines,
    )
    from transformer_core.files import (
        atomic_write_text,
        check_input_file,
        check_not_inputs,
        check_output,
        read_lines,
    )

    options = decode_options(args)  # checks --beam
    runtime = settings_of(InferenceSettings, args)
    check_output(args.output, "--output")  # before the decode, not after it
    check_input_file(args.input, "--input")
    check_not_inputs(
        {"--output": args.output},
        {
            "--input": args.input,
            "--checkpoint": args.checkpoint,
            "--spm": args.spm,
            "--decode-settings": args.decode_settings,
        },
    )
    inference = resolve_inference(runtime, int8=args.quantize == "int8")
    print(
        f"{inference.describe()}, beam {options.beam}, alpha {options.alpha:g}"
        + (f" (from {args.decode_settings})" if args.decode_settings else ""),
        file=sys.stderr,
    )
    model, sp = load_translation_model(
        args.checkpoint, args.spm, inference.device, args.allow_vocab_mismatch
    )
    lines = read_lines(args.input, strip_cr=True)  # a CRLF file translates as the same file in LF
    progress = Progress(len(lines), sys.stderr)
    outputs = translate_lines(model, sp, lines, options, inference.decoding, args.input, progress)
    progress.report()
    if args.detokenize:
        from transformer_core.data.moses import detokenize

        outputs = [detokenize(line, args.detokenize) for line in outputs]
    atomic_write_text(args.output, "".join(line + "\n" for line in outputs))
    record_translation(args.output, options.beam, options.alpha, args.decode_settings)
    return 0
