"""Notes about the log files' clocks: what the parsers found, named by file and line.

The notes are typed (:class:`rules.model.Note`); the agent words them (``agent/notes.py``).

The parsers keep every file's events in its own order and report what they had to do for it
(``parsers/clock.py``); the estimate says so, since each finding bounds what the numbers can
mean: a file without stamps gives no durations, a bar clock that does not keep time dates
nothing, a clock that stepped back was corrected by a guess of the time between two lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules.model import ClockFinding, Note, NoteCode
from ckpt_advisor.rules.saves import TimedSaves
from ckpt_advisor.rules.timeline import BoolArray, FloatArray, Kind, Timeline

CLOCK_STEP = "clock_step"
BAR_CLOCK_IGNORED = "bar_clock_ignored"
NO_TIMESTAMPS = "no_timestamps"
DATED_AT_FIRST_TIME = "dated_at_first_time"
STAMP_ZONE_OFFSET = "stamp_zone_offset"
STAMP_AFTER_WRITE = "stamp_after_write"
AMBIGUOUS_STAMP = "ambiguous_stamp"
FINDING_KINDS = (
    CLOCK_STEP,
    BAR_CLOCK_IGNORED,
    NO_TIMESTAMPS,
    DATED_AT_FIRST_TIME,
    STAMP_ZONE_OFFSET,
    STAMP_AFTER_WRITE,
    AMBIGUOUS_STAMP,
)
"""The event kinds :class:`rules.model.ClockFinding` is read from."""
HOST_DATED_KINDS = (NO_TIMESTAMPS, DATED_AT_FIRST_TIME)
"""The findings after which a file's events up to its first printed time are not its own
times (:attr:`rules.timeline.Timeline.host_dated`): dated by the host, or at that first time."""


ZONE_STEP_S = 900.0
"""Time-zone offsets are whole multiples of 15 minutes (IANA tzdata since 1972)."""
ZONE_SLACK_S = 120.0
"""How far a log's save line and its timing record may lie apart beyond the offset: the
record's start is taken when the callback is called, the line when the framework logs it."""


@dataclass(frozen=True, slots=True)
class ZoneOffset:
    """How far a job's log lies from its timing file (:func:`log_zone_offset`).

    Attributes:
        offset_s: the log's save stamps minus the timing file's at the same steps, seconds: a
            non-zero multiple of :data:`ZONE_STEP_S`.
        n_saves: the steps paired.
    """

    offset_s: float
    n_saves: int

    def note(self) -> Note:
        """The ``zone_offset`` note (:class:`rules.model.NoteCode`): the log's times were moved
        by :attr:`offset_s` onto the timing file's clock for the estimate."""
        return Note(NoteCode.ZONE_OFFSET, {"offset_s": self.offset_s, "n_saves": self.n_saves})


def log_zone_offset(timeline: Timeline) -> ZoneOffset | None:
    """The whole time-zone offset between the log's saves and the timing file's saves at the
    same steps, or None: the log's stamps, printed without an offset (Python logging's
    ``asctime`` is the node's local time), were read in the wrong zone (``--tz``, ``[parse]
    timezone``), or the timing file's naive times (read as UTC) were written in local time;
    either way every span between the two sources is off by it.

    The first save start of each step in the log (``checkpoint_start``) is paired with the
    first timing-file save's start of that step (:class:`rules.saves.TimedSaves`, every record
    taken as one run: records of one step in two runs lie a restart apart, more than
    :data:`rules.saves.SAVE_JOIN_GAP_S`, so they are two saves either way). An offset is
    found when at least two steps pair, all their differences lie within
    :data:`ZONE_SLACK_S` of one multiple of 15 minutes, and it is not zero. Host-dated
    observations (no printed time) are left out.
    """
    differences_s = save_differences_s(timeline, np.ones(len(timeline), np.bool_))
    if differences_s.size < 2:
        return None
    offset_s = ZONE_STEP_S * round(float(np.median(differences_s)) / ZONE_STEP_S)
    if offset_s == 0.0 or np.abs(differences_s - offset_s).max() > ZONE_SLACK_S:
        return None
    return ZoneOffset(offset_s, int(differences_s.size))


def save_differences_s(timeline: Timeline, rows: BoolArray) -> FloatArray:
    """Per step where a log save of ``rows`` (shape (n,)) and a timing-file save pair, the
    log's save start minus the record's, seconds, by step (:func:`log_zone_offset` says how
    they pair); empty when none pair. Host-dated observations are left out."""
    placed = np.isfinite(timeline.step) & ~timeline.host_dated
    logged = rows & placed & timeline.is_kind(Kind.CHECKPOINT_START) & ~timeline.from_timing_file
    if not logged.any() or not timeline.from_timing_file.any():
        return np.zeros(0)
    saves = TimedSaves.of(timeline, np.zeros(len(timeline), np.intp))
    kept = placed[saves.index] & np.isfinite(saves.start_s)  # a record without a duration: no start
    log_steps, log_s = first_per_step(timeline.step[logged], timeline.time_s[logged])
    rec_steps, rec_s = first_per_step(timeline.step[saves.index][kept], saves.start_s[kept])
    _, in_log, in_rec = np.intersect1d(log_steps, rec_steps, return_indices=True)
    differences_s: FloatArray = log_s[in_log] - rec_s[in_rec]
    return differences_s


