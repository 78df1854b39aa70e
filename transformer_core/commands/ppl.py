"""``transformer-core ppl``: per-word-piece perplexity of a checkpoint on a binarized split."""

from __future__ import annotations

import argparse
import json
import math
import sys

from transformer_core.commands import add_model_files
from transformer_core.errors import UserError
from transformer_core.settings import InferenceSettings, add_options, settings_of

HELP = "Perplexity per target word piece (no label smoothing) of a checkpoint on a binarized split."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_files(parser, spm_help=None)
    parser.add_argument(
        "--data", required=True, help="binarized split prefix (PREFIX.json, PREFIX.src.bin, ...)"
    )
    parser.add_argument("--out", required=True, help="JSON file to write")
    add_options(
        parser,
        InferenceSettings,
        only=("device", "precision", "num_threads", "max_tokens"),
        defaults={"precision": "fp32"},
        notes={"precision": "; fp32 is the reported number, and cheap"},
    )
    parser.add_argument(
        "--allow-vocab-mismatch",
        action="store_true",
        help="score even though the data was encoded with another sentencepiece model (sha256) "
        "than the checkpoint's training data",
    )


def run(args: argparse.Namespace) -> int:
    from transformer_core.data.binarized import read_header
    from transformer_core.decoding.inference import resolve_inference
    from transformer_core.device import precision_name
    from transformer_core.evaluation.perplexity import dataset_perplexity
    from transformer_core.files import atomic_write_text, check_not_inputs, check_output
    from transformer_core.model.checkpoint import (
        check_data_fingerprint,
        load_checkpoint,
        model_from_payload,
    )

    runtime = settings_of(InferenceSettings, args)
    check_output(args.out, "--out")
    check_not_inputs({"--out": args.out}, {"--checkpoint": args.checkpoint})
    inference = resolve_inference(runtime)  # ppl has no --compile: it scores eagerly
    device, autocast = inference.device, inference.decoding.autocast
    payload = load_checkpoint(args.checkpoint, map_location=device)
    check_data_fingerprint(
        payload, args.checkpoint, read_header(args.data), args.data, args.allow_vocab_mismatch
    )
    model = model_from_payload(payload, args.checkpoint, map_location=device)
    result = dataset_perplexity(model, args.data, runtime.max_tokens, autocast)
    if not math.isfinite(result.perplexity):
        raise UserError(
            f"{args.checkpoint}: perplexity on {args.data} is {result.perplexity} (NLL per token "
            f"{result.nll_per_token}): the model diverged; use an earlier checkpoint"
        )
    report = {
        **result.to_dict(),
        "checkpoint": str(args.checkpoint),
        "data": str(args.data),
        "precision": precision_name(autocast),
    }
    atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
    print(
        f"ppl: {result.perplexity:.4f} over {result.tokens} target tokens "
        f"({result.sentences} sentences)",
        file=sys.stderr,
    )
    return 0
