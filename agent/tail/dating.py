"""When did a line that printed no time happen?

Parsers date what a line prints, and infer what they can from the file itself (a tqdm bar's
clock, see ``parsers.logs.LogParser``). Events they leave undated (a traceback, a Lightning save
line) are dated here, from what the reader knows: the file's own latest timestamp, the time the
line was read (live), or the file's mtime. Every time given here is marked ``time_estimated``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ckpt_advisor.parsers.events import Event

LIVE_CLOCK_SKEW_S = 3600.0
"""A live line without a timestamp gets the read time, unless its file's own clock is further
than this from ours (a replay, a wrong zone): then the file's latest time is nearer the truth."""


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
        """``ev`` with a time: its own if printed (then it also advances the file's clock).

        Live, the read time (``now()``) is best, the line was written within a poll interval,
        unless the file's own clock is far from ours; otherwise the parser's inferred time,
        else the file's latest printed time, else its mtime.
        """
        if ev.time is not None and not ev.time_estimated:
            self.last_stamp = ev.time
            return ev
        read_at = now()
        last = self.last_stamp
        if live and (last is None or abs((read_at - last).total_seconds()) < LIVE_CLOCK_SKEW_S):
            return ev.estimated_at(read_at)
        if ev.time is not None:
            return ev
        if last is not None:
            return ev.estimated_at(last)
        return ev.estimated_at(datetime.fromtimestamp(self._mtime_s(), read_at.tzinfo))
