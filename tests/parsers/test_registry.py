"""The stack registry's copied literals, and ``auto`` importing only the stacks a log needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_advisor.parsers.registry import ENTRIES, StackEntry
from ckpt_advisor.parsers.stack import _class_tables

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_each_entry_holds_its_stack_classes_own_literals(entry: StackEntry) -> None:
    """Each entry names a stack class of its name whose prefilter keywords, and identifying
    header and pattern keywords, and the stacks it absorbs, are exactly the entry's (what
    ``auto`` selects lines and skips imports by)."""
    stack = entry.load()
    assert (stack.name, stack.absorbs) == (entry.name, entry.absorbs)
    assert _class_tables(stack).keywords == entry.keywords
    headers = tuple(dict.fromkeys(h.keyword for h in stack.headers if h.identifies_stack))
    patterns = tuple(dict.fromkeys(p.keyword for p in stack.patterns if p.identifies_stack))
    assert (headers, patterns) == (entry.header_literals, entry.pattern_literals)


_FEED_THEN_MODULES = (
    "import sys\n"
    "from ckpt_advisor.parsers import make_parser\n"
    "parser = make_parser('auto')\n"
    "for n, line in enumerate(open(sys.argv[1], encoding='utf-8').read().split('\\n'), 1):\n"
    "    parser.feed(line, n)\n"
    "parser.finish()\n"
    "print(parser.name, *sorted(m.rsplit('.', 1)[1] for m in sys.modules\n"
    "      if m.startswith('ckpt_advisor.parsers.')))\n"
)


@pytest.mark.parametrize(
    ("log", "stack"),
    [
        ("agent/fixtures/real/hf_trainer_crash.log", "hf_trainer"),
        ("tests/parsers/fixtures/lightning/lightning.log", "lightning"),
    ],
)
def test_auto_imports_the_detected_stacks_module_and_no_other(log: str, stack: str) -> None:
    """``auto`` on a real log imports the module of the stack it detects and none of the
    other stacks' modules (deepspeed's is the generic fallback's, which uses its header)."""
    out = subprocess.run(
        [sys.executable, "-c", _FEED_THEN_MODULES, str(ROOT / log)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    modules = {entry.module for entry in ENTRIES} - {"deepspeed"}
    assert out[0] == stack
    assert sorted(modules & set(out[1:])) == [stack]
