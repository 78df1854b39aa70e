"""Every relative link of README.md and docs/ leads somewhere: the file exists, and so does the
heading an anchor names (GitHub's slugs: lower case, punctuation dropped, spaces as hyphens)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
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
    assert {p.name for p in PAGES[1:]} <= linked, "every docs page is linked from the README"
