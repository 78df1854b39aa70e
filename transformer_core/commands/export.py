"""``transformer-core export``: a checkpoint as a model folder another engine serves (CTranslate2)."""

from __future__ import annotations

import argparse
import sys

from transformer_core.commands import add_model_files
from transformer_core.settings import EXPORT_FORMATS, EXPORT_QUANTIZATIONS

HELP = (
    "Export a checkpoint and its sentencepiece model to a CTranslate2 model folder "
    "(needs the serve extra: pip install -e '.[serve]')."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_files(parser)
    parser.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="ctranslate2",
        help="the engine whose model folder is written (default: ctranslate2)",
    )
    parser.add_argument(
        "--quantization",
        choices=EXPORT_QUANTIZATIONS,
        default="float32",
        help="the weight type stored: int8 and int16 quantize the matrices (activations are "
        "quantized as the model runs), float32 keeps them as trained (default: float32)",
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


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from transformer_core.commands import check_outputs
    from transformer_core.decoding.export import (
        check_export_dir,
        export_ctranslate2,
        require_ctranslate2,
    )
    from transformer_core.decoding.translate import load_translation_model
    from transformer_core.files import check_input_file, sha256_of

    require_ctranslate2()  # before the work: a missing extra costs nothing
    check_input_file(args.checkpoint, "--checkpoint")
    check_input_file(args.spm, "--spm")
    check_export_dir(Path(args.out))
    check_outputs(folders={"--out": args.out})
    model, sp = load_translation_model(
        args.checkpoint, args.spm, torch.device("cpu"), args.allow_vocab_mismatch
    )
    provenance = {
        "checkpoint": str(args.checkpoint),
        "checkpoint_sha256": sha256_of(args.checkpoint),
        "spm_sha256": sha256_of(args.spm),
    }
    out = export_ctranslate2(model, sp, args.spm, args.out, args.quantization, provenance)
    print(
        f"exported {args.checkpoint} to {out} ({args.format}, {args.quantization})", file=sys.stderr
    )
    return 0
