"""``transformer-core export``: a checkpoint as a model folder another engine serves: CTranslate2,
or Hugging Face ``transformers`` (MarianMT)."""

from __future__ import annotations

import argparse
import sys

from transformer_core.commands import add_model_files
from transformer_core.settings import EXPORT_FORMATS, EXPORT_QUANTIZATIONS

HELP = (
    "Export a checkpoint and its sentencepiece model to a CTranslate2 model folder (the serve "
    "extra) or a transformers MarianMT folder (the hf extra)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_files(parser)
    parser.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="ctranslate2",
        help="the engine whose model folder is written: ctranslate2, or transformers "
        "(MarianMTModel and MarianTokenizer load it with from_pretrained) (default: ctranslate2)",
    )
    parser.add_argument(
        "--quantization",
        choices=EXPORT_QUANTIZATIONS,
        help="ctranslate2 only: the weight type stored: int8 and int16 quantize the matrices "
        "(activations are quantized as the model runs), float32 keeps them as trained "
        "(default: float32)",
    )
    parser.add_argument(
        "--score",
        metavar="JSON",
        help="transformers only: the model's `score` result, whose BLEU, signature, beam and "
        "alpha the model card states",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the model folder to write (replaced if it holds an earlier export)",
    )
    parser.add_argument(
        "--allow-vocab-mismatch",
        action="store_true",
        help="export even though the checkpoint records another sentencepiece model than --spm",
    )


def check_flags(args: argparse.Namespace) -> None:
    """Before the work: --quantization and --score each with its own format (--quantization
    float32 where left out), the format's extra installed (a missing one costs nothing), an
    --out that names a folder."""
    from transformer_core.errors import UserError

    if args.format == "transformers" and args.quantization is not None:
        raise UserError(
            f"--quantization {args.quantization} is CTranslate2's weight type: a transformers "
            "export keeps the float32 weights; leave it out, or give --format ctranslate2"
        )
    if args.format == "ctranslate2" and args.score is not None:
        raise UserError(
            "--score goes with --format transformers (its model card states the score); a "
            "CTranslate2 folder has no card"
        )
    args.quantization = args.quantization or "float32"
    if args.format == "ctranslate2":
        from transformer_core.export.ctranslate2 import require_ctranslate2

        require_ctranslate2()
    else:
        from transformer_core.export.transformers import require_transformers

        require_transformers()
    if not args.out.strip():  # Path("") is the working folder
        raise UserError("--out is empty; give the folder to write the model into")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from transformer_core.commands import check_outputs
    from transformer_core.decoding.translate import load_translation_model
    from transformer_core.export.card import card_facts, provenance, read_card_score
    from transformer_core.export.folder import check_export_dir
    from transformer_core.files import check_not_inputs, check_regular_file

    check_flags(args)
    check_regular_file(args.checkpoint, "--checkpoint")  # each read twice: hashed, then loaded
    check_regular_file(args.spm, "--spm")
    score = read_card_score(args.score) if args.score is not None else None
    check_not_inputs(
        {"--out": args.out},
        {"--checkpoint": args.checkpoint, "--spm": args.spm, "--score": args.score},
    )
    check_export_dir(Path(args.out))
    check_outputs(folders={"--out": args.out})
    model, sp = load_translation_model(
        args.checkpoint, args.spm, torch.device("cpu"), args.allow_vocab_mismatch
    )
    if args.format == "ctranslate2":
        from transformer_core.export.ctranslate2 import export_ctranslate2

        inputs = provenance(args.checkpoint, args.spm)
        out = export_ctranslate2(model, sp, args.spm, args.out, args.quantization, inputs)
        made = f"ctranslate2, {args.quantization}"
    else:
        from transformer_core.export.transformers import export_transformers

        facts = card_facts(args.checkpoint, args.spm, args.out, args.score, score)
        out = export_transformers(model, sp, args.spm, args.out, facts)
        made = "transformers, MarianMT"
    print(f"exported {args.checkpoint} to {out} ({made})", file=sys.stderr)
    return 0