def first_per_step(steps: np.ndarray, times_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``steps``, ascending, and the earliest of ``times_s`` at each."""
    order = np.lexsort((times_s, steps))
    unique, first = np.unique(steps[order], return_index=True)
    return unique, times_s[order][first]


def untimed_sources(findings: Sequence[ClockFinding]) -> list[str]:
    """The files that printed no timestamp before their first event, in first-seen order."""
    return list(dict.fromkeys(f.source for f in findings if f.kind == NO_TIMESTAMPS))


def clock_notes(findings: Sequence[ClockFinding]) -> tuple[Note, ...]:
    """One note per file and kind of finding, naming the file and the (first) line
    (:class:`rules.model.NoteCode` ``clock_step``, ``bar_clock_ignored``,
    ``stamp_zone_offset``, ``stamp_after_write``, ``no_timestamps``; ``ambiguous_stamp`` is
    :func:`rules.repeated_hour.place_repeated_hours`'s, which may place them).

    Shapes: ``findings`` in any order; returns notes ordered: steps back, bar clocks ignored,
    stamps a zone off their lines' Unix times, stamps after their files' last writes (one note
    for all of them, with the largest lead), files without stamps (one note for all of them).
    """
    notes: list[Note] = []
    steps: dict[str, list[ClockFinding]] = {}
    for finding in findings:
        if finding.kind == CLOCK_STEP:
            steps.setdefault(finding.source, []).append(finding)
    for source, found in steps.items():
        first = min(found, key=lambda f: f.line)
        values: dict[str, float] = {"n_more": len(found) - 1}
        if first.seconds is not None:
            values["seconds"] = first.seconds
        notes.append(Note(NoteCode.CLOCK_STEP, values, by_name={source: first.line}))
    for finding in first_per_source(findings, BAR_CLOCK_IGNORED):
        notes.append(Note(NoteCode.BAR_CLOCK_IGNORED, by_name={finding.source: finding.line}))
    for finding in first_per_source(findings, STAMP_ZONE_OFFSET):
        values = {"offset_s": finding.seconds or 0.0}
        by_name = {finding.source: finding.line}
        notes.append(Note(NoteCode.STAMP_ZONE_OFFSET, values, by_name=by_name))
    ahead = first_per_source(findings, STAMP_AFTER_WRITE)
    if ahead:
        values = {"ahead_s": max(f.seconds or 0.0 for f in ahead)}
        by_name = {f.source: f.line for f in ahead}
        notes.append(Note(NoteCode.STAMP_AFTER_WRITE, values, by_name=by_name))
    untimed = untimed_sources(findings)
    if untimed:
        lines = {f.source: f.line for f in first_per_source(findings, NO_TIMESTAMPS)}
        notes.append(Note(NoteCode.NO_TIMESTAMPS, by_name={s: lines[s] for s in untimed}))
    return tuple(notes)


def host_dated_notes(
    n_failures: int,
    stepped_s: float,
    n_runs: int,
    findings: Sequence[ClockFinding],
) -> tuple[Note, ...]:
    """A note (:class:`rules.model.NoteCode` ``host_dated_failures``) when M counts
    interruptions of files without stamps (``n_failures`` of them, in the M window) or running
    time measured from their steps (``stepped_s`` over ``n_runs`` runs,
    :func:`rules.runs.stepped_exposure_s`), naming the files (a finding of
    :data:`HOST_DATED_KINDS`) and their first such event's line; none otherwise."""
    if not (n_failures or n_runs):
        return ()
    values = {"n_failures": n_failures, "exposure_s": stepped_s, "n_runs": n_runs}
    found = [f for kind in HOST_DATED_KINDS for f in first_per_source(findings, kind)]
    by_name = {f.source: f.line for f in found}
    return (Note(NoteCode.HOST_DATED_FAILURES, values, by_name=by_name),)


def first_per_source(findings: Sequence[ClockFinding], kind: str) -> list[ClockFinding]:
    """The first finding (by line) of ``kind`` in each file, in the order of those lines."""
    first: dict[str, ClockFinding] = {}
    for finding in sorted((f for f in findings if f.kind == kind), key=lambda f: f.line):
        first.setdefault(finding.source, finding)
    return list(first.values())
