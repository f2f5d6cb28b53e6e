"""Dating of untimed lines: a file that prints times is dated by its own clock, live as in a
backfill; only a file that prints none is dated by the host's clock (docs/RELIABILITY.md,
scenario 30, for a clock that steps back). Real captured HF logs, real files, real SQLite."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.agent.tail.dating import FileClock
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.rules.policy import EstimationPolicy
from tests.agent.tail.helpers import FIXTURES, Clock

STAMP = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
SKEW = timedelta(minutes=51)
"""How far the host's clock is ahead of the log's (issue 11, item 5)."""


def _crash_then_resume() -> bytes:
    return b"".join(
        (FIXTURES / name).read_bytes() for name in ("hf_trainer_crash.log", "hf_trainer_resume.log")
    )


def _interruptions(store: Store) -> int:
    estimator = Estimator(EstimationPolicy(min_failures=0, min_saves=1))
    now_s = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    return estimator.estimate(store, "j", now_s).n_failures


def _backfilled(tmp_path: Path, raw: bytes) -> Store:
    path = tmp_path / "backfill" / "train.log"
    path.parent.mkdir()
    path.write_bytes(raw)
    store = open_store(tmp_path / "backfill.db")
    spec = WatchSpec("j", (str(path),))
    Tailer(store, [spec], clock=lambda: datetime.now(UTC), tz=UTC, backfill=True).scan()
    return store


def _tailed_live(tmp_path: Path, raw: bytes, skew: timedelta) -> Store:
    """``raw`` appended line by line to a watched file, a poll after each line, the host's
    clock ``skew`` ahead of the last time the log printed."""
    path = tmp_path / "live" / "train.log"
    path.parent.mkdir()
    path.write_bytes(b"")
    store, clock = open_store(tmp_path / "live.db"), Clock()
    tailer = Tailer(store, [WatchSpec("j", (str(path),))], clock=clock, tz=UTC)
    tailer.scan()
    for line in raw.splitlines(keepends=True):
        if stamp := STAMP.search(line):
            clock.now = datetime.fromisoformat(stamp.group().decode()).replace(tzinfo=UTC) + skew
        with path.open("ab") as fh:
            fh.write(line)
        tailer.scan(discover=False)
    clock.now += timedelta(seconds=5)  # the file idles: what the parser holds is flushed
    tailer.scan()
    return store


def _failure_times(store: Store) -> list[datetime | None]:
    return [e.event.time for e in store.events(job="j") if e.event.kind == "failure"]


def test_live_and_backfill_count_the_same_interruptions_with_the_log_clock_51_min_off(
    tmp_path: Path,
) -> None:
    """A crash and its resume tailed live by a host whose clock is 51 min ahead of the log's
    give one interruption, as the same file backfilled does (the untimed traceback is dated
    from the log, not by the host: no phantom second interruption)."""
    raw = _crash_then_resume()
    backfilled, live = _backfilled(tmp_path, raw), _tailed_live(tmp_path, raw, SKEW)
    assert _interruptions(backfilled) == 1
    assert _interruptions(live) == 1
    [failure_time] = _failure_times(live)
    assert _failure_times(live) == _failure_times(backfilled)
    assert failure_time is not None
    assert datetime(2026, 11, 29, 22, 11, 42, tzinfo=UTC) <= failure_time
    assert failure_time < datetime(2026, 11, 29, 22, 11, 48, tzinfo=UTC)  # before the resume


def test_untimed_line_of_a_stamped_log_takes_the_logs_latest_time_not_the_read_time(
    tmp_path: Path,
) -> None:
    """Live, an untimed traceback after timestamped lines and no bar is dated at the log's
    latest printed time (estimated), however far the host's clock is."""
    header = b"[INFO|trainer.py:2414] 2026-11-29 22:00:00,000 >> ***** Running training *****\n"
    traceback = (
        b"Traceback (most recent call last):\n"
        b'  File "train.py", line 9, in <module>\n'
        b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    for skew in (timedelta(minutes=5), timedelta(hours=3)):
        tmp = tmp_path / str(skew.seconds)
        tmp.mkdir()
        [failure] = [
            e.event
            for e in _tailed_live(tmp, header + traceback, skew).events(job="j")
            if e.event.kind == "failure"
        ]
        assert (failure.time, failure.time_estimated) == (
            datetime(2026, 11, 29, 22, tzinfo=UTC),
            True,
        )


def test_a_clock_stepping_back_is_logged_naming_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Scenario 30 in the daemon's log: when the captured HF resume log's node clock steps back
    3 h mid-file (its later stamps rewritten 3 h earlier), reading it live logs one warning
    naming the file and the first line stamped by the stepped clock, once, across a restart."""
    lines = (FIXTURES / "hf_trainer_resume.log").read_bytes().splitlines(keepends=True)
    stamped = [i for i, line in enumerate(lines) if STAMP.search(line)]
    cut = stamped[len(stamped) // 2]

    def three_hours_earlier(match: re.Match[bytes]) -> bytes:
        at = datetime.fromisoformat(match.group().decode()) - timedelta(hours=3)
        return at.isoformat(sep=" ").encode()

    path = tmp_path / "train.log"
    path.write_bytes(b"")
    store, clock = open_store(tmp_path / "s.db"), Clock()
    tailer = Tailer(store, [WatchSpec("j", (str(path),))], clock=clock, tz=UTC)
    tailer.scan()
    path.write_bytes(
        b"".join(lines[:cut]) + b"".join(STAMP.sub(three_hours_earlier, x) for x in lines[cut:])
    )
    with caplog.at_level(logging.INFO, logger="ckpt_advisor.agent.tail.reader"):
        tailer.scan()
        tailer.close()
        Tailer(store, [WatchSpec("j", (str(path),))], clock=clock, tz=UTC).scan()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{path}:{cut + 1}: clock_step: stamp ")
    [step] = [e.event for e in store.events(job="j") if e.event.kind == "clock_step"]
    assert step.line == cut + 1
    assert step.duration_s is not None
    assert 3 * 3600 - 60 < step.duration_s <= 3 * 3600


def test_a_stamp_after_the_files_last_write_is_found_once_against_its_mtime_now() -> None:
    """A file being written: its mtime moves on with its lines, so a stamp 20 min after the
    mtime read at its first line but not after its mtime now is no finding (the mtime is read
    again); one 16 min after its mtime now is, once per file, with how far ahead; a timing
    file's Unix times are no stamps read in a zone."""
    start = datetime(2026, 12, 2, 17, 38, 31, tzinfo=UTC)
    mtime = [start.timestamp()]
    clock = FileClock(lambda: mtime[0])

    def found(line: int, at: datetime, parser: str = "hf_trainer") -> Event | None:
        step = Event(EventKind.STEP, line, parser, time=at, step=line)
        clock.date(step, live=True, now=lambda: at)
        return clock.take_finding()

    assert found(1, start) is None
    mtime[0] = (start + timedelta(minutes=20)).timestamp()
    assert found(2, start + timedelta(minutes=20)) is None
    assert found(3, start + timedelta(hours=9), parser="timing_jsonl") is None
    ahead = found(4, start + timedelta(minutes=36))
    assert ahead is not None
    assert (ahead.kind, ahead.line, ahead.duration_s) == (EventKind.STAMP_AFTER_WRITE, 4, 960.0)
    assert found(5, start + timedelta(hours=9)) is None  # said once
