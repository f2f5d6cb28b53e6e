"""The Prometheus families, and the shipped Grafana dashboard queries only exported names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ckpt_advisor.agent.daemon.metrics import CountingNotifier, Metrics, metric_names
from ckpt_advisor.agent.notify.base import NotifyError, NotifyErrorKind
from ckpt_advisor.agent.tail import FilePosition, ScanStats
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import (
    Action,
    Reason,
    ReasonCode,
    Status,
)
from ckpt_advisor.rules.policy import JobFacts
from tests.agent.helpers import ON_64_GPUS, advice_of
from tests.rules.simulate import hf_like_crash
from tests.samples import drifting_estimate

DASHBOARD = Path(__file__).parents[2] / "grafana" / "ckpt-advisor.json"


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_job_and_file_snapshots_are_exported_and_unknowns_left_out() -> None:
    """Per-job gauges carry C, M and bounds, intervals, waste and GPU-hours (with gpus set);
    a job with unknown M has no M sample rather than 0; files export lag and last read."""
    metrics = Metrics()
    missing = Reason(
        ReasonCode.INSUFFICIENT_DATA,
        {"n_saves": 12, "min_saves": 3, "n_failures": 0, "min_failures": 2},
        missing=("mtbf", "failures"),
    )
    unknown = drifting_estimate(
        job="new", mtbf_s=None, mtbf_ci_s=None, status=Status.INSUFFICIENT_DATA, reason=missing
    )
    drifting = drifting_estimate(job="llama", **ON_64_GPUS)
    metrics.set_estimates([advice_of(drifting, Action.NOTIFY), advice_of(unknown)])
    metrics.set_files([FilePosition("llama", "/r/a.log", 100, 150, 1_800_000_001.0)])
    s = _samples(metrics)
    llama = (("job", "llama"),)
    assert s[("ckpt_advisor_mtbf_bound_seconds", (("bound", "lower"), *llama))] == 12_000.0
    assert s[("ckpt_advisor_excess_gpu_hours_per_day", llama)] == (0.35 - 0.15) * 64 * 24
    assert s[("ckpt_advisor_drift", llama)] == 1.0
    assert s[("ckpt_advisor_job_status", (("job", "new"), ("status", "insufficient_data")))] == 1
    assert ("ckpt_advisor_mtbf_seconds", (("job", "new"),)) not in s
    assert ("ckpt_advisor_excess_gpu_hours_per_day", (("job", "new"),)) not in s
    assert s[("ckpt_advisor_file_lag_bytes", (("job", "llama"), ("path", "/r/a.log")))] == 50
    assert s[("ckpt_advisor_checkpoint_cost_lower_bound", llama)] == 0.0
    assert s[("ckpt_advisor_mtbf_lower_bound", llama)] == 0.0
    assert s[("ckpt_advisor_current_interval_upper_bound", llama)] == 0.0
    metrics.set_estimates([advice_of(unknown)])
    assert ("ckpt_advisor_drift", llama) not in _samples(metrics)  # a removed job disappears


def test_the_decision_and_a_lower_bound_of_c_are_exported() -> None:
    """Why each job is in its state: the reason one-hot, its numbers (a below-threshold job
    with both GPU-hour figures), what an insufficient job lacks; and C from log lines as a
    lower bound with its open range (a lower sample, no upper one), and the current interval
    then an upper bound."""
    below = Reason(
        ReasonCode.BELOW_THRESHOLD,
        {"ratio": 2.34, "excess_gpu_hours_per_day": 0.4, "min_excess_gpu_hours_per_day": 1.0},
    )
    quiet = drifting_estimate(
        job="small",
        status=Status.OK,
        reason=below,
        checkpoint_cost_s=43.0,
        checkpoint_cost_ci_s=(42.0, 44.0),
        checkpoint_cost_source="log",
        checkpoint_cost_is_lower_bound=True,
        checkpoint_cost_range_s=(43.0, None),
        current_interval_is_upper_bound=True,
    )
    missing = Reason(
        ReasonCode.INSUFFICIENT_DATA,
        {"n_saves": 1, "min_saves": 3, "n_failures": 4, "min_failures": 2},
        missing=("saves",),
    )
    rough = drifting_estimate(job="rough", status=Status.INSUFFICIENT_DATA, reason=missing)
    metrics = Metrics()
    metrics.set_estimates([advice_of(quiet), advice_of(rough)])
    s = _samples(metrics)
    small = ("job", "small")
    assert s[("ckpt_advisor_decision", (small, ("reason", "below_threshold")))] == 1.0
    assert s[("ckpt_advisor_decision", (small, ("reason", "drift")))] == 0.0
    value = "ckpt_advisor_decision_value"
    name = "min_excess_gpu_hours_per_day"
    assert s[(value, (small, ("name", name), ("reason", "below_threshold")))] == 1.0
    name = "excess_gpu_hours_per_day"
    assert s[(value, (small, ("name", name), ("reason", "below_threshold")))] == 0.4
    assert s[("ckpt_advisor_decision_missing", (("job", "rough"), ("missing", "saves")))] == 1
    assert s[("ckpt_advisor_checkpoint_cost_lower_bound", (small,))] == 1.0
    assert s[("ckpt_advisor_current_interval_upper_bound", (small,))] == 1.0
    bound = "ckpt_advisor_checkpoint_cost_bound_seconds"
    assert s[(bound, (("bound", "lower"), small))] == 43.0
    assert (bound, (("bound", "upper"), small)) not in s  # open above, not the log CI's 44 s


def test_scan_counters_and_notification_results_add_up() -> None:
    """observe_scan adds each count; CountingNotifier counts sent, deferred and failed."""
    metrics = Metrics()
    stats = ScanStats(lines=10, events=3, parse_misses=2, skipped_lines=1, truncations=1)
    metrics.observe_scan(stats, 0.01, 1.0)
    metrics.observe_scan(stats, 0.01, 2.0)

    class Flaky:
        def __init__(self) -> None:
            self.errors = [NotifyError(NotifyErrorKind.TRANSIENT, "503"), None]

        def send(
            self,
            message: dict[str, object],
            *,
            key: str | None = None,
            thread_ts: str | None = None,
        ) -> str:
            error = self.errors.pop(0) if self.errors else None
            if error is not None:
                raise error
            return "1.0"

        def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
            return None

    counting = CountingNotifier(Flaky(), metrics)
    with pytest.raises(NotifyError):
        counting.send({"text": "x"})
    assert counting.send({"text": "x"}) == "1.0"
    s = _samples(metrics)
    assert s[("ckpt_advisor_lines_total", ())] == 20
    assert s[("ckpt_advisor_parse_misses_total", ())] == 4
    assert s[("ckpt_advisor_truncations_total", ())] == 2
    assert s[("ckpt_advisor_last_scan_timestamp_seconds", ())] == 2.0
    assert s[("ckpt_advisor_notifications_total", (("result", "deferred"),))] == 1
    assert s[("ckpt_advisor_notifications_total", (("result", "sent"),))] == 1
    assert s[("ckpt_advisor_notifications_total", (("result", "failed"),))] == 0


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    """Each ckpt_advisor_* name in the Grafana dashboard's queries is a name the daemon
    exports (so no panel is silently empty), and every job-level family appears somewhere."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [  # the PostgreSQL panels' SQL: tests/agent/test_grafana_store.py
        t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t
    ] + [dashboard["templating"]["list"][1]["definition"]]
    used = {name for e in exprs for name in re.findall(r"\bckpt_advisor_[a-z_]+", e)}
    metrics = Metrics()
    metrics.set_estimates([advice_of(drifting_estimate(job="llama", **ON_64_GPUS))])
    metrics.set_files([FilePosition("llama", "/r/a.log", 0, 0, None)])
    exported = metric_names(metrics)
    assert used - exported == set()
    families = {fam.name for fam in metrics.registry.collect()}
    assert families - {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in used} == set()


