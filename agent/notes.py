"""The rules' typed notes (:class:`rules.model.Note`) as sentences, at the edge.

Every duration goes through :func:`agent.units.format_duration`, the one duration style of the
tables, the log and Slack (``3h 12m``), so a message never mixes two. Names from the logs
(failure classes, file paths) are put in as they are: the Slack message escapes the sentence.
"""

from __future__ import annotations

from collections.abc import Callable

from ckpt_advisor.agent.units import format_duration as d
from ckpt_advisor.rules.model import Note, NoteCode


def _count(n: float) -> str:
    return f"{n:,.0f}"


def _untimed(v: dict[str, float]) -> str:
    """``: 2 log file(s) print no timestamps`` when that is the cause, else nothing."""
    n = v.get("n_untimed_files", 0)
    return f": {_count(n)} log file(s) print no timestamps" if n else ""


def _cost_unknown(note: Note) -> str:
    cause = _untimed(note.values)
    return f"no checkpoint duration seen{cause}; C is unknown (a timing file gives it exactly)"


def _current_unknown(note: Note) -> str:
    if cause := _untimed(note.values):
        return f"no two saves at different times{cause}; the current interval is unknown"
    return "no run with two saves: the current interval is unknown"


TIMING_FILE_HOWTO = (
    "a timing file gives the exact value: add hf_trainer_callback, lightning_callback or "
    "checkpoint_timer from ckpt_advisor.agent.training to the training script and list the "
    'file under the job\'s timings (README, "Timing files")'
)
"""How to get an exact C, said wherever C is only a lower bound."""


MISSED_BY_STACK = {
    "hf_trainer": "HF Trainer logs no end of the optimizer-state write",
    "lightning": "Lightning logs a save's start only",
}
"""What a lower-bound C misses, by the stack whose lines it comes from (docs/FORMATS.md §0:
"Few stacks print a save's end"; ``rules/cost.py`` ``SAVE_END_STACKS`` are measured)."""


def _lower_bound(note: Note) -> str:
    v = note.values
    cost = f"C ≥ {d(v['cost_s'])}" if "cost_s" in v else "C"
    upper = (
        f", at most {d(v['upper_s'])} where the progress bar keeps time" if "upper_s" in v else ""
    )
    stack = next(iter(note.by_name), None)
    missed = MISSED_BY_STACK.get(stack or "", "the log may not mark the end of every part of it")
    return (
        f"{cost} is a lower bound (log lines miss part of a save: {missed}{upper}); "
        f"{TIMING_FILE_HOWTO}"
    )


def _after_end(note: Note) -> str:
    listed = ", ".join(f"{n} {name}" for name, n in note.by_name.items())
    return (
        f"failures after their run had ended cleanly ({listed}: a crash at teardown, after "
        "'Training completed') interrupted no training; they are not counted in M"
    )


def _planned(note: Note) -> str:
    listed = ", ".join(f"{name}: {count}" for name, count in note.by_name.items())
    return f"planned ends ({listed}) censor the running time; they are not failures"


def _clock_step(note: Note) -> str:
    [(source, line)] = note.by_name.items()
    seconds = note.values.get("seconds")
    more = int(note.values.get("n_more", 0))
    return (
        f"the clock of {source} stepped back "
        f"{'an unknown time' if seconds is None else d(seconds)} at line {line}"
        + (f" (and {more} more step(s) back)" if more else "")
        + ": its later times were moved forward to keep the file's order, so running time is "
        "summed per stretch of a steady clock, not shrunk by the step"
    )


def _bar_clock(note: Note) -> str:
    [(source, line)] = note.by_name.items()
    return (
        f"the progress bar of {source} does not keep time (from line {line}): its untimed "
        "lines were dated by the file's own stamps, and its failures by the steps the run had "
        "reached"
    )


def _stamp_zone(note: Note) -> str:
    [(source, line)] = note.by_name.items()
    offset_s = note.values["offset_s"]
    return (
        f"the stamps of {source} are {d(abs(offset_s))} "
        f"{'ahead of' if offset_s > 0 else 'behind'} the Unix times it prints on the same lines "
        f"(from line {line}): its times, printed without a zone, were read in the wrong one; its "
        "Unix times were moved onto its stamps' clock, so its spans hold, but its times are off "
        "by that against other sources and now: set --tz (ingest), or the job's timezone or "
        "[parse] timezone (the daemon), to the nodes' zone"
    )


def _from_lines(note: Note) -> str:
    """The note's files, each with the line it starts at: ``a.log (from line 15), …``."""
    return ", ".join(f"{source} (from line {line})" for source, line in note.by_name.items())


