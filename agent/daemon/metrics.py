"""Prometheus metrics of the daemon (prometheus-client), served at ``[metrics] listen``.

Three kinds of families:

* per job, from the latest estimate of each job and the decision made on it
  (``set_estimates``): C and M with their confidence bounds, the current and recommended
  interval, the waste fractions, the excess GPU-hours per day, the drift ratio and state, and
  why the job is in that state (the decision's reason, its numbers, what is missing); goodput
  over the day before the job's newest event, split into buckets in seconds and (with
  ``gpus``) GPU-hours, and the goodput simulated at the current and recommended intervals;
* per followed file, from the tailer after each scan (``set_files``): bytes behind and the time
  of the last read;
* counters and histograms the daemon adds to as it goes: lines, events, parse misses, skipped
  lines, truncations, notifications, scans, scheduler runs and misses, config reloads.

Per-job and per-file values are replaced as a whole snapshot, so a scrape never sees half of an
update and a job removed by a config reload disappears. The registry belongs to one
:class:`Metrics` (not prometheus-client's global one), so several daemons in one test process
do not collide. :func:`metric_names` lists every exported name, for the Grafana dashboard's test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ckpt_advisor.agent.advice import AdviceBoard
from ckpt_advisor.agent.notify.base import Notifier, NotifyError
from ckpt_advisor.agent.tail import FilePosition, ScanStats
from ckpt_advisor.rules.goodput import BUCKETS
from ckpt_advisor.rules.model import JobEstimate, ReasonCode, Status

if TYPE_CHECKING:
    from ckpt_advisor.agent.advisor import Advice

PREFIX: Final = "ckpt_advisor_"

_JOB_GAUGES: Final = {
    "checkpoint_cost_seconds": "Checkpoint cost C: median blocking seconds of recent saves.",
    "checkpoint_cost_bound_seconds": "Confidence bounds of C (bound=lower|upper), seconds; "
    "when C is a lower bound, its plausible range (no upper sample when open above).",
    "checkpoint_cost_lower_bound": "1 when C comes from log lines and is only a lower bound "
    "(a timing file gives the exact value), else 0.",
    "mtbf_seconds": "Mean time between failures M (censored exponential MLE), seconds.",
    "mtbf_bound_seconds": "Chi-square confidence bounds of M (bound=lower|upper), seconds.",
    "mtbf_lower_bound": "1 when M counts files without timestamps, whose running time is only "
    "steps x their step time or not measured, so M is only a lower bound, else 0.",
    "checkpoints": "Checkpoint saves seen in the estimate window.",
    "failures": "Unplanned interruptions counted toward M.",
    "current_interval_seconds": "The job's current checkpoint interval, seconds.",
    "current_interval_upper_bound": "1 when the current interval is the save spacing less a "
    "lower-bound C, so only an upper bound, else 0.",
    "recommended_interval_seconds": "The recommended (Daly 2006) checkpoint interval, seconds.",
    "waste_fraction": "Fraction of run time lost under exponential failures (Daly 2006 full "
    "model; interval=current|recommended).",
    "excess_gpu_hours_per_day": "GPU-hours/day lost at the current interval versus the "
    "recommended one (jobs with gpus set).",
    "drift_ratio": "Current interval / recommended interval.",
    "drift": "1 while the estimate's status is drift, else 0.",
    "job_status": "1 for the estimate's status (status=ok|drift|insufficient_data), else 0.",
    "estimate_timestamp_seconds": "Unix time of the job's latest estimate.",
    "goodput": "Productive share of the wall time of the day before the job's newest event "
    "(progress that was kept / wall time).",
    "goodput_seconds": "Wall time of the day before the job's newest event by bucket "
    "(bucket=productive|checkpoint|lost|restart|idle), seconds.",
    "goodput_gpu_hours": "The same wall time by bucket in GPU-hours (jobs with gpus set).",
    "goodput_simulated": "Goodput simulated with the job's own C, M and R "
    "(interval=current|recommended).",
    "tier_checkpoint_cost_seconds": "Two-tier jobs: C of each tier's saves "
    "(tier=memory|local|persistent), seconds.",
    "tier_mtbf_seconds": "Two-tier jobs: M of the interruptions that roll back to this tier's "
    "copy (the fast tier: those it survives; persistent: the others), seconds.",
    "tier_current_interval_seconds": "Two-tier jobs: compute time between saves of this tier "
    "now, seconds.",
    "tier_recommended_interval_seconds": "Two-tier jobs: the two-level model's interval of "
    "this tier, seconds.",
    "decision": "1 for the reason behind the job's current state, else 0 (reason=drift|"
    "within_band|within_confidence|below_threshold|insufficient_data|hysteresis|"
    "already_posted|repeat_due|advice_moved|resolved|silenced).",
    "decision_value": "The numbers behind the job's current decision (reason, name=ratio|"
    "excess_gpu_hours_per_day|min_excess_gpu_hours_per_day|until_s|last_sent_s|…; times are "
    "Unix seconds).",
    "decision_missing": "1 for each input an insufficient_data decision lacks (missing="
    "checkpoint_cost|mtbf|current_interval|saves|failures).",
}
_EXTRA_LABELS: Final = {
    "checkpoint_cost_bound_seconds": ("bound",),
    "mtbf_bound_seconds": ("bound",),
    "waste_fraction": ("interval",),
    "job_status": ("status",),
    "goodput_seconds": ("bucket",),
    "goodput_gpu_hours": ("bucket",),
    "goodput_simulated": ("interval",),
    "tier_checkpoint_cost_seconds": ("tier",),
    "tier_mtbf_seconds": ("tier",),
    "tier_current_interval_seconds": ("tier",),
    "tier_recommended_interval_seconds": ("tier",),
    "decision": ("reason",),
    "decision_value": ("reason", "name"),
    "decision_missing": ("missing",),
}
GOODPUT_WINDOW_S: Final = 86400.0
"""The goodput gauges cover this much wall time before each job's newest event."""
_FILE_GAUGES: Final = {
    "file_lag_bytes": "Bytes written to a followed file but not read yet (its last line, no "
    "newline yet, not counted).",
    "file_last_read_timestamp_seconds": "Unix time new bytes were last read from the file.",
}


