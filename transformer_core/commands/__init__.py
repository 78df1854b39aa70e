"""One module per ``transformer-core`` subcommand.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. A command is a thin wrapper: it parses, calls pure
library functions, and writes outputs atomically. Heavy imports (torch) go
inside ``run`` so ``transformer-core --help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses

from transformer_core.decoding.dev_choice import CHOSEN_FIELDS
from transformer_core.errors import UserError
from transformer_core.model.config import BASE
from transformer_core.settings import (
    DecodeSettings,
    add_option,
    add_options,
    flag_values,
    flagged_fields,
)


def add_model_files(
    parser: argparse.ArgumentParser,
    checkpoint_help: str = "model checkpoint (.pt)",
    spm_help: str | None = "sentencepiece model (.model) of the source and target",
) -> None:
    """--checkpoint and --spm of the commands that load a trained model; ``spm_help`` None
    leaves --spm out (``ppl`` reads binarized data)."""
    parser.add_argument("--checkpoint", required=True, help=checkpoint_help)
    if spm_help is not None:
        parser.add_argument("--spm", required=True, help=spm_help)


def add_paper_vocabulary(parser: argparse.ArgumentParser, json_help: str) -> None:
    """--vocab-size and --json of the commands that count the paper's models (``params``,
    ``flops``): the vocabulary defaults to the model config's, the paper's EN-DE one."""
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=BASE.vocab_size,
        help=f"shared vocabulary size (default: {BASE.vocab_size}, the paper's EN-DE vocabulary)",
    )
    parser.add_argument("--json", action="store_true", help=json_help)


def add_records(
    parser: argparse.ArgumentParser, flag: str, fields: tuple[str, ...], help: str, required: bool
) -> None:
    """A repeatable option that names one training run's files per use (``table2 --result``,
    ``table3_row --run``, ``table4 --result``): ``fields`` are its values' names."""
    parser.add_argument(
        flag, nargs=len(fields), action="append", default=[], required=required, metavar=fields,
        help=f"{help}; repeatable",
    )  # fmt: skip


def add_decode_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    defaults: DecodeSettings | None = None,
    settings_file: bool = False,
) -> None:
    """The search flags of the commands that decode: one per flagged ``DecodeSettings`` field,
    with its help and its value in ``defaults`` (default: the paper's translation search).
    ``settings_file``: also ``--decode-settings``, a file of ``decode_choice`` that gives the
    beam and alpha instead (then --beam and --alpha default to None, ``decode_options``
    filling them in)."""
    defaults = dataclasses.asdict(defaults or DecodeSettings())
    if not settings_file:
        add_options(parser, DecodeSettings, defaults=defaults)
        return
    for f in flagged_fields(DecodeSettings):
        if f.name in CHOSEN_FIELDS:
            add_option(parser, f, None, f"{defaults[f.name]}, or --decode-settings'")
        else:
            add_option(parser, f, defaults[f.name], str(defaults[f.name]))
    parser.add_argument(
        "--decode-settings",
        metavar="JSON",
        help="the beam and alpha of this file of `decode_choice` (as configured, or chosen on "
        "the dev set), instead of --beam and --alpha",
    )


def decode_options(args: argparse.Namespace) -> DecodeSettings:
    """The ``DecodeSettings`` of ``add_decode_arguments``'s flags (checks them: ``--beam``),
    the beam and alpha from ``--decode-settings`` where it is given."""
    values = flag_values(DecodeSettings, args)
    path = getattr(args, "decode_settings", None)
    if path is not None:
        from transformer_core.decoding.dev_choice import read_settings

        given = [f"--{name}" for name in CHOSEN_FIELDS if values[name] is not None]
        if given:
            raise UserError(
                f"--decode-settings {path} gives the beam and alpha: leave out {' and '.join(given)}"
            )
        record = read_settings(path)
        values.update({name: record[name] for name in CHOSEN_FIELDS})
    paper = DecodeSettings()
    values.update({name: getattr(paper, name) for name in CHOSEN_FIELDS if values[name] is None})
    return DecodeSettings(**values)


def check_outputs(
    files: dict[str, object] | None = None, folders: dict[str, object] | None = None
) -> None:
    """Before any work: each output file (option name -> path) and folder can be written
    (``files.check_output``, ``files.check_output_dir``: not a folder or file in the way, the
    nearest existing folder accepts a new file). None paths (options not given) are skipped."""
    from transformer_core.files import check_output, check_output_dir

    for option, path in (files or {}).items():
        if path is not None:
            check_output(path, option)
    for option, path in (folders or {}).items():
        if path is not None:
            check_output_dir(path, option)
