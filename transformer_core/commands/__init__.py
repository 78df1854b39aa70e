"""One module per ``transformer-core`` subcommand.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. A command is a thin wrapper: it parses, calls pure
library functions, and writes outputs atomically. Heavy imports (torch) go
inside ``run`` so ``transformer-core --help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from transformer_core.decoding.dev_choice import CHOSEN_FIELDS
from transformer_core.errors import UserError
from transformer_core.model.config import BASE
from transformer_core.settings import DecodeOptions, flagged_fields


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


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    f: dataclasses.Field,
    default: Any,
    shown: str,
    note: str = "",
) -> None:
    """The flag of a flagged settings field (``settings.option``): its type, choices, metavar
    and help from the field, ``default`` as parsed, ``shown`` as the help's default, ``note`` a
    command's own words after the help. A boolean field is a ``--flag`` / ``--no-flag`` pair."""
    meta = f.metadata
    help = meta["help"] + note
    if isinstance(f.default, bool):  # --flag / --no-flag; None: the command's config decides
        on = f.default if default is None else default
        parser.add_argument(
            meta["flag"], dest=f.name, action=argparse.BooleanOptionalAction, default=default,
            help=f"{help} (default: {'on' if on else 'off'})",
        )  # fmt: skip
        return
    choices = meta.get("choices")
    metavar = None if choices else meta["flag"].removeprefix("--").upper().replace("-", "_")
    parser.add_argument(
        meta["flag"],
        dest=f.name,
        metavar=meta.get("metavar", metavar),
        type=meta.get("type", type(f.default)),
        choices=choices,
        default=default,
        help=f"{help} (default: {shown})",
    )


def add_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    only: tuple[str, ...] | None = None,
    defaults: dict[str, Any] | None = None,
    notes: dict[str, str] | None = None,
) -> None:
    """The flags of settings dataclass ``cls``, one per flagged field (``only``: just these
    fields), each with its default or the command's own (``defaults``) and its help, followed
    by the command's ``notes``."""
    defaults, notes = defaults or {}, notes or {}
    for f in flagged_fields(cls):
        if only is None or f.name in only:
            default = defaults.get(f.name, f.default)
            shown = f.metadata.get("unset", "off") if default is None else str(default)
            add_option(parser, f, default, shown, notes.get(f.name, ""))


def flag_values(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The values ``add_options``' flags of settings dataclass ``cls`` parsed to, by field name;
    a field the command has no flag for (``add_options(only=...)``) keeps its default."""
    return {f.name: getattr(args, f.name, f.default) for f in flagged_fields(cls)}


def add_decode_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    defaults: DecodeOptions | None = None,
    settings_file: bool = False,
) -> None:
    """The search flags of the commands that decode: one per flagged ``DecodeOptions`` field,
    with its help and its value in ``defaults`` (default: the paper's translation search).
    ``settings_file``: also ``--decode-settings``, a file of ``decode_choice`` that gives the
    beam and alpha instead (then --beam and --alpha default to None, ``decode_options``
    filling them in)."""
    defaults = dataclasses.asdict(defaults or DecodeOptions())
    if not settings_file:
        add_options(parser, DecodeOptions, defaults=defaults)
        return
    for f in flagged_fields(DecodeOptions):
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


def decode_options(args: argparse.Namespace) -> DecodeOptions:
    """The ``DecodeOptions`` of ``add_decode_arguments``'s flags (checks them: ``--beam``),
    the beam and alpha from ``--decode-settings`` where it is given."""
    values = flag_values(DecodeOptions, args)
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
    paper = DecodeOptions()
    values.update({name: getattr(paper, name) for name in CHOSEN_FIELDS if values[name] is None})
    return DecodeOptions(**values)


def settings_of(cls: type, args: argparse.Namespace) -> Any:
    """The settings dataclass ``cls`` of the flags ``add_options`` made for it (checks them)."""
    return cls(**flag_values(cls, args))


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
