"""A log file's own clock: untimed lines dated in file order, bar clocks checked, steps found."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from ckpt_advisor.parsers.clock import FileClock
from ckpt_advisor.parsers.events import Event, EventKind
from tests.parsers._helpers import REAL_LOGS, parse, read_lines
from tests.parsers._hf_logs import HfLog, at

FAIL = EventKind.FAILURE


def _events(log: HfLog) -> list[Event]:
    events, parser = parse(log.lines, clock=True)
    assert parser.name == "hf_trainer"
    assert parser.misses == 0
    return events


def _one(events: list[Event], kind: EventKind) -> Event:
    [event] = [e for e in events if e.kind is kind]
    return event


def _in_file_order(events: list[Event]) -> bool:
    """Every time is at or after the times of the lines before it."""
    times = [e.time for e in sorted(events, key=lambda e: e.line) if e.time is not None]
    return all(a <= b for a, b in itertools.pairwise(times))


def test_an_untimed_traceback_after_two_saves_is_dated_after_them() -> None:
    """Run start 08:00, saves at 09:00 and 10:00 with their "saved in" lines, loss dicts, then
    a traceback with no stamp and no bar: the failure is dated at the last stamp before it
    (10:00:40), never before the saves that precede it in the file (it was dated 08:00)."""
    log = (
        HfLog()
        .header(at(8))
        .metrics()
        .save(at(9), 600)
        .metrics()
        .save(at(10), 1200)
        .metrics()
        .traceback()
    )
    events = _events(log)
    failure = _one(events, FAIL)
    assert (failure.time, failure.time_estimated, failure.step) == (at(10, 0, 40), True, 1200)
    assert _in_file_order(events)


def test_a_frozen_bar_clock_is_ignored_and_reported() -> None:
    """A training bar that shows 12:00:00 on every redraw while its steps advance dates nothing:
    the traceback after it gets the last stamp (the run's start), not the start plus 12 h, and
    a ``bar_clock_ignored`` event at the line where the bar was seen not to move says why."""
    log = HfLog().header(at(8))
    for first in range(10, 200, 50):
        log.bars(range(first, first + 50, 10), lambda _: 12 * 3600.0, remaining_s=99 * 3600.0)
    log.traceback()
    events = _events(log)
    failure = _one(events, FAIL)
    start = _one(events, EventKind.RUN_START)
    assert failure.time == start.time
    ignored = _one(events, EventKind.BAR_CLOCK_IGNORED)
    bars = [i for i, line in enumerate(log.lines, 1) if "s/it]" in line]
    assert (ignored.line, ignored.step) == (bars[1], 100)
    assert "does not advance" in (ignored.detail or "")
    assert _in_file_order(events)


def test_a_ticking_bar_dates_the_traceback_to_its_last_redraw() -> None:
    """The same run with a bar whose clock advances 6 s a step: the traceback is dated by the
    bar's last redraw (step 200, 20 min after the run's start, where the bar began)."""
    log = HfLog().header(at(8))
    for first in range(10, 200, 50):
        log.bars(range(first, first + 50, 10), lambda step: 6.0 * step)
    log.traceback()
    events = _events(log)
    assert _one(events, FAIL).time == at(8, 20)
    assert not [e for e in events if e.kind is EventKind.BAR_CLOCK_IGNORED]


def test_a_bar_clock_that_goes_back_is_ignored() -> None:
    """A bar whose elapsed time falls while its steps grow (a resumed bar redrawn from an older
    start) is ignored from that redraw on: the traceback keeps the last stamp."""
    log = HfLog().header(at(8))
    log.bars(range(10, 60, 10), lambda step: 6.0 * step)
    log.bars(range(60, 110, 10), lambda step: 6.0 * step)
    log.bars(range(110, 160, 10), lambda step: 6.0 * (step - 100))
    log.save(at(8, 20), 200).bars(range(210, 260, 10), lambda step: 6.0 * (step - 200))
    log.traceback()
    events = _events(log)
    ignored = _one(events, EventKind.BAR_CLOCK_IGNORED)
    assert "goes back" in (ignored.detail or "")
    assert _one(events, FAIL).time == at(8, 20, 40)


def _stepped_log() -> HfLog:
    """08:00 start, saves every 30 min to 12:00; the node's clock then steps back 3 h: the saves
    at 12:30 … 16:00 print 09:30 … 13:00; a traceback after the last."""
    log = HfLog().header(at(8))
    for k in range(1, 17):
        printed = at(8) + timedelta(minutes=30 * k) - timedelta(hours=3 if k > 8 else 0)
        log.metrics().save(printed, 300 * k)
    return log.traceback()


def test_a_clock_that_steps_back_is_reported_and_the_file_keeps_its_order() -> None:
    """A stamp 2.5 h before the newest (a clock set back 3 h between two saves 30 min apart)
    is a step: a ``clock_step`` event at its line says how far, and that line's times and all
    later ones are moved forward by it, so the file's times never go back."""
    log = _stepped_log()
    events = _events(log)
    step = _one(events, EventKind.CLOCK_STEP)
    assert step.line == log.line_of("Saving model checkpoint to /data/hf/run/checkpoint-2700")
    assert step.duration_s == timedelta(hours=2, minutes=30, seconds=40).total_seconds()
    assert _in_file_order(events)
    saves = [e for e in events if e.kind is EventKind.CHECKPOINT_START]
    assert saves[8].time == at(12, 0, 40)  # the line of the step: at the latest time before it
    assert saves[-1].time == at(15, 30, 40)


