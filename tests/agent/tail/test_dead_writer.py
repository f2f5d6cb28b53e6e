"""A followed file whose writer was killed mid-redraw (docs/RELIABILITY.md scenario 8): its last
line, with no newline, is read once the file is old enough for its writer to be gone
(``agent/tail/reader.py`` ``WRITER_GONE_S``), stored once across restarts, and if the writer was
not gone after all (the next run appends to the same file), what follows continues that line.
The real capture ``tests/parsers/fixtures/hf_killed/`` (an HF run killed with SIGKILL, then
resumed); real files and SQLite in a temp dir."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.parsers.events import EventKind
from tests.agent.tail.helpers import Clock, live_tailer
from tests.parsers._helpers import parse, read_lines

CAPTURE = Path(__file__).parents[2] / "parsers" / "fixtures" / "hf_killed"

Row = tuple[object, ...]


def _rows(store: Store) -> list[Row]:
    """Every stored event but the bar's step samples (which redraws are fed depends on where
    reads end), in line order, and the dead run's last step (line 48) whatever the reads."""
    events = [e.event for e in store.events(job="j")]
    return sorted(
        (e.kind, e.line, e.step, e.time, e.duration_s)
        for e in events
        if e.kind is not EventKind.STEP or e.line == 48
    )


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_dead_writers_last_line_is_read_once_and_continued_if_it_lives(tmp_path: Path) -> None:
    """Run 1's log (its last line the redraw at step 75, no newline) is followed: while its
    mtime is fresh the line waits; 10 minutes old, it is read (the step stored once, across a
    restart); then run 2 appends to the same file, and the stored events are those of the
    appended log read whole (its line 48 joined), across another restart."""
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "train.log"
    run1, run2 = ((CAPTURE / name).read_bytes() for name in ("run-1.log", "run-2.log"))
    path.write_bytes(run1)
    store, clock = open_store(tmp_path / "s.db"), Clock()
    pattern = str(tmp_path / "logs" / "*.log")
    tailer = live_tailer(store, pattern, clock)
    tailer.scan()
    [state] = store.files("j")
    assert (state.offset, state.lineno) == (run1.rindex(b"\n") + 1, 47)
    assert not [r for r in _rows(store) if r[1] == 48]
    _age(path, 600)
    tailer.scan()
    [state] = store.files("j")
    assert (state.offset, state.lineno, state.finished) == (len(run1), 47, True)
    [last] = [r for r in _rows(store) if r[1] == 48]
    assert last[:3] == (EventKind.STEP, 48, 75)
    stored = _rows(store)
    tailer.close()
    tailer = live_tailer(store, pattern, clock)
    tailer.scan()
    assert _rows(store) == stored, "the replay feeds the same last line: nothing twice"
    with path.open("ab") as fh:
        fh.write(run2)
    tailer.scan()
    tailer.close()
    tailer = live_tailer(store, pattern, clock)
    tailer.scan()
    tailer.close()
    whole = tmp_path / "whole.log"
    whole.write_bytes(run1 + run2)
    events, _ = parse(read_lines(whole))
    expected = sorted(
        (e.kind, e.line, e.step, e.time, e.duration_s)
        for e in events
        if e.kind is not EventKind.STEP or e.line == 48
    )
    assert _rows(store) == expected
    [state] = store.files("j")
    assert state.lineno == (run1 + run2).count(b"\n")
