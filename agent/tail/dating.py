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
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ckpt_advisor.parsers.events import Event
from ckpt_advisor.parsers.launcher import is_launch


class FileClock:
    """The clock of one file: the latest time printed on its lines, and how to date the others.

    Args:
        mtime_s: the file's mtime (Unix seconds), read when nothing better is known.
    """

    __slots__ = ("_mtime_s", "last_stamp")

    def __init__(self, mtime_s: Callable[[], float]) -> None:
        self._mtime_s = mtime_s
        self.last_stamp: datetime | None = None
        """The time printed on the file's latest timestamped event read so far."""

    def date(self, ev: Event, *, live: bool, now: Callable[[], datetime]) -> Event:
        """``ev`` with a time: its own if printed (then it also moves the file's clock on,
        unless it is a launch's, which dates nothing after it: ``parsers.launcher.is_launch``);
        else the parser's inference from the file (``ev.time``, marked estimated); else the
        file's latest printed time; else, for a file that printed none, ``now()`` if ``live``
        or the file's mtime."""
        if ev.time is not None:
            if not ev.time_estimated and not is_launch(ev):
                self.last_stamp = ev.time
            return ev
        if self.last_stamp is not None:
            return ev.estimated_at(self.last_stamp)
        if live:
            return ev.estimated_at(now())
        return ev.estimated_at(datetime.fromtimestamp(self._mtime_s(), UTC))
