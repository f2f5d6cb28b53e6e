"""One log file's own clock: its printed stamps in file order, and a progress bar's clock.

File order is the order of events within a file. The times a log parser gives its events keep
that order, whatever the clocks that printed them:

* **A clock that steps back.** A stamp more than :data:`STEP_TOLERANCE_S` before the newest
  stamp of the file (a node whose clock was set back, a restart on a node whose clock is
  behind) is a step back. From that line on, the file's times are moved forward by the step, so
  the file's timeline stays monotone and running time is summed per stretch of a steady clock
  instead of folding the later stretch onto the earlier one. When a later stamp is in order
  again by itself (the clock was set right), the shift is dropped. Each step is reported once,
  as a ``clock_step`` event at its line (at most :data:`MAX_STEP_REPORTS` per file). Smaller
  disorder (ranks flushing late, a little skew) is kept as printed; a jump back of more than
  :data:`RESTART_S` is no clock's step but another log pasted after this one, and starts the
  file's clock afresh.
* **A bar clock is used only while it advances with its steps.** A tqdm bar shows the seconds
  since it was created (tqdm 4.x ``format_meter`` ``{elapsed}``, whole seconds), so with its
  start known, each redraw dates the line it is on. The start is taken from a stamped record
  glued after a redraw (its time minus the elapsed seconds, minus one for the truncation, so a
  reading is never later than the redraw) or from the run's ``run_start``/``resume`` record
  (HF Trainer creates its bar right after them). A bar is trusted once its elapsed time has
  grown between two steps, and from then on only while it keeps growing: a bar whose elapsed
  time stays put while its steps take more than :data:`FROZEN_S` (``[12:00:00<99:00:00, …]``
  on every redraw: wrappers, resumed bars, some custom loggers), goes back, or runs ahead of the
  file's own stamps is ignored until the next bar starts, and reported once per file as a
  ``bar_clock_ignored`` event.
* **An untimed line** (a traceback, a bare bar) is dated by the latest moment the file has
  shown before it: the newest stamp, or the trusted bar's last reading if later. Both are lower
  bounds of the line's time, so the inferred time lies between the stamps before and after it.

One instance per parser (per file); pure, no clock of its own.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, timedelta

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.timestamps import LocalZone, first_pass_start

STEP_TOLERANCE_S = 300.0
"""How far a stamp may lie before the newest one without being a step of the clock, seconds
(ranks that flush late, the repeated hour of a DST change resolved by ``LocalZone``)."""

RESTART_S = 86400.0
"""A stamp this far before the newest one starts the file's clock afresh (logs of two jobs in
one file), seconds: clocks step by minutes or hours (a zone mistaken, NTP setting a clock)."""

FROZEN_S = 3.0
"""Seconds of steps (steps × tqdm's seconds per step) after which a bar whose elapsed time has
not changed is frozen: tqdm prints whole seconds, so up to one second of steps may show none."""

STALE_GLUE_S = 5.0
"""How much later than the bar's reading a record glued after a redraw may have been printed
and still measure the bar's start, seconds. A record printed later came after the bar had
stopped: the next run's first line after the last redraw of a run killed with SIGKILL (no
newline ended it; ``>> train.log`` across restarts), or a save after an evaluation that drew
no training bar. Readings off fresh glues differ by tqdm's whole seconds (1 s each side)."""

AHEAD_S = 2.0
"""How far a bar's reading may lie after a later stamp before the bar is taken to run ahead of
the file's clock, seconds (stamps in milliseconds against tqdm's whole seconds)."""

MAX_STEP_REPORTS = 10
"""Clock steps reported per file; a file whose lines come from clocks that disagree (nodes
printing into one file) would otherwise give an event per line."""

_RESOLUTION = timedelta(seconds=1)
# the constants above as timedeltas, made once: each timedelta() call parses its keywords
# (~1,600 instructions), and printed() is called for every stamp read; a bar's seconds are
# made timedelta(0, s), the same value as timedelta(seconds=s) (days, then seconds, in the
# same arithmetic) without the keywords
_TOLERANCE, _RESTART, _AHEAD, _STALE_GLUE = (
    timedelta(seconds=s) for s in (STEP_TOLERANCE_S, RESTART_S, AHEAD_S, STALE_GLUE_S)
)
_NO_SHIFT = timedelta(0)
_CLOCK_PARSER = "clock"


