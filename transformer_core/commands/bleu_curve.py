"""``transformer-core bleu_curve``: dev BLEU of a run's kept checkpoints, for BLEU against steps."""

from __future__ import annotations

import argparse
import sys

from transformer_core.commands import add_decode_arguments, decode_options
from transformer_core.settings import CurveSettings, InferenceSettings, add_options, settings_of

HELP = (
    "Decode the dev set with a run's kept checkpoints and score each: BLEU against training steps."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", required=True, help="the training run's folder")
    parser.add_argument("--spm", required=True, help="sentencepiece model of the run's data")
    parser.add_argument("--input", required=True, help="dev source text, one sentence per line")
    parser.add_argument("--ref", required=True, help="dev reference, detokenized")
    parser.add_argument("--lang", default="de", help="target language (default: de)")
    add_options(parser, CurveSettings)
    add_decode_arguments(parser, settings_file=True)
    parser.add_argument("--out", required=True, help="JSON output: one point per checkpoint")
    add_options(parser, InferenceSettings)
    parser.add_argument(
        "--detokenize",
        metavar="LANG",
        help="the model writes Moses-tokenized text (its data was prepared with --tokenize): "
        "write running text instead, unescaped and detokenized by the Moses rules of LANG",
    )
    parser.add_argument(
        "--allow-vocab-mismatch",
        action="store_true",
        help="decode even though the checkpoints record another sentencepiece model than --spm",
    )


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import sentencepiece as spm

    from transformer_core.decoding.inference import resolve_inference
    from transformer_core.decoding.translate import check_vocabulary, translate_lines
    from transformer_core.errors import UserError
    from transformer_core.evaluation.bleu import read_pair
    from transformer_core.evaluation.curves import bleu_by_step, spaced
    from transformer_core.files import atomic_write_text, check_not_inputs, check_output, read_lines
    from transformer_core.model.checkpoint import (
        check_spm,
        list_checkpoints,
        load_checkpoint,
        model_from_payload,
    )

    options = decode_options(args)
    runtime = settings_of(InferenceSettings, args)
    curve = settings_of(CurveSettings, args)
    check_output(args.out, "--out")
    check_not_inputs(
        {"--out": args.out},
        {
            "--input": args.input,
            "--ref": args.ref,
            "--spm": args.spm,
            "--decode-settings": args.decode_settings,
        },
    )
    _, refs = read_pair(args.input, args.ref)  # same line counts, else an error
    checkpoints = spaced(list_checkpoints(Path(args.run_dir) / "checkpoints"), curve.checkpoints)
    if not checkpoints:
        raise UserError(f"{args.run_dir}/checkpoints holds no step_*.pt checkpoint")
    inference = resolve_inference(runtime)
    try:
        sp = spm.SentencePieceProcessor(model_file=args.spm)
    except (OSError, RuntimeError) as err:
        raise UserError(f"cannot load sentencepiece model {args.spm}: {err}") from err
    lines = read_lines(args.input, strip_cr=True)

    def translate(path):
        payload = load_checkpoint(path, map_location=inference.device)
        check_spm(payload, path, args.spm, args.allow_vocab_mismatch)
        model = model_from_payload(payload, path, map_location=inference.device)
        check_vocabulary(model, sp, args.spm)
        print(f"decoding {len(lines)} lines with {path}", file=sys.stderr)
        outputs = translate_lines(model, sp, lines, options, inference.decoding, args.input)
        if args.detokenize:
            from transformer_core.data.moses import detokenize

            outputs = [detokenize(line, args.detokenize) for line in outputs]
        return outputs

    points = bleu_by_step(checkpoints, translate, refs, args.lang)
    record = {"run_dir": args.run_dir, "input": args.input, "ref": args.ref, "points": points}
    atomic_write_text(args.out, json.dumps(record, indent=2) + "\n")
    for point in points:
        print(
            f"step {point['step']}: BLEU {point['bleu_paper_style']:.2f}, sacreBLEU "
            f"{point['sacrebleu']:.2f}, lowercased tokenized {point['bleu_lowercased_tokenized']:.2f}"
        )
    return 0
