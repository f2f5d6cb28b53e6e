"""The daemon's heartbeat file and the health verdict ``ckpt-advisor status`` gives from it.

The daemon rewrites a small JSON file beside its store after every scan (atomically: a temporary
file renamed over the old one), so a reader never sees half of it: its pid, when it last
scanned and estimated, whether its scheduler is healthy, and how far behind each followed file
is. ``ckpt-advisor status`` reads it together with the store's outbox and judges health with
:func:`assess` (pure: ``now`` and the liveness check are passed in), exiting non-zero when
unhealthy so it serves as a monitoring check.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.store import OutboxItem
from ckpt_advisor.agent.units import format_ago, format_duration

HEARTBEAT_SUFFIX = ".daemon.json"

MIN_STALE_S = 60.0
"""A heartbeat is stale after 3 poll intervals, but never sooner than this."""
ESTIMATE_GRACE_S = 120.0
"""Slack on top of twice ``estimate_every`` before the last estimate counts as overdue."""


def heartbeat_path(db_path: str | os.PathLike[str]) -> Path:
    """Where the daemon using the store at ``db_path`` writes its heartbeat."""
    p = Path(db_path)
    return p.with_name(p.name + HEARTBEAT_SUFFIX)


@dataclass(frozen=True, slots=True)
class FileLag:
    """One followed file as of the last scan: bytes behind, last read (Unix seconds, by the
    daemon or, before its first read, by an earlier one), and why it looks binary (then it
    never lags), or None."""

    job: str
    path: str
    lag_bytes: int
    last_read_s: float | None
    binary: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What the daemon reports about itself. Times are Unix epoch seconds (UTC).

    Attributes:
        pid: the daemon's process id.
        started_s: when it started.
        updated_s: when this heartbeat was written (after a scan).
        poll_every_s, estimate_every_s: its schedule, to judge staleness.
        jobs: configured job names.
        last_scan_s: end of the last scan.
        last_estimate_s: end of the last estimate run, None before the first.
        problem: why the daemon considers itself unhealthy (it then stops the systemd
            watchdog pings), or None.
        stopped_s: set on a clean stop.
        files: followed files with their lag.
        waiting: the jobs whose messages wait for their backlog (``agent/tail/backlog.py``):
            ``{"files": …, "bytes_behind": …}`` by job.
    """

    pid: int
    started_s: float
    updated_s: float
    poll_every_s: float
    estimate_every_s: float
    jobs: list[str] = field(default_factory=list)
    last_scan_s: float | None = None
    last_estimate_s: float | None = None
    problem: str | None = None
    stopped_s: float | None = None
    files: list[FileLag] = field(default_factory=list)
    waiting: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the heartbeat file's content). Built field by field: ``asdict``
        took most of an idle daemon's CPU with a thousand files."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        keys = [k.name for k in fields(FileLag)]
        data["files"] = [{k: getattr(lag, k) for k in keys} for lag in self.files]
        data["jobs"] = list(self.jobs)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Heartbeat:
        """Inverse of :meth:`to_json`. Raises KeyError/TypeError on a malformed dict."""
        files = [FileLag(**f) for f in data.get("files", [])]
        return cls(**{**data, "files": files})


def write_heartbeat(path: Path, heartbeat: Heartbeat) -> None:
    """Replace the heartbeat file atomically (same-directory temporary file + rename).

    Raises:
        OSError: the directory is not writable or the disk is full.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(heartbeat.to_json(), fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_heartbeat(path: Path) -> Heartbeat | None:
    """The heartbeat at ``path``, or None if there is none or it cannot be read as one."""
    try:
        return Heartbeat.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    """True if a process with this id exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class Verdict:
    """``healthy`` is False when any ``problems``; ``lagging`` are files behind by any bytes;
    ``running``: the heartbeat's process is alive and has not reported a stop (what it says
    of itself is current only then); ``binary``: files that look binary (no events expected:
    a glob to narrow)."""

    healthy: bool
    problems: list[str]
    lagging: list[FileLag]
    running: bool = False
    binary: list[FileLag] = field(default_factory=list)


def assess(
    heartbeat: Heartbeat | None,
    queued: Sequence[OutboxItem],
    *,
    now_s: float,
    alive: Callable[[int], bool] = pid_alive,
    max_lag_bytes: int = 1 << 20,
    max_queue_age_s: float = 3600.0,
) -> Verdict:
    """Judge the daemon's health from its heartbeat and the outbox.

    Unhealthy when: there is no heartbeat; the daemon stopped or its process is gone; the
    heartbeat is older than ``max(3 × poll_every, 60 s)`` (the main loop is stuck); the daemon
    reports a problem; no estimate run ended within ``2 × estimate_every + 120 s`` of now (once
    the daemon has run that long); a file is more than ``max_lag_bytes`` behind; or the oldest
    queued Slack message is older than ``max_queue_age_s``.
    """
    if heartbeat is None:
        return Verdict(False, ["no heartbeat: the daemon has not run with this store"], [])
    hb = heartbeat
    problems = []
    running = False
    if hb.stopped_s is not None:
        problems.append(f"daemon stopped {format_ago(hb.stopped_s, now_s)}")
    elif not alive(hb.pid):
        problems.append(f"daemon (pid {hb.pid}) is not running")
    else:
        running = True
        stale_s = max(3 * hb.poll_every_s, MIN_STALE_S)
        if now_s - hb.updated_s > stale_s:
            problems.append(f"no scan for {format_duration(now_s - hb.updated_s)}")
        if hb.problem:
            problems.append(hb.problem)
        overdue_s = 2 * hb.estimate_every_s + ESTIMATE_GRACE_S
        since = hb.last_estimate_s if hb.last_estimate_s is not None else hb.started_s
        if now_s - since > overdue_s:
            problems.append(f"no estimate for {format_duration(now_s - since)}")
    lagging = [f for f in hb.files if f.lag_bytes > 0]
    problems += [
        f"{f.path} ({f.job}) is {f.lag_bytes:,} bytes behind"
        for f in lagging
        if f.lag_bytes > max_lag_bytes
    ]
    if queued:
        oldest_s = now_s - min(item.created_s for item in queued)
        if oldest_s > max_queue_age_s:
            problems.append(
                f"{len(queued)} Slack message(s) queued, oldest for {format_duration(oldest_s)}"
            )
    binary = [f for f in hb.files if f.binary is not None]
    return Verdict(not problems, problems, lagging, running, binary)
