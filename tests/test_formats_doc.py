"""Every comment that cites docs/FORMATS.md points at a section the document has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "FORMATS.md").read_text("utf-8")
CITATION = re.compile(r"docs/FORMATS\.md((?:,? ?§\d+(?:\.\d+)?(?:[–-]§\d+)?)*)")
SECTIONS = set(re.findall(r"^## (\d+)\. ", DOC, re.MULTILINE))
PITFALLS = set(re.findall(r"^(\d+)\. \*\*", DOC.split("\n## 1. ")[0], re.MULTILINE))


def _cited() -> list[tuple[str, str]]:
    files = [
        p for d in ("agent", "parsers", "rules", "tests", "bench") for p in (ROOT / d).rglob("*")
    ]
    found = []
    for path in files:
        if path.suffix not in (".py", ".md") or ".venv" in path.parts:
            continue
        for m in CITATION.finditer(path.read_text("utf-8")):
            for ref in re.findall(r"§(\d+(?:\.\d+)?)", m[1]):
                found.append((str(path.relative_to(ROOT)), ref))
    return found


def test_the_document_numbers_its_sections_and_pitfalls() -> None:
    """Sections 0-21 and pitfalls 0.1-0.12 exist."""
    assert {str(n) for n in range(22)} == SECTIONS
    assert {str(n) for n in range(1, 13)} == PITFALLS


@pytest.mark.parametrize(("path", "ref"), _cited(), ids=lambda v: str(v))
def test_every_citation_names_an_existing_section(path: str, ref: str) -> None:
    """``docs/FORMATS.md §N`` (or ``§0.N``, a pitfall of section 0) exists."""
    section, _, pitfall = ref.partition(".")
    assert section in SECTIONS, (path, ref)
    if pitfall:
        assert section == "0" and pitfall in PITFALLS, (path, ref)