def _stamp_after_write(note: Note) -> str:
    return (
        f"the stamps of {_from_lines(note)} lie up to {d(note.values['ahead_s'])} after "
        "their file's last write (its mtime), a time that had not come when the lines were "
        "written: they were "
        "printed in a zone east of the one they were read in (or by a clock that runs ahead). "
        "Nothing was moved (the mtime bounds the offset, it does not give it): the spans within "
        "those files hold, and with them C, M and the intervals measured there, but their "
        "times as stored and shown, how old the data looks, and every span to another source "
        "(a file from another zone, lines the host dated, a timing file's records) are off by "
        "the offset: set --tz (ingest), or the job's timezone or [parse] timezone (the "
        "daemon), to the nodes' zone"
    )


def _repeated_hour(note: Note) -> str:
    """The start both repeated-hour notes share: which files, and why they are named."""
    return (
        f"the stamps of {_from_lines(note)} lie in the hour repeated when clocks fell back, and "
        "no earlier stamp of the file tells which pass of it they are"
    )


def _ambiguous_stamp(note: Note) -> str:
    return (
        f"{_repeated_hour(note)}: they were read as the first; if they are the second, those "
        f"times are {d(note.values['gap_s'])} early, and the spans between them and other files "
        "(restarts, running time, goodput) are off by that; a timing file with the same saves, "
        "or logs in UTC, place them"
    )


def _ambiguous_placed(note: Note) -> str:
    v = note.values
    evidence = []
    if v.get("n_saves"):
        evidence.append(
            f"the timing file's records of {_count(v['n_saves'])} of their saves lie there"
        )
    if v.get("n_resumes"):
        evidence.append(
            f"read in the first, {_count(v['n_resumes'])} resume(s) would load a checkpoint "
            "before any file saved it"
        )
    return (
        f"{_repeated_hour(note)}: they are in the second ({'; '.join(evidence)}), so their "
        f"times were moved {d(v['gap_s'])} later onto it (the times shown by events stay as "
        "read)"
    )


def _no_timestamps(note: Note) -> str:
    named = ", ".join(f"{s} (first event at line {line})" for s, line in note.by_name.items())
    return (
        f"no timestamps in {named}: events are dated when read (a backfill dates them all at "
        "the file's modification time), so save durations, save spacing, restarts and running "
        "time are not measured from them; a logging format with times, or a checkpoint timing "
        "file, gives them"
    )


def _host_dated_failures(note: Note) -> str:
    v = note.values
    named = [f"{source} (from line {line})" for source, line in note.by_name.items()]
    files = ", ".join(named) or "a file without timestamps"
    where = files if len(named) < 2 else f"one or more of {files}"
    n_failures, n_runs = int(v["n_failures"]), int(v["n_runs"])
    counted = (
        f"{_count(n_failures)} interruption(s) count in M though no time of theirs is measured "
        "(no restart, lost work or goodput span ends at them): their lines came before any "
        f"time their file printed, in {where}"
        if n_failures
        else f"M counts running time of {where}"
    )
    running = (
        f"; {d(v['exposure_s'])} of running time over {_count(n_runs)} run(s) is measured as "
        "steps × the step time the file printed (a lower bound)"
        if n_runs
        else "; none of its running time is measured, so M may be too low"
    )
    return counted + running


def _weibull(note: Note) -> str:
    v = note.values
    trend, change = (
        ("cluster soon after restarts", "widened")
        if v["shape"] < 1
        else ("grow with running time", "narrowed")
    )
    return (
        f"times between failures fit a Weibull of shape {v['shape']:.2f} "
        f"({v['shape_low']:.2f}–{v['shape_high']:.2f}): failures {trend}; M's interval is "
        f"{change} to match"
    )


def _values(text: Callable[[dict[str, float]], str]) -> Callable[[Note], str]:
    return lambda note: text(note.values)


def _two_tiers(note: Note) -> str:
    fast = next(iter(note.by_name), "fast")
    v = note.values
    if "fast_interval_s" not in v:
        return (
            f"saves go to two tiers ({fast} and persistent), but no pair is advised yet (no "
            f"interruption of one kind: one a {fast} copy survives, or one it does not); the "
            "interval here is the persistent saves' alone"
        )
    k = v["saves_per_persistent"]
    return (
        f"saves go to two tiers: the interval here is the persistent one; advised: {fast} "
        f"every {d(v['fast_interval_s'])}, one save in {_count(k)} persistent (every "
        f"{d(v['fast_interval_s'] * k)}; estimates --json: tiers)"
    )


