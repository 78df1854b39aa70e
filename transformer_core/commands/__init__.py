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

from transformer_core.config import (
    AUTO,
    BASE,
    COMPILE_MODES,
    DEVICES,
    INFERENCE_MAX_TOKENS,
    PRECISIONS,
)
from transformer_core.settings import DecodeOptions, decode_fields, flagged_fields

PRECISION_HELP = (
    "auto: bf16 autocast where the device computes bf16 natively (CUDA GPUs with bf16, "
    "CPUs with AVX512-BF16 or AMX), fp32 elsewhere; fp32: exact fp32; bf16: bf16 autocast, "
    "an error where it is not native"
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


def add_device_arguments(
    parser: argparse.ArgumentParser,
    precision_default: str | None = AUTO,
    precision_note: str = "",
) -> None:
    """--device, --precision and --num-threads of every command that runs a model.

    ``precision_default`` None leaves --device and --precision to the command's
    config (``train``: TrainConfig), which defaults to auto.
    """
    add_device_and_threads(parser, AUTO if precision_default else None)
    shown = precision_default or AUTO
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=precision_default,
        help=f"{PRECISION_HELP} (default: {shown}{precision_note})",
    )


def add_device_and_threads(parser: argparse.ArgumentParser, device_default: str | None) -> None:
    """--device and --num-threads: for every command that runs a model, with or without a
    --precision (``attention`` always computes in fp32)."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=device_default,
        help="auto (CUDA if present), cpu or cuda (default: auto)",
    )
    parser.add_argument(
        "--num-threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's choice)",
    )


def add_inference_arguments(
    parser: argparse.ArgumentParser,
    batched: str,
    mismatch_help: str,
    precision_default: str,
    precision_note: str,
) -> None:
    """--max-tokens, --allow-vocab-mismatch and the device arguments of the commands that run a checkpoint."""
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=INFERENCE_MAX_TOKENS,
        help=f"{batched} per batch, padding included (default: {INFERENCE_MAX_TOKENS})",
    )
    parser.add_argument("--allow-vocab-mismatch", action="store_true", help=mismatch_help)
    add_device_arguments(parser, precision_default, precision_note)


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    f: dataclasses.Field,
    default: Any,
    shown: str,
) -> None:
    """The flag of a flagged settings field (``settings.option``): its type, choices, metavar
    and help from the field, ``default`` as parsed, ``shown`` as the help's default. A boolean
    field is a ``--flag`` / ``--no-flag`` pair."""
    meta = f.metadata
    if isinstance(f.default, bool):  # --flag / --no-flag
        parser.add_argument(
            meta["flag"], dest=f.name, action=argparse.BooleanOptionalAction, default=default,
            help=f"{meta['help']} (default: {'on' if default else 'off'})",
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
        help=f"{meta['help']} (default: {shown})",
    )


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """The flags of settings dataclass ``cls``, one per flagged field, each with its default."""
    for f in flagged_fields(cls):
        add_option(parser, f, f.default, str(f.default))


def flag_values(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The values ``add_option``'s flags of settings dataclass ``cls`` parsed to, by field name."""
    return {f.name: getattr(args, f.name) for f in flagged_fields(cls)}


def add_decode_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, defaults: DecodeOptions | None = None
) -> None:
    """The search flags of the commands that decode: one per flagged ``DecodeOptions`` field,
    with its help and its value in ``defaults`` (default: the paper's translation search)."""
    defaults = defaults or DecodeOptions()
    for f in decode_fields():
        default = getattr(defaults, f.name)
        add_option(parser, f, default, "off" if default is None else str(default))


def decode_options(args: argparse.Namespace) -> DecodeOptions:
    """The ``DecodeOptions`` of ``add_decode_arguments``'s flags (checks them: ``--beam``)."""
    return DecodeOptions(**flag_values(DecodeOptions, args))


def add_compile_argument(
    parser: argparse.ArgumentParser, what: str, default: str | None = AUTO
) -> None:
    """--compile of the commands that train or decode (``device.use_compile``); ``default``
    None leaves it to the command's config (``train``: TrainConfig, auto)."""
    parser.add_argument(
        "--compile",
        choices=COMPILE_MODES,
        default=default,
        help=f"torch.compile {what}: on, off, or auto: where it was measured faster "
        "(docs/gpu.md, 'Compilation'); the first batches of new shapes pay the compilation "
        "(default: auto)",
    )


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
