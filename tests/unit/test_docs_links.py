"""Every relative link of README.md and docs/ leads somewhere: the file exists, and so does the
heading an anchor names (GitHub's slugs: lower case, punctuation dropped, spaces as hyphens)."""

import re
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.*)", line)):
            found.add(slug(match.group(1)))
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_slug_follows_github():
    assert (
        slug("The GPU path, measured on one NVIDIA H100")
        == "the-gpu-path-measured-on-one-nvidia-h100"
    )
    assert (
        slug("Parameter counts (`transformer-core params`)")
        == "parameter-counts-transformer-core-params"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert page.read_text(), f"{page} is empty"
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: link to {target}: no {file}"
        if anchor:
            assert anchor in headings(file), f"{page.name}: link to {target}: no such heading"


def test_readme_is_the_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    linked = {Path(t.partition("#")[0]).name for t in links(ROOT / "README.md")}
    reference = {p.name for p in PAGES[1:] if p.parent.name == "docs"}
    assert reference <= linked, "every reference page is linked from the README"
    from_docs = {Path(t.partition("#")[0]).name for p in PAGES[1:] for t in links(p)}
    notes = {p.name for p in PAGES[1:] if p.parent.name == "notes"}
    assert notes <= from_docs, "every page of docs/notes is linked from a docs page"


# Files of the shared notes beside a checkout, which the repository must not rely on: the
# decisions they hold are stated in docs/recipe.md. (Spelled in parts, so that this file does
# not name them.)
OUTSIDE = re.compile(r"\b(SPEC|DESIGN|NOTES)" + r"\.md\b|shared/" + "peers")
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")


def repository_text_files() -> list[Path]:
    patterns = ("README.md", "docs/**/*.md", "config/*", "transformer_core/**/*.py",
                "transformer_core/**/*.yaml", "workflow/**/*", "bench/**/*.py", "bench/**/*.sh",
                "bench/README.md", "tests/**/*.py", "Snakefile", ".ci/run")  # fmt: skip
    return sorted({p for pattern in patterns for p in ROOT.glob(pattern) if p.is_file()})


def test_nothing_points_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in repository_text_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_the_docs_are_reference_without_issue_numbers():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {match.group(0)}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        for match in ISSUE_NUMBER.finditer(line)
    ]
    assert found == []