@dataclass(frozen=True, slots=True)
class _Snapshot:
    estimates: tuple[Advice, ...] = ()
    files: tuple[FilePosition, ...] = ()


def _gauge(name: str, help_text: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, help_text, labels=list(labels))


class _SnapshotCollector(Collector):
    """Yields the per-job and per-file families from the current snapshot."""

    def __init__(self) -> None:
        self.snapshot = _Snapshot()

    def describe(self) -> Iterable[Any]:
        return self._families(_Snapshot())

    def collect(self) -> Iterable[Any]:
        return self._families(self.snapshot)

    def _families(self, snap: _Snapshot) -> Iterator[GaugeMetricFamily]:
        fam = {
            name: _gauge(name, text, ["job", *_EXTRA_LABELS.get(name, ())])
            for name, text in _JOB_GAUGES.items()
        }
        for advice in snap.estimates:
            _job_samples(fam, advice.estimate)
            _decision_samples(fam, advice)
        yield from fam.values()
        lag = _gauge("file_lag_bytes", _FILE_GAUGES["file_lag_bytes"], ["job", "path"])
        read = _gauge(
            "file_last_read_timestamp_seconds",
            _FILE_GAUGES["file_last_read_timestamp_seconds"],
            ["job", "path"],
        )
        for f in snap.files:
            lag.add_metric([f.job, f.path], f.lag_bytes)
            if f.last_read_s is not None:
                read.add_metric([f.job, f.path], f.last_read_s)
        yield lag
        yield read


