"""docs/architecture.md's map of the package is the package: every module of
``transformer_core`` is named in its table, and every name there exists."""

import re

from conftest import ROOT

from transformer_core.cli import COMMANDS

PACKAGE = ROOT / "transformer_core"


def table_rows() -> list[tuple[list[str], list[str]]]:
    """The rows of "## The package": the names of its first column (groups and top-level
    modules) and of its second (a group's modules)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The package", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split("|")[1:-1]
        if len(cells) == 3 and "`" in cells[0]:
            rows.append([re.findall(r"`([^`]+)`", cell) for cell in cells[:2]])
    return rows


def named_modules() -> set[str]:
    """Every module the table names, as a path under transformer_core/ without ``.py``."""
    named = set()
    for firsts, modules in table_rows():
        for first in firsts:
            if first.endswith("/"):
                group = first.rstrip("/")
                inside = COMMANDS if group == "commands" else modules
                named.update(f"{group}/{module}" for module in inside)
            else:
                named.add(first.removesuffix(".py"))
    return named


def package_modules() -> set[str]:
    return {
        str(path.relative_to(PACKAGE).with_suffix(""))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }


def test_the_table_names_every_module_and_no_other():
    named, present = named_modules(), package_modules()
    missing, absent = sorted(present - named), sorted(named - present)
    assert not missing, f"modules missing from docs/architecture.md: {missing}"
    assert not absent, f"docs/architecture.md names modules that do not exist: {absent}"


def test_the_table_is_read():  # the check above is empty if the table's format changes
    assert {
        "training/step",
        "decoding/search",
        "settings/train",
        "commands/train",
    } <= named_modules()
