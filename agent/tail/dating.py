"""When did a line that printed no time happen?

Parsers date what a line prints, and infer what they can from the file itself (a tqdm bar's
clock, see ``parsers.logs.LogParser``). Events they leave undated (a traceback far from any bar,
a Lightning save line) are dated here from the file's own clock when it has one: its latest
printed time, live or not, as a backfill of the same file would. Only a file that has printed
no time at all is dated by the host: by the read time live (the line was written within a poll
interval), by its mtime in a backfill. Every time given here is marked ``time_estimated``.

Why not the read time whenever a line arrives live: a log's clock is not the host's (another
node, a wrong zone, a drifting clock). With the log 51 min behind, a traceback dated by the
host lands after the restart the log stamps 50 min earlier: one crash became two interruptions
(a phantom "unknown") live, one in a backfill of the same file (issue 11, item 5).

A log's printed stamp is also checked against the file's mtime, its last write: a line cannot have
been printed after it was written, so a stamp more than :data:`AHEAD_OF_WRITE_S` after the
mtime was printed in a zone east of the one it is read in (a Tokyo node's logs read as UTC lie
9 h in the future) or by a clock that runs ahead. The first such stamp of a file is reported as
a ``stamp_after_write`` finding (how far ahead, in ``duration_s``); nothing is moved, since the
mtime bounds the offset but does not give it (a copied file's mtime is the copy's).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.parsers import TIMING_FORMATS
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.launcher import is_launch

AHEAD_OF_WRITE_S = 900.0
"""How far a printed stamp may lie after its file's mtime before it is reported, seconds: the
node's clock and the file system's (NFS sets mtimes by the server's) may disagree by a little;
a zone east of UTC is at least 1 h ahead of it."""
_AHEAD = timedelta(seconds=AHEAD_OF_WRITE_S)


class FileClock:
    """The clock of one file: the latest time printed on its lines, and how to date the others.

    Args:
        mtime_s: the file's mtime (Unix seconds), read when nothing better is known.
    """

    __slots__ = ("_finding", "_mtime_s", "_written", "ahead_reported", "last_stamp")

    def __init__(self, mtime_s: Callable[[], float]) -> None:
        self._mtime_s = mtime_s
        self.last_stamp: datetime | None = None
        """The time printed on the file's latest timestamped event read so far."""
        self.ahead_reported = False
        """Whether a ``stamp_after_write`` finding was made for the file (once per file)."""
        self._written: datetime | None = None
        """The file's mtime when last read (read again only when a stamp lies after it)."""
        self._finding: Event | None = None

    def date(self, ev: Event, *, live: bool, now: Callable[[], datetime]) -> Event:
        """``ev`` with a time: its own if printed (then it also moves the file's clock on,
        unless it is a launch's, which dates nothing after it: ``parsers.launcher.is_launch``);
        else the parser's inference from the file (``ev.time``, marked estimated); else the
        file's latest printed time; else, for a file that printed none, ``now()`` if ``live``
        or the file's mtime."""
        if ev.time is not None:
            if not ev.time_estimated and not is_launch(ev):
                self.last_stamp = ev.time
                if not self.ahead_reported and ev.parser not in TIMING_FORMATS:
                    self._check_written(ev.time, ev.line)
            return ev
        if self.last_stamp is not None:
            return ev.estimated_at(self.last_stamp)
        if live:
            return ev.estimated_at(now())
        return ev.estimated_at(datetime.fromtimestamp(self._mtime_s(), UTC))

    def take_finding(self) -> Event | None:
        """The ``stamp_after_write`` finding made by the last :meth:`date`, once, else None."""
        found, self._finding = self._finding, None
        return found

    def _check_written(self, stamp: datetime, line: int) -> None:
        """Report ``stamp`` (printed on ``line``) if it lies more than :data:`AHEAD_OF_WRITE_S`
        after the file's mtime, read again first if the one remembered is older than that (a
        file being written: its mtime moves on with its lines)."""
        if self._written is not None and stamp - self._written <= _AHEAD:
            return
        self._written = datetime.fromtimestamp(self._mtime_s(), UTC)
        ahead = stamp - self._written
        if ahead <= _AHEAD:
            return
        self.ahead_reported = True
        self._finding = Event(
            EventKind.STAMP_AFTER_WRITE,
            line,
            "clock",
            time=stamp,
            time_estimated=True,  # a finding, not a time: it dates no held event
            duration_s=ahead.total_seconds(),
            detail=(
                f"stamp {stamp.isoformat(sep=' ')} lies {format_duration(ahead.total_seconds())} "
                f"after the file's last write ({self._written.isoformat(sep=' ')}): its stamps "
                "were printed in a zone east of the one they are read in (set --tz, or the job's "
                "timezone, to the nodes' zone), or the node's clock runs ahead"
            ),
        )