def _job_samples(fam: dict[str, GaugeMetricFamily], e: JobEstimate) -> None:
    """Add one job's samples; unknown values are left out (absent, not 0)."""
    job = [e.job]

    def put(name: str, value: float | None, *extra: str) -> None:
        if value is not None:
            fam[name].add_metric([*job, *extra], value)

    put("checkpoint_cost_seconds", e.checkpoint_cost_s)
    put("mtbf_seconds", e.mtbf_s)
    cost_bounds: tuple[float, float | None] | None = e.checkpoint_cost_ci_s
    if e.checkpoint_cost_is_lower_bound:  # the plausible range, open above when it is
        cost_bounds = e.checkpoint_cost_range_s
    if e.checkpoint_cost_s is not None:
        put("checkpoint_cost_lower_bound", float(e.checkpoint_cost_is_lower_bound))
    if e.mtbf_s is not None:
        put("mtbf_lower_bound", float(e.mtbf_is_lower_bound))
    for name, bounds in (
        ("checkpoint_cost_bound_seconds", cost_bounds),
        ("mtbf_bound_seconds", e.mtbf_ci_s),
    ):
        if bounds is not None:
            put(name, bounds[0], "lower")
            put(name, bounds[1], "upper")
    put("checkpoints", e.n_checkpoints)
    put("failures", e.n_failures)
    put("current_interval_seconds", e.current_interval_s)
    if e.current_interval_s is not None:
        put("current_interval_upper_bound", float(e.current_interval_is_upper_bound))
    put("recommended_interval_seconds", e.recommended_interval_s)
    put("waste_fraction", e.waste_fraction_current, "current")
    put("waste_fraction", e.waste_fraction_recommended, "recommended")
    put("excess_gpu_hours_per_day", e.excess_gpu_hours_per_day)
    put("drift_ratio", e.drift_ratio)
    put("drift", float(e.status is Status.DRIFT))
    for status in Status:
        put("job_status", float(e.status is status), str(status))
    put("estimate_timestamp_seconds", e.computed_at_s)
    put("goodput_simulated", e.goodput_current, "current")
    put("goodput_simulated", e.goodput_recommended, "recommended")
    if (t := e.tiers) is not None:
        for tier, cost, mtbf, now, best in (
            (t.fast_tier, t.fast_cost_s, t.mtbf_recoverable_s, t.current_fast_interval_s,
             t.fast_interval_s),
            ("persistent", t.persistent_cost_s, t.mtbf_persistent_s,
             t.current_persistent_interval_s, t.persistent_interval_s),
        ):  # fmt: skip
            put("tier_checkpoint_cost_seconds", cost, tier)
            put("tier_mtbf_seconds", mtbf, tier)
            put("tier_current_interval_seconds", now, tier)
            put("tier_recommended_interval_seconds", best, tier)
    spans = e.goodput_spans
    if spans is None or spans.last_s is None:
        return
    day = spans.breakdown(since_s=spans.last_s - GOODPUT_WINDOW_S)
    put("goodput", day.goodput)
    for name, seconds in zip(BUCKETS, day.seconds.tolist(), strict=True):
        put("goodput_seconds", seconds, name)
        if e.gpus is not None:
            put("goodput_gpu_hours", seconds * e.gpus / 3600.0, name)


def _decision_samples(fam: dict[str, GaugeMetricFamily], advice: Advice) -> None:
    """The decision behind the job's state: one-hot over the reasons, its numbers, and what an
    insufficient_data decision lacks."""
    job, reason = advice.estimate.job, advice.decision.reason
    for code in ReasonCode:
        fam["decision"].add_metric([job, str(code)], float(code is reason.code))
    for name, value in reason.values.items():
        fam["decision_value"].add_metric([job, str(reason.code), name], float(value))
    for missing in reason.missing:
        fam["decision_missing"].add_metric([job, missing], 1.0)


