"""Values that flow into and out of the rules: observations in, estimates and decisions out.

``rules`` never imports ``parsers`` or ``agent``: the agent turns stored events into
:class:`Observation` values (times as Unix epoch seconds, UTC) and hands them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the timeline's module imports this one
    from ckpt_advisor.rules.goodput import GoodputSpans
    from ckpt_advisor.rules.interruptions import Interruption
    from ckpt_advisor.rules.tier_estimate import TierEstimate


class Status(StrEnum):
    """Verdict on a job's checkpoint interval (the ``status`` key of ``estimates --json``)."""

    OK = "ok"
    DRIFT = "drift"
    INSUFFICIENT_DATA = "insufficient_data"


@dataclass(frozen=True, slots=True)
class Observation:
    """One stored event reduced to what the estimators need.

    Attributes:
        kind: an event kind string: ``checkpoint_start``, ``checkpoint_end``, ``failure``,
            ``restart``, ``resume``, ``run_start``, ``run_end`` or ``step``.
        time_s: Unix epoch seconds (UTC) of the event.
        step: training step, if known.
        duration_s: for ``checkpoint_end``, the blocking checkpoint cost in seconds, if known;
            for ``step``, seconds per step when the log gives it (e.g. tqdm's rate).
        failure_class: for ``failure``, the snake_case class.
        planned: for ``failure``, a planned end (time limit, cancel): censors, does not count.
        from_timing_file: True when read from a checkpoint timing file (exact C), not a log.
        persist_s: for asynchronous saves, background persist seconds (not blocking).
        source: an identifier of the file the event came from (runs never span two sources'
            gaps silently; used to tell runs apart when a new log file starts).
        tier: for saves, the tier the checkpoint went to when said (``memory``, ``local``,
            ``persistent``: ``rules/tiers.py``), else None.
        host_dated: True when ``time_s`` is not the log's: the file had printed no time
            before this event, so the host dated it (the read time live, the file's mtime in a
            backfill; ``agent/tail/dating.py``).
    """

    kind: str
    time_s: float
    step: int | None = None
    duration_s: float | None = None
    failure_class: str | None = None
    planned: bool = False
    from_timing_file: bool = False
    persist_s: float | None = None
    source: str = ""
    tier: str | None = None
    host_dated: bool = False


@dataclass(frozen=True, slots=True)
class ClockFinding:
    """What a parser found about one log file's clock: a stored ``clock_step``,
    ``bar_clock_ignored``, ``no_timestamps``, ``dated_at_first_time`` or ``stamp_zone_offset``
    event (``parsers/clock.py``), or a ``stamp_after_write`` one (``agent/tail/dating.py``).

    Attributes:
        kind: the event's kind string.
        source: the file it was found in.
        line: 1-based line where it was found.
        seconds: for ``clock_step``, how far the clock stepped back; for
            ``stamp_zone_offset``, the stamps minus the Unix times (seconds); for
            ``stamp_after_write``, how far the stamp lies after the file's mtime; for
            ``ambiguous_stamp``, how much later its second reading is; else None.
        time_s: the finding's time (epoch s): for ``ambiguous_stamp``, the stamp's first
            reading, the one taken; None when it has none.
    """

    kind: str
    source: str
    line: int
    seconds: float | None = None
    time_s: float | None = None


