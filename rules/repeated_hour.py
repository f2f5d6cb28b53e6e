"""Stamps of the hour repeated when clocks fall back, placed where the job's evidence can.

A log file that starts inside the repeated hour (01:00 to 01:59 local on a fall-back night)
has no earlier stamp to tell which pass of the hour its stamps are in: the parser reads them as
the first and reports an ``ambiguous_stamp`` finding (``parsers/timestamps.py`` ``LocalZone``)
dated where that pass begins, with the hour's length. Three things can place the file:

* The file itself: stamps of it read in the second pass were read there from its own earlier
  ones, which were then in the first (the file crossed the change): the reading stands.
* The timing file, whose records are Unix times, which no zone makes ambiguous: the file's
  saves read in the hour, paired with the records of the same steps
  (:func:`rules.sources.save_differences_s`), lie either at them (the first pass stands) or an
  hour before them (the second: the file's observations of the hour are moved onto it).
* The order of the job's runs: a run resumes from a checkpoint already written, so a reading
  that puts a resume from step S before every save of step S in the job (any file's) cannot be
  the right one when the other reading does not (the trial's run-3, resuming from step 160 at
  01:00 EST, read at 05:00 UTC, lay an hour before run-2 saved step 160). Files are placed one
  at a time until none changes, each judged by the files already placed or never in doubt: a
  file placed may place the next (run-4 resumes from run-3's last save).

Otherwise the first reading stays, and a note says which files it concerns and what the other
reading would change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules.model import ClockFinding, Note, NoteCode
from ckpt_advisor.rules.sources import (
    AMBIGUOUS_STAMP,
    ZONE_SLACK_S,
    first_per_source,
    first_per_step,
    save_differences_s,
)
from ckpt_advisor.rules.timeline import BoolArray, FloatArray, Kind, Timeline


@dataclass(frozen=True, slots=True)
class RepeatedHours:
    """What :func:`place_repeated_hours` did.

    Attributes:
        timeline: the timeline with the files placed in the second pass moved onto it.
        placed: the findings of those files.
        n_saves: the saves (steps) paired with the timing file that placed them.
        n_resumes: the resumes the first reading would have put before their checkpoints.
        undecided: the findings of the files left at the first reading, unconfirmed.
    """

    timeline: Timeline
    placed: tuple[ClockFinding, ...]
    n_saves: int
    n_resumes: int
    undecided: tuple[ClockFinding, ...]

    def notes(self) -> tuple[Note, ...]:
        """An ``ambiguous_stamp_placed`` note for the files moved, an ``ambiguous_stamp`` note
        for those undecided (:class:`rules.model.NoteCode`), each naming the files (by name)
        and lines."""
        notes = []
        if self.placed:
            values = {
                "gap_s": _longest(self.placed),
                "n_saves": self.n_saves,
                "n_resumes": self.n_resumes,
            }
            by_name = {f.source: f.line for f in sorted(self.placed, key=_source)}
            notes.append(Note(NoteCode.AMBIGUOUS_STAMP_PLACED, values, by_name=by_name))
        if self.undecided:
            by_name = {f.source: f.line for f in sorted(self.undecided, key=_source)}
            notes.append(
                Note(NoteCode.AMBIGUOUS_STAMP, {"gap_s": _longest(self.undecided)}, by_name)
            )
        return tuple(notes)


def place_repeated_hours(timeline: Timeline, findings: Sequence[ClockFinding]) -> RepeatedHours:
    """Place each file of an ``ambiguous_stamp`` finding in the pass of the repeated hour the
    file itself, the timing file or the order of the runs puts it in (module docstring).

    The finding gives the hour's first pass (from its time, for its length). The file's
    observations read in it are its printed ones (not host-dated, not a timing file's) in
    that span; any read in the span after it (the second pass) were read there from the
    file's own earlier stamps, which were so in the first: the file crossed the change, and
    its reading stands. A file with none in the first pass is not named."""
    shift_s = np.zeros(len(timeline))
    placed: list[ClockFinding] = []
    undecided: list[tuple[ClockFinding, BoolArray]] = []
    n_saves = n_resumes = 0
    for finding in first_per_source(findings, AMBIGUOUS_STAMP):
        rows = _in_pass(timeline, finding, 0)
        if not rows.any() or _in_pass(timeline, finding, 1).any():
            continue
        differences_s = save_differences_s(timeline, rows)
        gap_s = finding.seconds or 0.0
        if differences_s.size and np.abs(differences_s + gap_s).max() <= ZONE_SLACK_S:
            shift_s[rows] = gap_s
            placed.append(finding)
            n_saves += int(differences_s.size)
        elif not differences_s.size or np.abs(differences_s).max() > ZONE_SLACK_S:
            undecided.append((finding, rows))
    changed = True
    while changed:  # a file placed may place another (its resumes load the saves moved)
        changed = False
        for finding, rows in list(undecided):
            others = [r for f, r in undecided if f is not finding]
            unsure = np.logical_or.reduce(others) if others else np.zeros(len(timeline), bool)
            now_s = timeline.time_s + shift_s
            early_first = _early_resumes(timeline, now_s) & ~unsure
            early_second = _early_resumes(timeline, now_s + rows * (finding.seconds or 0.0))
            early_second &= ~unsure
            if early_first.any() == early_second.any():
                continue  # neither reading, or both, put a resume before its checkpoint
            undecided.remove((finding, rows))
            changed = True
            if early_first.any():
                shift_s[rows] = finding.seconds or 0.0
                placed.append(finding)
                n_resumes += int(np.count_nonzero(early_first))
    moved = timeline.with_moved(shift_s != 0, shift_s) if placed else timeline
    return RepeatedHours(moved, tuple(placed), n_saves, n_resumes, tuple(f for f, _ in undecided))


def _early_resumes(timeline: Timeline, time_s: FloatArray) -> BoolArray:
    """Shape (n,): the resumes (with a step, not host-dated) that lie, at ``time_s`` (shape
    (n,)), more than :data:`rules.sources.ZONE_SLACK_S` before every save of their step in
    the job (a ``checkpoint_start`` or ``checkpoint_end`` of any file): a checkpoint loaded
    before it was written. A resume whose step no file saves is not one."""
    placed = np.isfinite(timeline.step) & ~timeline.host_dated
    saves = placed & timeline.is_kind(Kind.CHECKPOINT_START, Kind.CHECKPOINT_END)
    resumes = placed & timeline.is_kind(Kind.RESUME)
    early = np.zeros(len(timeline), np.bool_)
    if not saves.any() or not resumes.any():
        return early
    steps, first_s = first_per_step(timeline.step[saves], time_s[saves])
    resumed = np.flatnonzero(resumes)
    at = np.minimum(np.searchsorted(steps, timeline.step[resumed]), steps.size - 1)
    saved = steps[at] == timeline.step[resumed]
    early[resumed] = saved & (time_s[resumed] < first_s[at] - ZONE_SLACK_S)
    return early


def _in_pass(timeline: Timeline, finding: ClockFinding, n: int) -> BoolArray:
    """Shape (n,): the printed observations of ``finding``'s file read in the first (``n``
    0) or second (``n`` 1) pass of its repeated hour; none without a time or a length."""
    if finding.source not in timeline.sources or finding.time_s is None or not finding.seconds:
        return np.zeros(len(timeline), np.bool_)
    start_s = finding.time_s + n * finding.seconds
    rows: BoolArray = (
        (timeline.source == timeline.sources.index(finding.source))
        & ~timeline.from_timing_file
        & ~timeline.host_dated
        & (timeline.time_s >= start_s)
        & (timeline.time_s < start_s + finding.seconds)
    )
    return rows


def _source(finding: ClockFinding) -> str:
    return finding.source


def _longest(findings: Sequence[ClockFinding]) -> float:
    return max(f.seconds or 0.0 for f in findings)