class Metrics:
    """The daemon's metric families in their own registry; :meth:`serve` exposes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._snapshot = _SnapshotCollector()
        r.register(self._snapshot)
        self._lock = threading.Lock()
        self.lines = Counter(
            PREFIX + "lines", "Complete lines read from followed files.", registry=r
        )
        self.read_bytes = Counter(
            PREFIX + "read_bytes", "Bytes read from followed files.", registry=r
        )
        self.events = Counter(PREFIX + "events", "Events parsed and stored.", registry=r)
        self.parse_misses = Counter(
            PREFIX + "parse_misses",
            "Lines or timing records that looked like data but could not be read.",
            registry=r,
        )
        self.skipped_lines = Counter(
            PREFIX + "skipped_lines", "Lines skipped for being longer than 1 MiB.", registry=r
        )
        self.truncations = Counter(
            PREFIX + "truncations", "Files found shorter than their read offset.", registry=r
        )
        self.scan_seconds = Histogram(
            PREFIX + "scan_duration_seconds", "Wall time of one scan of all files.", registry=r
        )
        self.last_scan = Gauge(
            PREFIX + "last_scan_timestamp_seconds", "Unix time the last scan ended.", registry=r
        )
        self.notifications = Counter(
            PREFIX + "notifications",
            "Delivery attempts by result: sent, deferred (transient error, stays queued), "
            "failed (permanent error).",
            ["result"],
            registry=r,
        )
        self.queued = Gauge(
            PREFIX + "notifications_queued", "Messages waiting in the outbox.", registry=r
        )
        self.estimate_seconds = Histogram(
            PREFIX + "estimate_run_duration_seconds",
            "Wall time of one scheduled estimate run (all jobs; delivery is its own job).",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.last_estimate = Gauge(
            PREFIX + "last_estimate_timestamp_seconds",
            "Unix time the last estimate run ended.",
            registry=r,
        )
        self.scheduler_misses = Counter(
            PREFIX + "scheduler_misses",
            "Scheduled runs skipped: missed their time or an earlier run was still going.",
            registry=r,
        )
        self.scheduler_errors = Counter(
            PREFIX + "scheduler_errors", "Scheduled runs that raised.", registry=r
        )
        self.reloads = Counter(
            PREFIX + "config_reloads",
            "SIGHUP reloads by result (ok|rejected).",
            ["result"],
            registry=r,
        )
        self.healthy = Gauge(
            PREFIX + "healthy", "1 while the tailer and the scheduler are healthy.", registry=r
        )
        for result in ("sent", "deferred", "failed"):
            self.notifications.labels(result)
        for result in ("ok", "rejected"):
            self.reloads.labels(result)

    def observe_scan(self, stats: ScanStats, duration_s: float, now_s: float) -> None:
        """Add one scan's counts."""
        self.lines.inc(stats.lines)
        self.read_bytes.inc(stats.bytes_read)
        self.events.inc(stats.events)
        self.parse_misses.inc(stats.parse_misses)
        self.skipped_lines.inc(stats.skipped_lines)
        self.truncations.inc(stats.truncations)
        self.scan_seconds.observe(duration_s)
        self.last_scan.set(now_s)

    def set_files(self, files: Sequence[FilePosition]) -> None:
        """Replace the per-file snapshot."""
        with self._lock:
            old = self._snapshot.snapshot
            self._snapshot.snapshot = _Snapshot(old.estimates, tuple(files))

    def set_estimates(self, estimates: Sequence[Advice]) -> None:
        """Replace the per-job snapshot: each job's estimate and the decision made on it."""
        with self._lock:
            old = self._snapshot.snapshot
            self._snapshot.snapshot = _Snapshot(tuple(estimates), old.files)

    def serve(self, host: str, port: int, advice: AdviceBoard | None = None) -> Any:
        """Serve ``/metrics`` (and ``/advice/JOB`` from ``advice``: ``http.py``) on
        ``host:port`` from a daemon thread; returns the server, whose ``shutdown()`` stops it.
        Raises OSError if the address cannot be bound."""
        from ckpt_advisor.agent.daemon.http import routes, serve

        return serve(host, port, routes(self.registry, advice))


class CountingNotifier:
    """A :class:`~agent.notify.base.Notifier` that counts each delivery attempt's result."""

    def __init__(self, inner: Notifier, metrics: Metrics) -> None:
        self.inner = inner
        self._metrics = metrics

    def __repr__(self) -> str:
        return f"CountingNotifier({self.inner!r})"

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        """Send through the wrapped notifier; same return value and errors."""
        try:
            ts = self.inner.send(message, key=key, thread_ts=thread_ts)
        except NotifyError as exc:
            self._metrics.notifications.labels("deferred" if exc.transient else "failed").inc()
            raise
        self._metrics.notifications.labels("sent").inc()
        return ts

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        """Look up through the wrapped notifier (not counted: it sends nothing)."""
        return self.inner.find(key, since_s, thread_ts=thread_ts)


def metric_names(metrics: Metrics) -> set[str]:
    """Every sample name the registry can expose (``_total``, ``_bucket``, … included)."""
    names = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    return names