class NoteCode(StrEnum):
    """What a caveat of an estimate is about; its numbers are in :attr:`Note.values` (and
    :attr:`Note.by_name`).

    The agent renders each code as a sentence (``agent/notes.py``), in the one duration style
    of its messages; the rules never write prose. Keys per code (seconds end in ``_s``):

    - ``cost_unknown``: ``n_untimed_files`` (log files without timestamps: the likely cause).
    - ``cost_lower_bound``: ``cost_s`` (C from log lines, a lower bound), ``upper_s`` (an upper
      bound where a progress bar keeps time; absent when C is open above).
    - ``cost_changed``: ``previous_s``, ``cost_s``, ``n_saves`` (the saves C now rests on).
    - ``no_failure``: ``exposure_s``, ``window_s``, ``mtbf_lower_s``.
    - ``few_failures``: ``n_failures``, ``window_s``.
    - ``planned_ends``: ``by_name``: the planned ends by class.
    - ``after_run_end``: ``by_name``: by class, the interruptions whose first failure came
      after their run ended cleanly (an abort at teardown): not counted in M.
    - ``preemptions``: ``n_preemptions``, ``mtbf_s``, ``interval_s`` (if they counted).
    - ``failures_redated``: ``n_failures``.
    - ``current_interval_unknown``: ``n_untimed_files``. ``step_time_unknown``: none.
    - ``spacing_below_cost``: ``spacing_s`` (the median spacing of the saves in force),
      ``cost_s`` (C, or its lower bound): saves that stall training for C cannot be closer
      than C, so that spacing is not the job's and no current interval is measured from it.
    - ``current_interval_from_steps``: ``interval_steps`` (the save spacing in steps, read
      across runs), ``step_s``, ``n_untimed_files``: no two saves of a run were timed (none
      lived to a second save, or their files print no timestamps), so the interval is the
      product.
    - ``clock_step``: ``by_name``: the file and the line where its clock first stepped back;
      ``seconds`` (how far; absent when unknown), ``n_more`` (further steps back in it).
    - ``bar_clock_ignored``: ``by_name``: the file and the line from which its progress bar was
      not trusted to keep time.
    - ``no_timestamps``: ``by_name``: each file without stamps and its first event's line.
    - ``zone_offset``: ``offset_s`` (the log's save stamps minus the timing file's at the same
      steps, a whole time-zone offset), ``n_saves`` (the steps paired). The estimate moved the
      log's printed times by ``-offset_s`` onto the timing file's clock
      (:func:`rules.sources.log_zone_offset`).
    - ``stamp_zone_offset``: ``offset_s`` (a file's stamps minus the Unix times it prints on
      the same lines, a whole time-zone offset); ``by_name``: the file and the first such line.
      Its Unix times were moved onto its stamps' clock, so the file agrees with itself, but
      its stamps were read in the wrong zone.
    - ``stamp_after_write``: ``ahead_s`` (the most that a file's first stamp after its last
      write lies after it); ``by_name``: each such file and that stamp's line. Times that had
      not come when the lines were written: the stamps were read in a zone west of the one
      they were printed in (or a node's clock runs ahead), and nothing was moved.
    - ``ambiguous_stamp``: ``gap_s`` (how much later the second reading of the hour repeated
      when clocks fall back is); ``by_name``: each file whose stamps of that hour no earlier
      stamp placed, and its first such line. They were read as the first occurrence, and
      no timing-file record of their saves confirms or moves them.
    - ``ambiguous_stamp_placed``: ``gap_s`` (the hour's length), ``n_saves`` (their saves the
      timing file's records put in the second pass), ``n_resumes`` (their resumes the first
      pass would put before every save of their step); ``by_name``: each file whose stamps of
      that hour were moved into its second pass, and its line.
    - ``host_dated_failures``: ``n_failures`` (interruptions in files without stamps, counted
      in M), ``exposure_s`` (running time measured as steps × the printed step time, over
      ``n_runs`` runs without placed times); ``by_name``: each file without stamps and its
      first event's line.
    - ``failures_clamped``: ``n_failures`` (times clamped to the next line of their log).
    - ``unseen_interruptions``: ``n_runs``.
    - ``persist_exceeds_interval``: ``persist_s``, ``interval_s``.
    - ``weibull``: ``shape``, ``shape_low``, ``shape_high``.
    - ``fleet_rate``: ``n_failures``, ``unit_exposure_s``, ``units``.
    - ``high_cost``: ``cost_ratio`` (C/M), ``waste_fraction`` (at the recommended interval).
    - ``two_tiers``: ``by_name``: the fast tier (its count of saves); ``fast_interval_s`` and
      ``saves_per_persistent`` when a pair is advised (the estimate's interval is then the
      persistent one), else none (no pair: an MTBF per tier unknown, or C1 >= C2).
    """

    COST_UNKNOWN = "cost_unknown"
    COST_LOWER_BOUND = "cost_lower_bound"
    COST_CHANGED = "cost_changed"
    NO_FAILURE = "no_failure"
    FEW_FAILURES = "few_failures"
    PLANNED_ENDS = "planned_ends"
    AFTER_RUN_END = "after_run_end"
    PREEMPTIONS = "preemptions"
    FAILURES_REDATED = "failures_redated"
    CURRENT_INTERVAL_UNKNOWN = "current_interval_unknown"
    CURRENT_INTERVAL_FROM_STEPS = "current_interval_from_steps"
    SPACING_BELOW_COST = "spacing_below_cost"
    STEP_TIME_UNKNOWN = "step_time_unknown"
    CLOCK_STEP = "clock_step"
    BAR_CLOCK_IGNORED = "bar_clock_ignored"
    NO_TIMESTAMPS = "no_timestamps"
    ZONE_OFFSET = "zone_offset"
    STAMP_ZONE_OFFSET = "stamp_zone_offset"
    STAMP_AFTER_WRITE = "stamp_after_write"
    AMBIGUOUS_STAMP = "ambiguous_stamp"
    AMBIGUOUS_STAMP_PLACED = "ambiguous_stamp_placed"
    HOST_DATED_FAILURES = "host_dated_failures"
    FAILURES_CLAMPED = "failures_clamped"
    UNSEEN_INTERRUPTIONS = "unseen_interruptions"
    PERSIST_EXCEEDS_INTERVAL = "persist_exceeds_interval"
    WEIBULL = "weibull"
    FLEET_RATE = "fleet_rate"
    HIGH_COST = "high_cost"
    TWO_TIERS = "two_tiers"


