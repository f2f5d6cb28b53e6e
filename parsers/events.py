"""Typed events that parsers produce from training-log text.

An event is one fact read from one line: a checkpoint save started or ended, a failure, a
restart, a resume from a checkpoint, or training progress at a step. Events are plain values:
frozen, slotted, comparable, with times as aware UTC datetimes (or ``None`` when the line carries
no usable wall-clock time; the agent then dates it from the file's own clock, or the read time
for a file that prints none, marked ``time_estimated``: see ``agent/tail/dating.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class EventKind(StrEnum):
    """What an event says happened. Values are the ``kind`` strings of the CLI JSON contract."""

    CHECKPOINT_START = "checkpoint_start"
    """A checkpoint save began (training stalls from here)."""
    CHECKPOINT_END = "checkpoint_end"
    """A checkpoint save finished; ``duration_s`` is set when the source gives or implies it."""
    FAILURE = "failure"
    """An unexpected interruption or a planned end, classified by ``failure_class``."""
    RESTART = "restart"
    """A launcher or scheduler restarts the job (torchrun restart, Slurm requeue)."""
    RESUME = "resume"
    """Training resumed from a checkpoint; ``step`` is the step it resumed at, when printed."""
    RUN_START = "run_start"
    """A training run began (banner such as ``***** Running training *****``)."""
    RUN_END = "run_end"
    """A training run ended cleanly (finished, ``max_steps`` reached)."""
    STEP = "step"
    """Training progress: ``step`` reached at ``time``."""
    CLOCK_STEP = "clock_step"
    """The file's clock stepped back at this line by ``duration_s`` seconds; the file's later
    times are moved forward by it to keep the file's order (``parsers/clock.py``)."""
    BAR_CLOCK_IGNORED = "bar_clock_ignored"
    """From this line the progress bar's clock is not used to date untimed lines: it does not
    advance with its steps, goes back or runs ahead of the file's stamps."""
    NO_TIMESTAMPS = "no_timestamps"
    """The file printed no time before this line, which holds an event: its events carry no
    time of their own (the reader dates them)."""
    DATED_AT_FIRST_TIME = "dated_at_first_time"
    """The file printed no time before this line, which holds an event, but did later (a
    Megatron-LM ``loading checkpoint`` line before the run's first stamp): its events from
    here up to the first printed time are dated at it (``time_estimated``; they happened at or
    before it), and, as a file's without stamps, no span is measured from them."""
    STAMP_ZONE_OFFSET = "stamp_zone_offset"
    """The file's stamps lie a whole time-zone offset (``duration_s``: the stamp minus the Unix
    time printed on the same line, seconds) from the Unix times it prints (NeMo's
    ``time.time()``): its stamps, printed without a zone, were read in the wrong one, and the
    printed Unix times are put on the stamps' clock so that spans within the file hold."""
    AMBIGUOUS_STAMP = "ambiguous_stamp"
    """This line's stamp lies in the hour repeated when clocks fall back, and no earlier stamp
    of the file places it (``parsers.timestamps.LocalZone``): it and the file's later stamps of
    that hour were read as the first occurrence; ``time``: where that first pass begins (UTC),
    ``duration_s``: how much later the second reading is (the hour's length, seconds). Once
    per file."""
    STAMP_AFTER_WRITE = "stamp_after_write"
    """A stamp the file printed lies after the file's last write (its mtime) by ``duration_s``
    seconds: a time that had not come yet when the line was written, so the stamps (printed
    without a zone) were read in a zone west of theirs, or the node's clock runs ahead. Found
    by the reader, which knows the file (``agent/tail/dating.py``); once per file."""
    INTERVAL_CHANGE = "interval_change"
    """The job moved its checkpoint interval (an adopted advice, ``parsers/adoption.py``):
    ``step`` where the new interval starts, ``duration_s`` the new interval in seconds."""


CLOCK_KINDS = frozenset(
    (
        EventKind.CLOCK_STEP,
        EventKind.BAR_CLOCK_IGNORED,
        EventKind.NO_TIMESTAMPS,
        EventKind.DATED_AT_FIRST_TIME,
        EventKind.STAMP_ZONE_OFFSET,
        EventKind.STAMP_AFTER_WRITE,
        EventKind.AMBIGUOUS_STAMP,
    )
)
"""Kinds that say something about a file's clock, not about training (``parsers/clock.py``)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One fact read from one line of a log or timing file.

    Attributes:
        kind: what happened.
        line: 1-based line number in the source where the event's record starts.
        parser: name of the parser (training stack) that recognised it, e.g. ``"hf_trainer"``.
        time: aware UTC datetime of the event, or ``None`` if the line carries no wall-clock time.
        time_estimated: True when ``time`` was not printed on the event's line but inferred
            (e.g. from a tqdm bar's elapsed time and the bar's start).
        step: training step (global step / iteration) the event refers to, if known.
        duration_s: seconds; for ``checkpoint_end`` the blocking checkpoint cost; for ``step``
            the smoothed seconds per step the progress bar showed; for ``interval_change`` the
            new interval (compute time between saves).
        failure_class: short snake_case class for failures, e.g. ``cuda_illegal_memory_access``.
        planned: for failures, True when the end was planned (time limit, cancel): it censors
            exposure but is not counted as a failure in MTBF.
        persist_s: for asynchronous saves, seconds the background persist took (not blocking).
        detail: short free text from the line (checkpoint path, exception message), for humans.
        tier: for saves, where the checkpoint went when the source says (``memory``,
            ``local``, ``persistent``: a timing record's ``tier``); None when not said.
    """

    kind: EventKind
    line: int
    parser: str
    time: datetime | None = None
    step: int | None = None
    duration_s: float | None = None
    failure_class: str | None = None
    planned: bool = False
    persist_s: float | None = None
    detail: str | None = None
    time_estimated: bool = False
    tier: str | None = None

    def estimated_at(self, time: datetime) -> Event:
        """This event dated ``time``, marked ``time_estimated`` (a time inferred, not printed).

        Equal to ``dataclasses.replace(self, time=time, time_estimated=True)``, at a tenth of
        its cost: a backfill dates thousands of bar ``step`` events this way."""
        return Event(
            self.kind,
            self.line,
            self.parser,
            time,
            self.step,
            self.duration_s,
            self.failure_class,
            self.planned,
            self.persist_s,
            self.detail,
            True,
            self.tier,
        )