_TEXT: dict[NoteCode, Callable[[Note], str]] = {
    NoteCode.COST_UNKNOWN: _cost_unknown,
    NoteCode.COST_LOWER_BOUND: _lower_bound,
    NoteCode.COST_CHANGED: _values(
        lambda v: (
            f"checkpoint cost changed from {d(v['previous_s'])} to {d(v['cost_s'])} over the "
            f"last {_count(v['n_saves'])} saves: C uses those only"
        )
    ),
    NoteCode.NO_FAILURE: _values(
        lambda v: (
            f"no failure in {d(v['exposure_s'])} of running time (last {d(v['window_s'])}): "
            f"M is at least {d(v['mtbf_lower_s'])}"
        )
    ),
    NoteCode.FEW_FAILURES: _values(
        lambda v: (
            f"only {_count(v['n_failures'])} interruption(s) in the last {d(v['window_s'])}: "
            "M is rough"
        )
    ),
    NoteCode.PLANNED_ENDS: _planned,
    NoteCode.AFTER_RUN_END: _after_end,
    NoteCode.PREEMPTIONS: _values(
        lambda v: (
            f"{_count(v['n_preemptions'])} preemption(s) also lose the work since the last "
            f"checkpoint; counting them as failures, M would be {d(v['mtbf_s'])} and the "
            f"interval {d(v['interval_s'])}"
        )
    ),
    NoteCode.FAILURES_REDATED: _values(
        lambda v: (
            f"{_count(v['n_failures'])} failure line(s) carried an earlier line's time; their "
            "time was inferred from the steps the run had reached"
        )
    ),
    NoteCode.CURRENT_INTERVAL_UNKNOWN: _current_unknown,
    NoteCode.CURRENT_INTERVAL_FROM_STEPS: _values(
        lambda v: (
            f"the current interval is {v['interval_steps']:,.0f} steps between saves × "
            f"{d(v['step_s'])} a step: "
            + (
                f"no save is timed ({_count(v['n_untimed_files'])} log file(s) print no timestamps)"
                if v.get("n_untimed_files")
                else "no run lived to two saves to time it (failures come faster than the saves)"
            )
        )
    ),
    NoteCode.SPACING_BELOW_COST: _values(
        lambda v: (
            f"the saves are {d(v['spacing_s'])} apart, no more than C ({d(v['cost_s'])}): "
            "saves that each take C cannot be that close (their times are not the log's own?), "
            "so no current interval is measured from them"
        )
    ),
    NoteCode.STEP_TIME_UNKNOWN: _values(
        lambda v: "no step timing: the interval cannot be given in steps"
    ),
    NoteCode.CLOCK_STEP: _clock_step,
    NoteCode.BAR_CLOCK_IGNORED: _bar_clock,
    NoteCode.STAMP_ZONE_OFFSET: _stamp_zone,
    NoteCode.STAMP_AFTER_WRITE: _stamp_after_write,
    NoteCode.AMBIGUOUS_STAMP: _ambiguous_stamp,
    NoteCode.AMBIGUOUS_STAMP_PLACED: _ambiguous_placed,
    NoteCode.NO_TIMESTAMPS: _no_timestamps,
    NoteCode.ZONE_OFFSET: _values(
        lambda v: (
            f"the log's saves are stamped {d(abs(v['offset_s']))} "
            f"{'after' if v['offset_s'] > 0 else 'before'} the timing file's at the same steps "
            f"({_count(v['n_saves'])} saves): the log's times, printed without a zone, were read "
            "in the wrong one (or the timing file's, written without one, were local times); "
            "the log's were moved by that onto the timing file's clock, so what is measured "
            "between the two holds, but the log's times as stored and shown are off: set --tz "
            "(ingest), or the job's timezone or [parse] timezone (the daemon), to the nodes' zone"
        )
    ),
    NoteCode.HOST_DATED_FAILURES: _host_dated_failures,
    NoteCode.FAILURES_CLAMPED: _values(
        lambda v: (
            f"{_count(v['n_failures'])} failure time(s) that the run's steps would put after "
            "the next line of the log were clamped to that line: the step time, or the step a "
            "failure line reports, is off for them"
        )
    ),
    NoteCode.UNSEEN_INTERRUPTIONS: _values(
        lambda v: (
            f"{_count(v['n_runs'])} run(s) stopped with no failure line and no clean end before "
            "a new run started (a kill or a lost node prints nothing): counted as interruptions "
            "of unknown cause"
        )
    ),
    NoteCode.PERSIST_EXCEEDS_INTERVAL: _values(
        lambda v: (
            f"asynchronous saves take {d(v['persist_s'])} to persist, longer than the "
            f"{d(v['interval_s'])} interval: saves queue up, and a failure can lose more than "
            "one interval"
        )
    ),
    NoteCode.WEIBULL: _weibull,
    NoteCode.FLEET_RATE: _values(
        lambda v: (
            f"too few failures of its own: M is the fleet's per-unit rate "
            f"({_count(v['n_failures'])} failures in {d(v['unit_exposure_s'])} of unit time) "
            f"for {_count(v['units'])} units"
        )
    ),
    NoteCode.HIGH_COST: _values(
        lambda v: (
            f"checkpoint cost is {v['cost_ratio']:.2g}x the MTBF: even the recommended "
            f"interval loses {v['waste_fraction']:.0%} of the running time; checkpointing is "
            "nearly pointless here (make saves cheaper, e.g. asynchronous, or the job more "
            "reliable)"
        )
    ),
    NoteCode.TWO_TIERS: _two_tiers,
}


def render_note(note: Note) -> str:
    """One sentence for ``note`` (no trailing period), its durations as ``format_duration``
    gives them."""
    return _TEXT[note.code](note)
