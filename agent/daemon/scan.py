"""One scan of the main loop: when to search the globs, what a store error does, what is logged.

A scan stats the known files; it also searches the globs every ``discover_every``, or at once
after a file notification that something was created, moved or deleted. A store that cannot be
written or reached (a full disk, a database server away) is reported once per outage and
retried with backoff, from one poll interval doubling up to :data:`RETRY_MAX_S`; offsets stay
where they were, so once it is back every line is stored exactly once (docs/RELIABILITY.md,
scenarios 24 and 31). What each scan read is logged at
DEBUG; at INFO, a summary of what was read at most every :data:`SUMMARY_EVERY_S` (lines, events
and files, by job), so a busy cluster does not flood journald.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ckpt_advisor.agent.store import StoreError
from ckpt_advisor.agent.tail import ScanStats, Tailer
from ckpt_advisor.agent.units import format_duration

log = logging.getLogger(__name__)

SUMMARY_EVERY_S = 60.0
"""At most one INFO summary of what was read per this many seconds."""
RETRY_MAX_S = 30.0
"""The longest wait between two tries of a store that failed."""
SUMMARY_JOBS = 5
"""Jobs named in a summary (those with the most lines); the others are counted."""


@dataclass
class ReadSummary:
    """What scans read since the last INFO summary."""

    since_s: float
    lines: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    files: dict[str, set[str]] = field(default_factory=dict)

    def add(self, stats: ScanStats) -> None:
        """Count one scan's reads."""
        self.lines.update(stats.job_lines)
        self.events.update(stats.job_events)
        for job, paths in stats.job_files.items():
            self.files.setdefault(job, set()).update(paths)

    def text(self, now_s: float) -> str:
        """One line: totals, then the busiest jobs."""
        jobs = sorted(self.lines.keys() | self.events.keys(), key=lambda j: (-self.lines[j], j))
        files = sum(len(paths) for paths in self.files.values())
        head = (
            f"read in the last {format_duration(now_s - self.since_s)}: "
            f"{self.lines.total():,} line(s), {self.events.total():,} event(s) stored, "
            f"{files} file(s), {len(jobs)} job(s)"
        )
        parts = [
            f"{job} {self.lines[job]:,}/{self.events[job]:,}/{len(self.files.get(job, ()))}"
            for job in jobs[:SUMMARY_JOBS]
        ]
        if len(jobs) > SUMMARY_JOBS:
            parts.append(f"+{len(jobs) - SUMMARY_JOBS} more")
        return f"{head} (job lines/events/files: {', '.join(parts)})"


class Scanner:
    """Runs the tailer's scans for the main loop (the only writer of events and offsets).

    Args:
        tailer: reads the files into the store.
        discover: set by the watcher when the globs should be searched at once.
        clock: the current aware UTC datetime (for the summary's minute).
        discover_every_s: seconds between two glob searches otherwise (follows reloads).
        location: the store, for the "writable again" line.
        poll_every_s: the first wait before a failed store is tried again (follows reloads).
    """

    def __init__(
        self,
        tailer: Tailer,
        *,
        discover: threading.Event,
        clock: Callable[[], datetime],
        discover_every_s: float,
        location: str,
        poll_every_s: float,
    ) -> None:
        self.tailer = tailer
        self.discover_every_s = discover_every_s
        self.poll_every_s = poll_every_s
        self.store_error: str | None = None
        """The store's error since the outage began, None while it is written."""
        self._outage_since = 0.0  # time.monotonic() of the outage's first error
        self._retry_s = 0.0  # the wait before the next try
        self._retry_at = 0.0
        self._discover = discover
        self._clock = clock
        self._location = location
        self._discovered_at = float("-inf")  # time.monotonic() of the last glob search
        self._summary = ReadSummary(clock().timestamp())

    def scan(self) -> ScanStats:
        """One scan (a glob search when due). A store error gives empty stats: the first of an
        outage is logged, and the store is tried again after a wait that doubles each time
        (scans due meanwhile are skipped, the files' offsets unchanged)."""
        started = time.monotonic()
        if self.store_error is not None and started < self._retry_at:
            return ScanStats()
        discover = self._discover.is_set() or started - self._discovered_at >= (
            self.discover_every_s
        )
        self._discover.clear()  # a notification during the scan asks for the next one
        try:
            stats = self.tailer.scan(discover=discover)
            if stats.discovered:
                self._discovered_at = started
        except StoreError as exc:
            if self.store_error is None:
                self._outage_since, self._retry_s = started, self.poll_every_s
                log.error(
                    "%s; retrying with backoff (from %gs up to %gs), file offsets unchanged",
                    exc,
                    self.poll_every_s,
                    RETRY_MAX_S,
                )
            else:
                self._retry_s = min(2 * self._retry_s, RETRY_MAX_S)
            self.store_error = str(exc)
            self._retry_at = time.monotonic() + self._retry_s
            self._discover.set()  # search the globs on the first scan that reaches the store
            return ScanStats()
        if self.store_error is not None:
            down_s = time.monotonic() - self._outage_since
            log.info("store writable again after %s: %s", format_duration(down_s), self._location)
            self.store_error = None
        self._log_reads(stats)
        return stats

    def _log_reads(self, stats: ScanStats) -> None:
        if stats.lines or stats.events:
            log.debug(
                "read %d line(s) from %d file(s), stored %d event(s)",
                stats.lines,
                sum(len(paths) for paths in stats.job_files.values()),
                stats.events,
            )
        self._summary.add(stats)
        now_s = self._clock().timestamp()
        if now_s - self._summary.since_s < SUMMARY_EVERY_S:
            return
        if self._summary.lines or self._summary.events:
            log.info("%s", self._summary.text(now_s))
        self._summary = ReadSummary(now_s)