def test_a_clock_set_right_again_drops_the_shift() -> None:
    """After a step back, a stamp in order by itself (the clock was set right) is read as
    printed again, and so are the stamps after it."""
    log = HfLog().header(at(8))
    log.save(at(9), 600).save(at(6), 1200).save(at(10), 1800).save(at(11), 2400)
    events = _events(log)
    saves = [e.time for e in events if e.kind is EventKind.CHECKPOINT_START]
    assert saves == [at(9), at(9, 0, 40), at(10), at(11)]
    assert len([e for e in events if e.kind is EventKind.CLOCK_STEP]) == 1


def test_small_disorder_and_a_pasted_older_log_are_kept_as_printed() -> None:
    """A stamp 2 min before the newest (ranks flushing late) is no step; one a week before it is
    another log pasted after this one: the clock starts afresh, no step is reported."""
    log = HfLog().header(at(8)).save(at(9), 600).save(at(8, 58), 1200)
    log.header(at(8, day=1)).save(at(9, day=1), 600)
    events = _events(log)
    saves = [e.time for e in events if e.kind is EventKind.CHECKPOINT_START]
    assert saves == [at(9), at(8, 58), at(9, day=1)]
    assert not [e for e in events if e.kind is EventKind.CLOCK_STEP]


def test_the_real_hf_captures_keep_file_order() -> None:
    """Every event of the captured HF runs is dated at or after the lines before it: a bar's
    reading is a lower bound (its start taken a second early for tqdm's whole seconds), so no
    untimed redraw is dated after the stamped record that follows it."""
    for name in ("hf_trainer_crash.log", "hf_trainer_resume.log"):
        events, _ = parse(read_lines(REAL_LOGS / name), clock=True)
        assert _in_file_order(events), name
        assert not [e for e in events if e.parser == "clock"], name


def test_the_lightning_capture_says_it_has_no_timestamps() -> None:
    """Lightning prints no stamp: one ``no_timestamps`` event, at the first event's line (the
    launch's ``GPU available``), says so; its events stay untimed."""
    events, _ = parse(read_lines(REAL_LOGS / "lightning_crash.log"), clock=True)
    finding = _one(events, EventKind.NO_TIMESTAMPS)
    launch = next(e for e in events if e.kind is EventKind.RUN_START)
    assert (finding.line, finding.time, launch.line) == (launch.line, None, 1)
    assert events.index(finding) < events.index(launch)
    assert all(e.time is None for e in events)


def test_a_log_wholly_inside_the_repeated_hour_reports_its_first_stamp() -> None:
    """The trial's run-3 (a real HF Trainer resume, re-timed to 01:00:34-01:01:00 on the
    fall-back night, tests/agent/fixtures/zones/dst) read in America/New_York: its first
    stamped line (15: "***** Running training *****") could be either pass of the hour; it is
    read as the first (EDT, 05:00:34 UTC) and reported once, dated where that pass begins
    (01:00 EDT, 05:00 UTC), with the hour's length."""
    path = Path(__file__).parents[1] / "agent" / "fixtures" / "zones" / "dst" / "run-3.log"
    events, _ = parse(read_lines(path), tz=ZoneInfo("America/New_York"), clock=True)
    [found] = [e for e in events if e.kind == EventKind.AMBIGUOUS_STAMP]
    assert (found.line, found.duration_s) == (15, 3600.0)
    assert found.time == datetime(2026, 11, 1, 5, tzinfo=UTC)
    assert found.detail is not None and "read as its first occurrence (EDT)" in found.detail


def test_a_record_glued_long_after_its_redraw_dates_nothing_by_it() -> None:
    """Records glued after redraws measure the bar's start (glued time - elapsed - 1 s of
    tqdm's truncation), the latest measure kept; one glued more than ``STALE_GLUE_S`` after the
    reading was printed after the bar stopped (the next run's first line after a killed run's
    last redraw): it moves nothing, and the redraw's time is its reading. A run's start
    (``anchor``) alone is a lower bound: a glued record later than it measures the bar."""
    t0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)

    def s(seconds: float) -> datetime:
        return t0 + timedelta(seconds=seconds)

    clock = FileClock()
    assert clock.bar(1, 1.0, 1.0, None, 1) is None
    assert clock.bar(20, 20.0, 1.0, s(20.3), 2) is None  # start t0 - 0.7 s
    assert clock.bar(40, 40.0, 1.0, s(44.0), 3) is None  # 3.7 s later: start t0 + 3 s
    assert clock.bar(75, 75.0, 1.0, s(90.0), 4) == s(78.0)  # 11 s later: the reading
    assert clock.inferred() == s(78.0)
    assert clock.bar(80, 80.0, 1.0, s(83.5), 5) is None
    assert clock.inferred() == s(83.0)
    anchored = FileClock()
    anchored.anchor(t0)
    assert anchored.bar(1, 1.0, 1.0, None, 1) is None
    assert anchored.bar(20, 20.0, 1.0, s(40.0), 2) is None  # the bar began 19 s after the run
    assert anchored.inferred() == s(39.0)
