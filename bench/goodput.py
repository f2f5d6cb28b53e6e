"""Goodput against the truth on generated jobs: ``python -m bench.goodput`` (also a row group of
``python -m bench``).

Each scenario simulates an HF Trainer job from real captured log lines (:mod:`agent.synth`) whose
every second is known to be productive, checkpoint, lost, restart or idle
(:meth:`agent.synth.SynthJob.truth_seconds`), writes its log (and its checkpoint timing file),
ingests them through the real tailer into a real SQLite store, estimates the job as the daemon
does and splits its wall time (:meth:`rules.goodput.GoodputSpans.breakdown`). The target of
issue 16: every bucket within 2% of wall time of the truth. With a timing file each bucket is a
measurement; from the log alone checkpoint is a lower bound and productive and lost upper bounds
(the log does not mark the end of a save), so there the figure is the truth lying in each
bucket's range, and restart and idle within 2%.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.synth import SynthJob, simulate
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.rules.goodput import BUCKETS, Bucket, Goodput
from ckpt_advisor.rules.policy import EstimationPolicy

HOUR_S = 3600.0
DAY_S = 86400.0
TARGET = 0.02
"""Issue 16: every bucket within 2% of wall time of the truth."""

SCENARIOS: dict[str, dict[str, Any]] = {
    "demo week": {"mtbf_s": 6 * HOUR_S, "cost_s": 240.0, "interval_steps": 1200, "seed": 0},
    "short M, long C and R": {
        "mtbf_s": 2 * HOUR_S,
        "cost_s": 600.0,
        "interval_steps": 600,
        "restart_s": 1800.0,
        "seed": 5,
    },
    "Weibull 0.7": {
        "mtbf_s": 6 * HOUR_S,
        "cost_s": 240.0,
        "interval_steps": 1200,
        "shape": 0.7,
        "seed": 6,
    },
    "idle stops, varied C": {
        "mtbf_s": 8 * HOUR_S,
        "cost_s": 300.0,
        "interval_steps": 900,
        "cost_sigma": 0.3,
        "stops": [(1.5 * DAY_S, 3 * HOUR_S), (4 * DAY_S, 9 * HOUR_S)],
        "seed": 7,
    },
    "month, M 1 day": {
        "mtbf_s": DAY_S,
        "cost_s": 60.0,
        "interval_steps": 1200,
        "duration_s": 30 * DAY_S,
        "cost_sigma": 0.1,
        "seed": 8,
    },
}
"""Generated jobs (``agent.synth.simulate`` arguments; a week unless ``duration_s`` says)."""


@dataclass(frozen=True)
class Result:
    """One scenario from one source: measured and true seconds per bucket."""

    scenario: str
    timing_file: bool
    measured: Goodput
    truth: dict[str, float]
    n_interruptions: int
    n_interruptions_true: int
    estimate_s: float

    def error(self, name: str) -> float:
        """(measured − truth) / wall for bucket ``name``."""
        return (self.measured[Bucket[name.upper()]] - self.truth[name]) / self.measured.wall_s

    def range_error(self, name: str) -> float:
        """How far the truth lies outside the bucket's range, as a share of wall time (0 inside).
        A failure is dated by the last bar redraw
        before it: up to one redraw of lost work per interruption is allowed to move."""
        low, high = self.measured.range_s(Bucket[name.upper()])
        true = self.truth[name]
        slack = 0.0
        if name == "lost":
            slack = self.n_interruptions * SCENARIO_REDRAW_S
        return max(0.0, low - slack - true, true - high - slack) / self.measured.wall_s


SCENARIO_REDRAW_S = 60.0
"""10 steps of 6 s: the bar's redraw period in every scenario (``simulate``'s defaults)."""


def run_scenario(name: str, job: SynthJob, workdir: Path, *, timing_file: bool) -> Result:
    """Write, ingest, estimate and split one generated job in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "train.log"
    log.write_text("".join(text for _, text in job.log), encoding="utf-8")
    specs = [WatchSpec("sim", (str(log),), fmt="auto")]
    if timing_file:
        timings = workdir / "ckpt_timings.jsonl"
        timings.write_text("".join(text for _, text in job.timings), encoding="utf-8")
        specs.append(WatchSpec("sim", (str(timings),), fmt="timing_jsonl"))
    store = open_store(workdir / "ckpt.db")
    tailer = Tailer(store, specs, clock=lambda: datetime.now(UTC), tz=UTC, backfill=True)
    tailer.scan()
    tailer.close()
    days = (job.log[-1][0] - job.log[0][0]).total_seconds() / DAY_S
    estimator = Estimator(EstimationPolicy(mtbf_window_s=(days + 1) * DAY_S))
    t0 = time.perf_counter()
    est = estimator.estimate(store, "sim", datetime.now(UTC).timestamp())
    estimate_s = time.perf_counter() - t0
    store.close()
    if est.goodput_spans is None or not len(est.goodput_spans):
        raise RuntimeError(f"{name}: the estimate has no goodput spans")
    measured = est.goodput_spans.breakdown()
    since, until = (datetime.fromtimestamp(t, UTC) for t in (measured.since_s, measured.until_s))
    return Result(
        scenario=name,
        timing_file=timing_file,
        measured=measured,
        truth=job.truth_seconds(since, until),
        n_interruptions=measured.n_interruptions,
        n_interruptions_true=job.n_interruptions,
        estimate_s=estimate_s,
    )


