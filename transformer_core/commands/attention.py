"""``transformer-core attention``: the paper's Figures 3-5 (encoder self-attention) from a checkpoint."""

from __future__ import annotations

import argparse
import dataclasses

from transformer_core.commands import add_model_files
from transformer_core.settings import RuntimeSettings, add_options, settings_of

HELP = "Draw the paper's Figures 3-5: encoder self-attention of a trained model on its example sentences."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from transformer_core.paper import ATTENTION_FIGURES

    add_model_files(
        parser, "a translation model (EN source)", "the sentencepiece model of its data"
    )
    parser.add_argument(
        "--figure",
        nargs=2,
        action="append",
        required=True,
        metavar=("NAME", "PNG"),
        help="a figure to draw and its file; NAME is one of "
        + ", ".join(f"{f.name} (Figure {f.number})" for f in ATTENTION_FIGURES)
        + "; repeatable",
    )
    parser.add_argument(
        "--allow-vocab-mismatch",
        action="store_true",
        help="draw even if the checkpoint's data was encoded with another sentencepiece model",
    )
    add_options(parser, RuntimeSettings, only=("device", "num_threads"))


def run(args: argparse.Namespace) -> int:
    from transformer_core.decoding.translate import encode_lines, load_translation_model
    from transformer_core.device import setup_device
    from transformer_core.errors import UserError
    from transformer_core.figures.attention_maps import encoder_attention, figure_layer
    from transformer_core.figures.draw import draw_figure
    from transformer_core.files import check_input_file, check_output
    from transformer_core.paper import ATTENTION_FIGURES

    known = {figure.name: figure for figure in ATTENTION_FIGURES}
    for name, path in args.figure:
        if name not in known:
            raise UserError(f"--figure {name}: unknown figure; known: {', '.join(known)}")
        check_output(path, "--figure")
    check_input_file(args.spm, "--spm")
    runtime = settings_of(RuntimeSettings, args)  # precision fp32: the weights as trained
    device, _ = setup_device(dataclasses.replace(runtime, precision="fp32"))
    model, sp = load_translation_model(args.checkpoint, args.spm, device, args.allow_vocab_mismatch)
    layer = figure_layer(len(model.encoder_layers))
    label = args.checkpoint
    for name, path in args.figure:
        figure = known[name]
        (ids,) = encode_lines(model, sp, [figure.sentence], f"figure {name}")
        attention = encoder_attention(model, ids, sp.id_to_piece(ids), layer)
        draw_figure(figure, attention, path, label)
        print(f"Figure {figure.number} ({name}): layer {layer}, {len(ids) + 1} positions -> {path}")
    return 0