@dataclass(frozen=True, slots=True)
class Note:
    """One caveat of an estimate: a code and the numbers behind it (see :class:`NoteCode`).

    Attributes:
        code: what the caveat is about.
        values: its numbers by name (seconds end in ``_s``; counts of things are ints).
        by_name: numbers keyed by a name that comes from the logs: a failure class's count, a
            file's line (names are the logs' text: the agent escapes them for Slack).
    """

    code: NoteCode
    values: dict[str, float] = field(default_factory=dict)
    by_name: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"code": …, **values}`` plus ``by_name`` when there are any (``estimates --json``
        ``note_data``)."""
        data: dict[str, Any] = {"code": str(self.code), **self.values}
        if self.by_name:
            data["by_name"] = dict(self.by_name)
        return data


class ReasonCode(StrEnum):
    """Why a job is in the state it is in: the drift verdict's reason
    (:meth:`rules.policy.EstimationPolicy.judge`) or the alerting's over time
    (:func:`rules.drift.decide`). Its numbers are in :attr:`Reason.values` (seconds end in
    ``_s``); the agent renders each as a sentence (``agent/reasons.py``).

    The verdict's:

    - ``insufficient_data``: :attr:`Reason.missing` names what is missing (``checkpoint_cost``,
      ``mtbf``, ``current_interval``: unknown; ``saves``, ``failures``: too few); ``n_saves``,
      ``min_saves``, ``n_failures``, ``min_failures``.
    - ``within_band``: ``ratio`` inside ``[1/drift_ratio, drift_ratio]``.
    - ``within_confidence``: ``ratio``, ``current_s`` inside the optimum's confidence band
      ``band_low_s``..``band_high_s`` (absent: open above).
    - ``below_threshold``: ``ratio``, ``excess_gpu_hours_per_day`` below
      ``min_excess_gpu_hours_per_day``.
    - ``drift``: ``ratio``, ``drift_ratio``, ``excess_gpu_hours_per_day`` (when known).

    The alerting's, while a drift episode is open or a message is due:

    - ``hysteresis``: ``ratio`` between ``resolve_ratio`` and drift (``drift_ratio``): the
      episode stays open, nothing is posted.
    - ``already_posted``: ``last_sent_s`` (when), ``next_repeat_s`` (the repeat is due then, or
      sooner when the advice moves by more than ``change_fraction``).
    - ``repeat_due``: ``ratio``, ``last_sent_s``. ``advice_moved``: ``previous_s``,
      ``recommended_s``. ``resolved``: ``ratio``, ``resolve_ratio``.
    - ``silenced``: ``until_s``; :attr:`Reason.held` is the action held back.
    - ``reading_backlog``: ``files`` of the job whose backlog has not settled, its
      ``bytes_behind`` (not yet stored); :attr:`Reason.held` is the action held back.
    """

    INSUFFICIENT_DATA = "insufficient_data"
    WITHIN_BAND = "within_band"
    WITHIN_CONFIDENCE = "within_confidence"
    BELOW_THRESHOLD = "below_threshold"
    DRIFT = "drift"
    HYSTERESIS = "hysteresis"
    ALREADY_POSTED = "already_posted"
    REPEAT_DUE = "repeat_due"
    ADVICE_MOVED = "advice_moved"
    RESOLVED = "resolved"
    SILENCED = "silenced"
    READING_BACKLOG = "reading_backlog"


MISSING: tuple[str, ...] = ("checkpoint_cost", "mtbf", "current_interval", "saves", "failures")
"""The names :attr:`Reason.missing` uses, in the order they are listed."""


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a job is in its state: a code and the numbers behind it (see :class:`ReasonCode`).

    Attributes:
        code: what the reason is.
        values: its numbers by name (seconds end in ``_s``; epoch times too).
        missing: for ``insufficient_data``, what is missing (names in :data:`MISSING`).
        held: for ``silenced`` and ``reading_backlog``, the action held back.
    """

    code: ReasonCode
    values: dict[str, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    held: Action | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"code": …, **values}`` plus ``missing`` and ``held`` when set (the ``decision``
        object of ``estimates --json``, ``status --json``)."""
        data: dict[str, Any] = {"code": str(self.code), **self.values}
        if self.missing:
            data["missing"] = list(self.missing)
        if self.held is not None:
            data["held"] = str(self.held)
        return data


@dataclass(frozen=True, slots=True)
class Verdict:
    """The drift verdict on an interval (:meth:`rules.policy.EstimationPolicy.judge`): the
    estimate's ``status`` and why."""

    status: Status
    reason: Reason