def run_all(workdir: Path) -> list[Result]:
    """Every scenario, with its timing file and from its log alone."""
    results = []
    for i, (name, kwargs) in enumerate(SCENARIOS.items()):
        job = simulate(**kwargs)
        for timing_file in (True, False):
            sub = workdir / f"{i}-{'timing' if timing_file else 'log'}"
            results.append(run_scenario(name, job, sub, timing_file=timing_file))
    return results


def print_table(results: list[Result]) -> None:
    """Per scenario and source: per bucket measured, truth and the error in points of wall."""
    head = f"{'scenario':22} {'source':7} {'bucket':11} {'measured [range]':>26}"
    print(f"  {head} {'truth':>10} {'error':>8}")
    for r in results:
        source = "timing" if r.timing_file else "log"
        for name in BUCKETS:
            low, high = r.measured.range_s(Bucket[name.upper()])
            shown = f"{r.measured[Bucket[name.upper()]] / HOUR_S:9.2f}h"
            if low != high:
                shown += f" [{low / HOUR_S:.2f}, {high / HOUR_S:.2f}]"
            print(
                f"  {r.scenario:22} {source:7} {name:11} {shown:>26} "
                f"{r.truth[name] / HOUR_S:9.2f}h {r.error(name):+8.2%}"
            )
        print(
            f"  {r.scenario:22} {source:7} {'goodput':11} {r.measured.goodput or 0:26.2%} "
            f"{r.truth['productive'] / r.measured.wall_s:10.2%}   "
            f"({r.n_interruptions}/{r.n_interruptions_true} interruptions, "
            f"wall {r.measured.wall_s / DAY_S:.1f} d, estimate {r.estimate_s:.2f} s)"
        )


Row = tuple[str, str, str, bool]
"""(figure, measured, target, met), as in bench/children.py."""


def rows(results: list[Result]) -> list[Row]:
    """The acceptance rows: the largest error of each kind over every scenario."""
    timed = [r for r in results if r.timing_file]
    logged = [r for r in results if not r.timing_file]
    worst_timed = max((abs(r.error(b)), r.scenario, b) for r in timed for b in BUCKETS)
    worst_point = max((abs(r.error(b)), r.scenario, b) for r in logged for b in ("restart", "idle"))
    worst_range = max(
        (r.range_error(b), r.scenario, b)
        for r in logged
        for b in ("productive", "checkpoint", "lost")
    )
    counted = all(r.n_interruptions == r.n_interruptions_true for r in results)
    target = f"<= {TARGET:.0%} of wall"
    return [
        (
            "goodput, timing file: worst bucket",
            f"{worst_timed[0]:.2%} ({worst_timed[2]}, {worst_timed[1]})",
            target,
            worst_timed[0] <= TARGET,
        ),
        (
            "goodput, log only: restart, idle",
            f"{worst_point[0]:.2%} ({worst_point[2]}, {worst_point[1]})",
            target,
            worst_point[0] <= TARGET,
        ),
        (
            "goodput, log only: truth outside range",
            f"{worst_range[0]:.2%} ({worst_range[2]}, {worst_range[1]})",
            "0",
            worst_range[0] == 0.0,
        ),
        (
            "goodput: interruptions counted",
            f"{sum(r.n_interruptions for r in timed)} of "
            f"{sum(r.n_interruptions_true for r in timed)}",
            "all",
            counted,
        ),
    ]


def print_log_points(results: list[Result]) -> None:
    """The largest error of a log-only point value: not a target (checkpoint is a lower bound,
    productive and lost upper bounds), shown so the gap between a bound and the truth is seen."""
    worst = max(
        (abs(r.error(b)), r.scenario, b) for r in results if not r.timing_file for b in BUCKETS
    )
    print(
        f"  log only, point values: worst {worst[0]:.2%} of wall ({worst[2]}, {worst[1]}): "
        "bounds, not measurements (the log does not mark a save's end); see the ranges"
    )


def bench_goodput(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    """``python -m bench --only goodput``: the table, then the acceptance rows."""
    del env  # in process: the estimate is the figure, not a start-up
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        results = run_all(Path(tmp))
    print_table(results)
    print_log_points(results)
    return rows(results)


def main() -> None:
    """Print the table and the acceptance rows; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = run_all(Path(tmp))
    print_table(results)
    print_log_points(results)
    out = rows(results)
    print()
    for figure, measured, target, met in out:
        print(f"{figure:40} {measured:44} {target:14} {'yes' if met else 'NO'}")
    raise SystemExit(0 if all(r[3] for r in out) else 1)


if __name__ == "__main__":
    main()
