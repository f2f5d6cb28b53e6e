"""A file's backlog, what it held when it was opened, and when it settles: real files, a real
SQLite store, the live tailer with a hand-moved clock (idle flush 2 s)."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import WatchSpec
from ckpt_advisor.agent.tail.backlog import Behind
from ckpt_advisor.agent.tail.reader import WRITER_GONE_S
from tests.agent.tail.helpers import FIXTURES, Clock, failures, live_tailer

CRASH = (FIXTURES / "hf_trainer_crash.log").read_text()
ENDS_IN_TRACEBACK = CRASH[: CRASH.rindex(" 49%|")]
"""The HF Trainer crash cut after its exception line: the failure waits for a next line."""
LINE = "[INFO|trainer.py:2540] 2026-11-20 10:00:00,000 >> still writing\n"


def _log(tmp_path: Path, text: str, *, age_s: float = 0.0) -> Path:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    path = run / "train.log"
    path.write_text(text)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def _store(tmp_path: Path) -> Store:
    return open_store(tmp_path / "s.db")


def test_a_quiet_file_settles_when_its_last_traceback_is_flushed(tmp_path: Path) -> None:
    """A file just written, ending in a traceback: read, it still waits (the failure is not
    stored); at the idle flush 2 s later the failure is stored and, in the same scan, the job
    caught up."""
    _log(tmp_path, ENDS_IN_TRACEBACK)
    store, clock = _store(tmp_path), Clock()
    tailer = live_tailer(store, f"{tmp_path}/run/*.log", clock)
    first = tailer.scan()
    assert (first.caught_up, failures(store)) == (set(), 0)
    assert tailer.backlog.of("j") == Behind(1, 0, 1)
    clock.now += timedelta(seconds=1.5)
    assert (tailer.scan().caught_up, failures(store)) == (set(), 0)
    clock.now += timedelta(seconds=0.5)
    assert (tailer.scan().caught_up, failures(store)) == ({"j"}, 1)
    assert tailer.backlog.behind() == {}
    assert tailer.backlog.of("j") == Behind(0, 0, 1)


def test_a_file_written_without_pause_waits_idle_flush_s_at_most(tmp_path: Path) -> None:
    """A writer that appends a line every 0.5 s never lets the parser be flushed; the file
    holds its job for 2 s (``idle_flush_s``) after its backlog was read, and no longer. The
    log line after the traceback stored its failure meanwhile."""
    path = _log(tmp_path, ENDS_IN_TRACEBACK)
    store, clock = _store(tmp_path), Clock()
    tailer = live_tailer(store, f"{tmp_path}/run/*.log", clock)
    settled_after = []
    for tick in range(8):
        if tick:
            clock.now += timedelta(seconds=0.5)
            with path.open("a") as fh:
                fh.write(LINE)
        if tailer.scan().caught_up:
            settled_after.append(tick * 0.5)
    assert settled_after == [2.0]
    assert failures(store) == 1


def test_a_file_whose_writer_is_long_gone_settles_in_the_scan_that_reads_it(
    tmp_path: Path,
) -> None:
    """Its mtime older than WRITER_GONE_S: flushed as soon as read, the failure stored in the
    first scan; a file only a minute old waits for the idle flush (its server's clock may run
    behind ours)."""
    _log(tmp_path, ENDS_IN_TRACEBACK, age_s=WRITER_GONE_S + 60)
    store = _store(tmp_path)
    tailer = live_tailer(store, f"{tmp_path}/run/*.log", Clock())
    assert (tailer.scan().caught_up, failures(store)) == ({"j"}, 1)

    young = tmp_path / "young"
    young.mkdir()
    _log(young, ENDS_IN_TRACEBACK, age_s=60)
    store = _store(young)
    tailer = live_tailer(store, f"{young}/run/*.log", Clock())
    assert (tailer.scan().caught_up, failures(store)) == (set(), 0)


def test_a_file_opened_is_behind_by_its_bytes_until_they_are_stored(tmp_path: Path) -> None:
    """Opened, not read yet: one file, all its bytes behind; an empty file waits for nothing;
    a file another job's tailer opens is not this job's."""
    path = _log(tmp_path, ENDS_IN_TRACEBACK)
    (tmp_path / "run" / "empty.log").write_text("")
    store = _store(tmp_path)
    tailer = live_tailer(store, f"{tmp_path}/run/*.log", Clock())
    reader = tailer._reader  # the tailer's own reader: opening is its business
    spec = WatchSpec("j", (str(path),))
    reader.open(spec, str(path), live=False)
    reader.open(spec, str(tmp_path / "run" / "empty.log"), live=False)
    size = path.stat().st_size
    assert tailer.backlog.of("j") == Behind(1, size, 2)
    assert tailer.backlog.of("k") == Behind(0, 0, 0)
