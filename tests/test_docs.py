"""Citations of docs/RELIABILITY.md resolve from a clone: every cited scenario exists there, every
file citing "scenario N" names the document, and every test the document names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
RELIABILITY = ROOT / "docs" / "RELIABILITY.md"
SOURCES = [
    p
    for folder in ("agent", "parsers", "rules", "tests", "bench")
    for p in (ROOT / folder).rglob("*.py")
    if p != Path(__file__)  # this file quotes the patterns it looks for
]
CITATION = re.compile(r"\b[Ss]cenarios? (\d+)(?:\s*[-–]\s*(\d+))?((?:,\s*\d+)*)")


def _scenarios() -> dict[int, str]:
    """The numbered scenarios of docs/RELIABILITY.md: number → its text."""
    items = re.split(r"^(\d+)\. ", RELIABILITY.read_text(), flags=re.MULTILINE)
    return {int(n): text for n, text in zip(items[1::2], items[2::2], strict=True)}


def _cited(text: str) -> set[int]:
    numbers: set[int] = set()
    for first, last, more in CITATION.findall(text):
        numbers.update(range(int(first), int(last or first) + 1))
        numbers.update(int(n) for n in re.findall(r"\d+", more))
    return numbers


def test_scenarios_are_numbered_1_to_34_in_order() -> None:
    """The document numbers its scenarios 1 to 34, each once (the numbering code cites)."""
    assert list(_scenarios()) == list(range(1, 35))


def test_every_cited_scenario_exists_and_its_file_names_the_document() -> None:
    """Each "scenario N" (or "scenarios N-M, K") in code and tests is a scenario of the
    document, and a file that cites one says where: docs/RELIABILITY.md."""
    known = set(_scenarios())
    cited_anywhere: set[int] = set()
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        cited = _cited(text)
        if not cited:
            continue
        cited_anywhere |= cited
        assert cited <= known, (path, cited - known)
        assert "docs/RELIABILITY.md" in text, path
        assert not re.search(r"(?<!docs/)RELIABILITY\.md", text), path
    assert len(cited_anywhere) > 20


def test_every_test_the_document_names_exists() -> None:
    """Each ``test_…`` the document says pins a scenario is a test function in tests/."""
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py"))
    named = set(re.findall(r"`(test_\w+)`", RELIABILITY.read_text()))
    assert len(named) > 40
    missing = {name for name in named if not re.search(rf"\bdef {name}\(", tests)}
    assert missing == set()