@dataclass(frozen=True, slots=True)
class JobEstimate:
    """Everything known about one job's checkpointing at one moment.

    Field names and meanings are the public ``ckpt-advisor estimates --json`` contract
    (DESIGN.md). Unknown numbers are ``None``, never 0. Seconds throughout.

    Intervals are compute time between checkpoints, Daly's T: ``current_interval_s`` is the
    measured spacing of saves minus the blocking cost C when C is known (a job saving every
    1200 steps of 6 s with C = 240 s has 7200 s, not 7440 s), ``current_interval_steps`` the
    steps between saves; ``recommended_interval_steps`` is the recommended T over the step time.
    Waste fractions and the excess use Daly's exponential model
    (:func:`rules.interval.exponential_waste_fraction`), always in [0, 1).

    The fields after ``notes`` extend the contract: the checkpoint cost before a recent change
    of level; the background persist time of asynchronous saves; where M comes from (the job's
    own exponential MLE, a Weibull fit whose shape is clearly not 1, or the fleet's per-unit
    rate rescaled while the job has too few failures of its own) and how many failures stand
    behind it; M per failure class; the Weibull shape and its interval; the job's size in units
    (nodes, else GPUs) and M per unit; the excess waste of the current interval over the
    recommended one in GPU-hours and money per day; the recorded running time before each
    counted interruption and since the last (``lives_s``, ``lives_tail_s``: what a backtest
    replays; not part of the JSON); a bound shown as a bound: whether C is only a lower bound
    (log lines that miss part of a save), whether M is only a lower bound (running time of
    files without timestamps is measured as steps × their step time, or not at all:
    ``mtbf_is_lower_bound``; Daly's interval over M's interval is then open above), the
    plausible C (``[low, high]``, ``high`` null when C has no upper bound), Daly's interval
    over M's interval and the plausible C, and the
    excess GPU-hours a day over the plausible C (null when C has no upper bound); every
    interruption of the timeline the estimate was made from, numbered, with the rows of the
    failure observations merged into each (``interruptions``: what ``parse`` and ``events``
    show per failure line; not part of the JSON); the recommended interval as the job's own
    setting (``save_steps=570``; None for a stack without one); why the status is what it is
    (``reason``, after ``status``: the verdict's :class:`Reason`); the recommended range in
    steps (``recommended_interval_steps_range``: ``recommended_interval_range_s`` over the step
    time, the upper end None when open); the goodput (kept work over
    wall time) of the job's own C, M, R (and Weibull shape when clearly not 1) simulated at the
    current and at the recommended interval (``goodput_current``, ``goodput_recommended``:
    :func:`rules.simulate.simulated_goodput`; None when C, M or that interval is unknown); its
    wall time labelled productive, checkpoint, lost, restart or idle (``goodput_spans``:
    :func:`rules.goodput.goodput_spans`, what ``goodput`` and the gauges sum; not part of the
    JSON); for a job whose saves go to a fast tier and to persistent storage, C and M per
    tier and the recommended pair (``tiers``: :func:`rules.tier_estimate.estimate_tiers`; its
    single-tier numbers are then those of the persistent saves alone), else None; the level
    of every confidence interval in it (``confidence``: the policy's, in (0, 1); None in an
    estimate made before it was recorded), which the agent prints beside each interval;
    whether the current interval is only an upper bound (``current_interval_is_upper_bound``:
    the measured save spacing less a C that is a lower bound; an interval declared by an
    adopted advice, counted in steps or a two-tier pattern's is not).
    ``notes`` are typed caveats (:class:`Note`), rendered to sentences by the agent.
    """

    job: str
    computed_at_s: float
    checkpoint_cost_s: float | None
    checkpoint_cost_ci_s: tuple[float, float] | None
    checkpoint_cost_source: str | None  # "timing_file" | "log" | None
    n_checkpoints: int
    mtbf_s: float | None
    mtbf_ci_s: tuple[float, float] | None
    n_failures: int
    exposure_s: float
    restart_cost_s: float | None
    current_interval_s: float | None
    young_interval_s: float | None
    daly_interval_s: float | None
    recommended_interval_s: float | None
    recommended_interval_ci_s: tuple[float, float] | None
    step_time_s: float | None
    current_interval_steps: int | None
    recommended_interval_steps: int | None
    waste_fraction_current: float | None
    waste_fraction_recommended: float | None
    drift_ratio: float | None
    status: Status
    reason: Reason
    newest_event_s: float | None
    failure_classes: dict[str, int] = field(default_factory=dict)
    notes: tuple[Note, ...] = ()
    checkpoint_cost_previous_s: float | None = None
    persist_latency_s: float | None = None
    mtbf_source: str | None = None  # "exponential" | "weibull" | "fleet" | None
    mtbf_n_failures: int | None = None  # failures behind M when not only the job's own
    mtbf_by_class_s: dict[str, float | None] = field(default_factory=dict)
    mtbf_by_class_ci_s: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    weibull_shape: float | None = None
    weibull_shape_ci: tuple[float, float] | None = None
    units: int | None = None
    mtbf_per_unit_s: float | None = None
    gpus: int | None = None
    excess_gpu_hours_per_day: float | None = None
    excess_cost_per_day: float | None = None
    lives_s: tuple[float, ...] = ()
    lives_tail_s: float = 0.0
    checkpoint_cost_is_lower_bound: bool = False
    mtbf_is_lower_bound: bool = False
    checkpoint_cost_range_s: tuple[float, float | None] | None = None
    recommended_interval_range_s: tuple[float, float | None] | None = None
    excess_gpu_hours_per_day_range: tuple[float, float] | None = None
    interruptions: tuple[Interruption, ...] = ()
    recommended_setting: str | None = None
    goodput_current: float | None = None
    goodput_recommended: float | None = None
    goodput_spans: GoodputSpans | None = None
    tiers: TierEstimate | None = None
    recommended_interval_steps_range: tuple[int, int | None] | None = None
    confidence: float | None = None
    current_interval_is_upper_bound: bool = False


@dataclass(frozen=True, slots=True)
class FleetRate:
    """Failures of the other jobs of a fleet, per unit of size (node or GPU).

    Attributes:
        unit_exposure_s: summed running time × units (node-seconds or GPU-seconds), >= 0.
        n_failures: unplanned interruptions in that time, >= 0.
    """

    unit_exposure_s: float
    n_failures: int


class Action(StrEnum):
    """What the notifier should do after a drift decision."""

    NONE = "none"
    NOTIFY = "notify"
    REPEAT = "repeat"
    RESOLVE = "resolve"


@dataclass(frozen=True, slots=True)
class AlertState:
    """What was last told about a job (persisted by the agent between decisions).

    Attributes:
        in_drift: True while a drift episode is open (a drift message was sent, not resolved).
        last_sent_s: epoch seconds of the last message for the open episode, or None.
        last_recommended_s: the recommended interval in that message, or None.
    """

    in_drift: bool = False
    last_sent_s: float | None = None
    last_recommended_s: float | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The drift rule's verdict: what to do, why (:class:`Reason`), and the state to remember
    afterwards."""

    action: Action
    reason: Reason
    next_state: AlertState
