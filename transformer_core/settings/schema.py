"""A settings field as a key of the workflow's configuration schema (JSON Schema, draft
2020-12): its type, choices, bounds, default and description, all from its ``option``
declaration, so that the schema cannot drift from the commands' flags
(``workflow_plan.schema`` lays the keys out into the configuration's sections)."""

from __future__ import annotations

import dataclasses
from typing import Any

from transformer_core.settings.fields import AUTO, BOUNDS, config_fields, config_key

JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string"}


def key_schema(f: dataclasses.Field, default: bool = True) -> dict[str, Any]:
    """The schema of flagged field ``f``'s configuration key: ``option(schema=...)`` where the
    configuration has a form of its own; else words as an enum (YAML reads an unquoted on or
    off as a boolean, which the workflow passes as the word), a number or the word auto as
    either, any other value as its JSON type; the declared bounds; the field's default unless
    ``default`` is False, it has none (None) or declares none
    (``schema_default``); its help, and ``doc`` after it, as the description."""
    meta = f.metadata
    if "schema" in meta:
        spec = dict(meta["schema"])
        if not default:
            spec.pop("default", None)
        return spec
    spec: dict[str, Any] = {}
    if "choices" in meta:
        words = list(meta["choices"])
        on_off = {"on", "off"} <= set(words)
        spec = {"enum": [*words, True, False]} if on_off else {"type": "string", "enum": words}
    elif f.default == AUTO:
        spec = {"type": ["integer", "string"], "pattern": f"^{AUTO}$"}
    else:
        kind = int if meta.get("type") is int else type(f.default)
        spec = {"type": JSON_TYPES[kind]}
    spec.update({BOUNDS[name]: meta[name] for name in BOUNDS if name in meta})
    if default and f.default is not None and meta.get("schema_default", True):
        spec["default"] = f.default
    spec["description"] = meta["help"] + (f"; {meta['doc']}" if "doc" in meta else "")
    return spec


def section_schema(
    cls: type, keep: Any = lambda f: True, default: bool = True
) -> dict[str, dict[str, Any]]:
    """The keys of settings dataclass ``cls`` that the configuration sets (those of its
    flagged fields for which ``keep(field)`` holds), each with its schema (``key_schema``), in
    field order."""
    return {config_key(f): key_schema(f, default) for f in config_fields(cls) if keep(f)}