def test_goodput_gauges_split_the_last_day_by_bucket() -> None:
    """Per job, goodput and its buckets over the day before the newest event are exported in
    seconds and, for a job with gpus, GPU-hours; the simulated goodput per interval too; a job
    without spans exports none of them."""
    metrics = Metrics()
    est = estimate_job("crash", hf_like_crash(), now_s=0.0, facts=JobFacts(gpus=8))
    plain_estimate = drifting_estimate(job="plain", goodput_current=0.7, goodput_recommended=0.8)
    metrics.set_estimates([advice_of(est), advice_of(plain_estimate)])
    s = _samples(metrics)
    crash = ("job", "crash")
    seconds = {"productive": 1000.0, "checkpoint": 40.0, "lost": 600.0, "restart": 860.0}
    for bucket, value in seconds.items():
        key = (("bucket", bucket), crash)
        assert s[("ckpt_advisor_goodput_seconds", key)] == pytest.approx(value)
        assert s[("ckpt_advisor_goodput_gpu_hours", key)] == pytest.approx(value * 8 / 3600)
    assert s[("ckpt_advisor_goodput", (crash,))] == pytest.approx(0.4)
    plain = ("job", "plain")
    assert s[("ckpt_advisor_goodput_simulated", (("interval", "current"), plain))] == 0.7
    assert s[("ckpt_advisor_goodput_simulated", (("interval", "recommended"), plain))] == 0.8
    assert ("ckpt_advisor_goodput", (plain,)) not in s
