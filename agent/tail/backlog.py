"""Which followed files are still catching up with what was written before they were opened.

A file's *backlog* is the bytes it held when it was opened (:attr:`OpenFile.backlog_end`). Until
the file has been read through them and its parser's state at that point has settled, the
events its job has in the store may be partial: the backlog is still being read, or its last
lines are a traceback whose failure the parser holds until the next line or the idle flush
(``reader``). The daemon holds the job's messages meanwhile (``rules.drift.hold_while_reading``),
so a first message never rests on part of a backlog (docs/RELIABILITY.md, scenario 34).

A file *settles* (:func:`settled`) once a read has reached its backlog's end and then

* its parser was flushed there or later (nothing of the backlog is pending), or
* ``idle_flush_s`` has passed since (the bound): had the file been quiet, the idle flush would
  have come first, in the same scan (the check follows the scan's reads); so the file is being
  written to, and what the backlog's last lines left pending has been followed by new lines (a
  traceback is printed in one burst, and the next log line completes its failure). A file
  written to without pause therefore holds its job's messages for ``idle_flush_s`` after its
  backlog is read, never longer; nor does a file whose parser cannot be flushed (inside an
  overlong line). The cost of the bound: a failure a parser keeps pending across the new lines
  (an HF Trainer traceback waits out the progress bars drawn after it) may be stored after the
  hold ended; storing it asks for an estimate (``after_failure``), which corrects the advice.

A file another agent reads (fleet mode) is not read here and settles at once. Reading a backlog
takes as long as it takes (a read goes on to the file's end), so nothing bounds that part; it
is progress, and ``status`` shows it.

:class:`Backlog` is shared by two threads: the main loop adds files as they are opened and
settles them after each scan; the scheduler's estimate asks which jobs wait
(:meth:`Backlog.of`) before and after it reads the store, and :func:`waits` tells from the two
whether what it read may be partial. Every access takes its lock.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ckpt_advisor.agent.tail.followed import OpenFile


@dataclass(frozen=True, slots=True)
class Behind:
    """How far one job's files are from having settled: ``files`` not settled, and the bytes of
    their backlogs not yet stored (``bytes_behind``; 0 when they are read, their last lines not
    settled yet). ``opened``: the job's files opened so far (it tells a file opened and settled
    between two looks)."""

    files: int
    bytes_behind: int
    opened: int = 0


def waits(before: Behind, after: Behind) -> Behind | None:
    """What an estimate that read the store between the looks ``before`` and ``after`` at its
    job's backlog waits for, or None if all it read was settled: a file not settled at either
    look, or one opened between them (settled already or not: the estimate may have read part
    of it)."""
    if after.files:
        return after
    if before.files:
        return before
    if after.opened != before.opened:
        return Behind(after.opened - before.opened, 0, after.opened)
    return None


def settled(f: OpenFile, now_s: float, idle_flush_s: float) -> bool:
    """Whether ``f``'s backlog is read and its parser's state there settled (see the module's
    docstring); ``now_s``: the clock's Unix time."""
    if f.state.shared_with is not None:
        return True
    read_s = f.backlog_read_s
    return read_s is not None and (f.flushed or now_s - read_s >= idle_flush_s)


class Backlog:
    """The followed files whose backlog has not settled (by object: a file opened twice, by a
    second name, is closed at once and must not replace the first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[int, OpenFile] = {}
        self._opened: Counter[str] = Counter()

    def add(self, f: OpenFile) -> None:
        """``f`` was just opened: it waits until it settles (nothing to wait for if it was
        empty)."""
        with self._lock:
            self._opened[f.spec.job] += 1
            if f.backlog_end > 0:
                self._files[id(f)] = f

    def settle(self, followed: Iterable[OpenFile], now_s: float, idle_flush_s: float) -> set[str]:
        """After a scan: keep the files of ``followed`` (the tailer's open files; a closed one
        waits no more) that have not :func:`settled` by ``now_s`` (Unix seconds) with the
        tailer's ``idle_flush_s``; returns the jobs that waited and wait no more."""
        keep = {id(f) for f in followed}
        with self._lock:
            before = {f.spec.job for f in self._files.values()}
            self._files = {
                key: f
                for key, f in self._files.items()
                if key in keep and not settled(f, now_s, idle_flush_s)
            }
            return before - {f.spec.job for f in self._files.values()}

    def of(self, job: str) -> Behind:
        """How far ``job`` is behind now."""
        with self._lock:
            lags = [_lag(f) for f in self._files.values() if f.spec.job == job]
            return Behind(len(lags), sum(lags), self._opened[job])

    def behind(self) -> dict[str, Behind]:
        """The jobs with files not settled, and how far behind they are."""
        out: dict[str, Behind] = {}
        with self._lock:
            for f in self._files.values():
                job = f.spec.job
                was = out.get(job, Behind(0, 0, self._opened[job]))
                out[job] = Behind(was.files + 1, was.bytes_behind + _lag(f), was.opened)
        return out


def _lag(f: OpenFile) -> int:
    """Bytes of ``f``'s backlog not yet stored."""
    return max(0, f.backlog_end - f.state.offset)
