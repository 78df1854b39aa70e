"""Both directions of a settings dataclass's flags: its fields as a command's argparse
options and back (``add_options``, ``settings_of``), and the workflow's configuration keys as
the same command's arguments (``command_flags``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from transformer_core.settings.fields import config_fields, config_key, flagged_fields


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    f: dataclasses.Field,
    default: Any,
    shown: str,
    note: str = "",
) -> None:
    """The flag of a flagged settings field (``option``): its type, choices, metavar
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


def settings_of(cls: type, args: argparse.Namespace) -> Any:
    """The settings dataclass ``cls`` of the flags ``add_options`` made for it (checks them)."""
    return cls(**flag_values(cls, args))


def command_flags(cls: type, settings: dict[str, Any]) -> list[str]:
    """``settings`` (config keys -> values) as the flags of ``cls``'s command: each key that
    names a flagged field of ``cls`` and is not None, as ``--flag value`` (a boolean as
    ``--flag`` or ``--no-flag``, or as ``on`` / ``off`` for a field of words: YAML reads an
    unquoted ``compile: on`` as true), in field order."""
    flags: list[str] = []
    for f in config_fields(cls):
        value = settings.get(config_key(f))
        if isinstance(value, bool) and isinstance(f.default, bool):
            flags.append(("--" if value else "--no-") + f.metadata["flag"].removeprefix("--"))
        elif isinstance(value, bool):
            flags += [f.metadata["flag"], "on" if value else "off"]
        elif value is not None:
            flags += [f.metadata["flag"], str(value)]
    return flags