class FileClock:
    """The clock of one log file; see the module docstring.

    Feed it, in line order: :meth:`printed` for every stamp the parser reads, :meth:`bar` for
    every redraw of the training bar, :meth:`anchor` for every dated ``run_start``/``resume``.
    Ask :meth:`corrected` for the file-order time of a printed stamp and :meth:`inferred` for
    the time of an untimed line (and call :meth:`untimed` for an event left without one);
    :meth:`take_findings` returns the ``clock_step``, ``bar_clock_ignored`` and
    ``no_timestamps`` events found since the last call.
    """

    def __init__(self, zone: LocalZone | None = None) -> None:
        self._zone = zone
        """The zone the file's stamps are read in, when it resolves DST transitions: its
        :attr:`LocalZone.undecided` stamps are reported (:meth:`printed`), once per file."""
        self._reported_ambiguous = False
        self._newest: datetime | None = None
        """Newest corrected stamp so far."""
        self._newest_line = 0
        self._shift = timedelta(0)
        self._shifts: list[tuple[int, timedelta]] = []
        """(line, shift from that line on), in line order."""
        self._n_steps = 0
        self._findings: list[Event] = []
        self._zone_offsets: set[float] = set()
        """Zone offsets reported (:meth:`zone_offset`): each once."""
        # the training bar
        self._origin: datetime | None = None
        """Lower bound of the bar's creation time (corrected)."""
        self._measured = False
        """Whether :attr:`_origin` was measured by a record glued after a redraw (not only
        the run's start)."""
        self._last: tuple[int, float] | None = None
        """(step, elapsed seconds) of the last redraw."""
        self._still_since: tuple[int, float] | None = None
        """(step, elapsed) of the first redraw that showed the current elapsed value."""
        self._trusted = False
        self._ignored = False
        self._reported_bar = False
        self._reported_untimed = False
        self.runtime_stamp: str | None = None
        """The container runtime's stamp of the line being read (``kubectl logs --timestamps``,
        ``parsers/line_stamps.py``), set by the log parser for each line; None without one.
        It dates the line's records and failures that print no time of their own."""

    def has_stamp(self) -> None:
        """An event read a printed time that :meth:`printed` does not take (a launcher's or
        the kernel's stamp on a failure line: another process's clock, never a step of this
        file's): the file is not without stamps."""
        self._reported_untimed = True

    def shift_at(self, lineno: int) -> timedelta:
        """How far the stamps of line ``lineno`` are moved forward (zero before any step)."""
        at = bisect_right(self._shifts, (lineno, timedelta.max)) - 1
        return self._shifts[at][1] if at >= 0 else _NO_SHIFT

    def corrected(self, time: datetime, lineno: int) -> datetime:
        """The file-order time of a stamp printed on line ``lineno``."""
        return time + self.shift_at(lineno)

    def printed(self, time: datetime, lineno: int) -> None:
        """Take a stamp printed on line ``lineno`` (a stamp of an earlier line than one already
        taken is a late report of an event and changes nothing). A stamp of the repeated
        hour that the file's earlier stamps do not place is reported, the first of the file,
        as an ``ambiguous_stamp`` event (:meth:`_ambiguous`)."""
        zone = self._zone
        if zone is not None and zone.undecided is not None:
            if not self._reported_ambiguous:
                self._ambiguous(lineno, *zone.undecided)
            zone.undecided = None
        if lineno < self._newest_line:
            return
        if self._newest is not None:
            here = time + self._shift
            if self._shift and time >= self._newest - _TOLERANCE:
                self._set_shift(lineno, _NO_SHIFT)  # the clock was set right again
            elif here < self._newest - _RESTART:
                if self._shift:
                    self._set_shift(lineno, _NO_SHIFT)
                self._newest = None  # another log pasted after this one: start afresh
            elif here < self._newest - _TOLERANCE:
                self._step_back(time, here, lineno)
        here = time + self._shift
        if self._origin is not None and self._trusted and self._last is not None:
            reading = self._origin + timedelta(0, self._last[1])
            if reading - here > _AHEAD:
                self._ignore_bar(lineno, self._last[0], "runs ahead of the file's stamps")
        if self._newest is None or here > self._newest:
            self._newest = here
        self._newest_line = lineno

    def anchor(self, time: datetime) -> None:
        """A new training bar starts at ``time`` (corrected): a dated ``run_start``/``resume``."""
        self._origin = time
        self._last = self._still_since = None
        self._trusted = self._ignored = self._measured = False

    def bar(
        self,
        step: int,
        elapsed_s: float,
        seconds_per_step: float | None,
        glued: datetime | None,
        lineno: int,
    ) -> datetime | None:
        """Take a redraw of the training bar on line ``lineno``: its step, elapsed seconds,
        tqdm's seconds per step (None while unknown) and the corrected time of a record glued
        after it, if any. Returns the bar's reading when ``glued`` came more than
        :data:`STALE_GLUE_S` after it (the bar's start measured by earlier glues, the bar
        trusted): the redraw's time, where the glued record's is not (it does not move the
        bar's start); else None."""
        last = self._last
        if last is not None and step < last[0]:  # another bar: its start is not known yet
            self._origin = None
            self._trusted = self._ignored = self._measured = False
            last = self._still_since = None
        if last is not None and not self._ignored:
            if elapsed_s < last[1]:
                self._ignore_bar(lineno, step, "goes back")
            elif elapsed_s > last[1]:
                self._trusted = True
                self._still_since = (step, elapsed_s)
            elif self._still_since is not None and seconds_per_step is not None:
                still_s = (step - self._still_since[0]) * seconds_per_step
                if still_s >= FROZEN_S:
                    self._ignore_bar(lineno, step, "does not advance with its steps")
        if self._still_since is None:
            self._still_since = (step, elapsed_s)
        self._last = (step, elapsed_s)
        if glued is None:
            return None
        elapsed = timedelta(0, elapsed_s)
        start = glued - elapsed - _RESOLUTION
        origin = self._origin
        if origin is None:
            self._origin = start
        elif self._measured and start - origin > _STALE_GLUE and self._reading() is not None:
            return origin + elapsed
        else:
            self._origin = max(origin, start)
        self._measured = True
        return None

    def inferred(self) -> datetime | None:
        """The time of an untimed line read now: the latest of the newest stamp and the
        trusted bar's last reading; None when the file has shown neither."""
        reading = self._reading()
        if reading is None:
            return self._newest
        return reading if self._newest is None else max(reading, self._newest)

    @property
    def stampless(self) -> bool:
        """Whether the file has shown no time yet (no stamp, no printed time on an event) and
        :meth:`untimed` has not reported it."""
        return self._newest is None and not self._reported_untimed

    def untimed(
        self, lineno: int, *, yearless: bool = False, dated_at: datetime | None = None
    ) -> None:
        """An event of line ``lineno`` has no time: report once, as a ``no_timestamps`` event,
        when the file has shown no stamp before it (Lightning prints none; its events are then
        dated by whoever reads the file). ``yearless``: the file printed stamps, but none with
        a year (glog's ``E1129 23:03:27``) and no full date anywhere to take it from.
        ``dated_at``: the file's first printed time, which came later (a Megatron-LM resume
        line before the first stamp): the events from ``lineno`` up to it were dated at it, an
        upper bound; the report is then a ``dated_at_first_time`` event, dated there too
        (``time_estimated``)."""
        if self._newest is not None or self._reported_untimed:
            return  # stamped, or said already
        self._reported_untimed = True
        if dated_at is not None:
            detail = (
                "the file printed no time before this line: its events up to its first time "
                f"({dated_at.isoformat(sep=' ')}) are dated at it, the latest they can have "
                "happened, and no span is measured from them"
            )
        elif yearless:
            detail = (
                "the file printed times without a year and no full date to take it from: its "
                "events carry no time of their own"
            )
        else:
            detail = (
                "the file printed no time before this line: its events carry no time of their own"
            )
        self._findings.append(
            Event(
                EventKind.NO_TIMESTAMPS if dated_at is None else EventKind.DATED_AT_FIRST_TIME,
                lineno,
                _CLOCK_PARSER,
                time=dated_at,
                time_estimated=dated_at is not None,
                detail=detail,
            )
        )

    def zone_offset(self, lineno: int, offset_s: float, time: datetime) -> None:
        """Line ``lineno`` prints a Unix time ``offset_s`` seconds (a whole zone offset, not
        zero) off its own stamp: report it, once per offset, as a ``stamp_zone_offset`` event
        dated ``time``, that Unix time moved onto the stamps' clock (the time of the line's
        event, which the finding then precedes in the store's order too;
        :meth:`parsers.stack.Stack.epoch_time`)."""
        if offset_s in self._zone_offsets:
            return
        self._zone_offsets.add(offset_s)
        self._find(
            EventKind.STAMP_ZONE_OFFSET,
            lineno,
            time,
            offset_s,
            f"the stamps are {abs(offset_s):.0f} s "
            f"{'ahead of' if offset_s > 0 else 'behind'} the Unix time this line prints: "
            "they were read in the wrong zone (set the nodes' zone); the file's Unix "
            "times are moved onto its stamps' clock",
        )

    def _find(
        self, kind: EventKind, lineno: int, time: datetime, seconds: float, detail: str
    ) -> None:
        """Add a finding of ``kind`` about line ``lineno``, dated ``time`` (marked estimated:
        a finding dates no held event), ``seconds`` its ``duration_s``."""
        self._findings.append(
            Event(
                kind,
                lineno,
                _CLOCK_PARSER,
                time=time,
                time_estimated=True,
                duration_s=seconds,
                detail=detail,
            )
        )

    def _ambiguous(self, lineno: int, first: datetime, second: datetime) -> None:
        """Report the stamp of line ``lineno``, read as ``first`` though it could be the later
        ``second`` (the repeated hour after clocks fall back), as an ``ambiguous_stamp`` event
        dated where the hour's first pass begins (:func:`first_pass_start`: the file's times
        read in that pass are from there to ``duration_s`` later, the hour's length)."""
        assert self._zone is not None
        self._reported_ambiguous = True
        zone = self._zone.zone
        local = first.astimezone(zone)
        self._find(
            EventKind.AMBIGUOUS_STAMP,
            lineno,
            first_pass_start(first, second, zone),
            (second - first).total_seconds(),
            f"stamp {local.replace(tzinfo=None).isoformat(sep=' ')} lies in the hour repeated "
            f"when clocks fell back in {zone}, and no earlier stamp of the file places it: read "
            f"as its first occurrence ({local.tzname()}); if it is the second "
            f"({second.astimezone(zone).tzname()}), the file's times are "
            f"{_hms(second - first)} early",
        )

    def take_findings(self) -> list[Event]:
        """The events found since the last call, in line order of discovery."""
        found, self._findings = self._findings, []
        return found

    def _reading(self) -> datetime | None:
        if self._origin is None or self._last is None or not self._trusted or self._ignored:
            return None
        return self._origin + timedelta(0, self._last[1])

    def _set_shift(self, lineno: int, shift: timedelta) -> None:
        self._shift = shift
        self._shifts.append((lineno, shift))

    def _step_back(self, time: datetime, here: datetime, lineno: int) -> None:
        """A step back at ``lineno``: its stamp is put at the latest moment the file has shown
        (the trusted bar measures the time since the last stamp, if it still runs)."""
        assert self._newest is not None
        reading = self._reading()
        target = self._newest if reading is None else max(self._newest, reading)
        back = target - here
        self._set_shift(lineno, self._shift + back)
        self._n_steps += 1
        if self._n_steps > MAX_STEP_REPORTS:
            return
        self._findings.append(
            Event(
                EventKind.CLOCK_STEP,
                lineno,
                _CLOCK_PARSER,
                time=target,
                duration_s=back.total_seconds(),
                time_estimated=True,
                detail=(
                    f"stamp {time.isoformat(sep=' ')} lies {_hms(back)} before the file's "
                    f"latest time: its times from here on are moved forward by "
                    f"{_hms(self._shift)} to keep the file's order"
                ),
            )
        )

    def _ignore_bar(self, lineno: int, step: int, why: str) -> None:
        self._ignored = True
        self._trusted = False
        if self._reported_bar:
            return
        self._reported_bar = True
        self._findings.append(
            Event(
                EventKind.BAR_CLOCK_IGNORED,
                lineno,
                _CLOCK_PARSER,
                time=self._newest,
                step=step,
                time_estimated=True,
                detail=(
                    f"the progress bar's clock {why}: untimed lines are dated by the file's "
                    "own stamps instead"
                ),
            )
        )


def _hms(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
