"""Truth against estimate on simulated month-long jobs: ``python -m bench.month_jobs``.

Each scenario simulates 30 days of an HF Trainer job (some with a progress bar whose clock does
not advance, :data:`FROZEN_SCENARIOS`) with known M (exponential or Weibull
failures) and C (small or large C/M) from real captured log lines (:mod:`agent.synth`), writes
its log and checkpoint timing file, ingests both through the real tailer into a real SQLite
store, and estimates the job as the daemon would. It prints the truth in the data (the realised
mean running time between interruptions and the realised save durations), the estimates, and
the recommended interval against Daly's optimum (FGCS 22(3), 2006, eq. 37) at the truth in
the data and at the simulated parameters. The acceptance bounds: M within 10% and C within 5% of
the truth in the data, the recommended interval within 10% of Daly's optimum for that truth (a
month holds 14 failures when M is a day: the data's own M is then up to ±40% from the simulated
one, and no estimator can do better than the data).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.rules.interval import daly_interval_s
from ckpt_advisor.rules.policy import EstimationPolicy

DAY_S = 86400.0


@dataclass(frozen=True)
class Scenario:
    """A simulated job's true parameters."""

    name: str
    mtbf_s: float
    cost_s: float
    shape: float
    interval_steps: int = 1200
    step_time_s: float = 6.0
    restart_s: float = 600.0
    days: float = 30.0
    cost_sigma: float = 0.1
    frozen_bar_s: float | None = None
    """The bar's clock shows this elapsed time on every redraw (``agent.synth.simulate``)."""


SCENARIOS = (
    Scenario("exponential, small C/M", mtbf_s=1 * DAY_S, cost_s=60.0, shape=1.0),
    Scenario("exponential, large C/M", mtbf_s=4 * 3600.0, cost_s=1200.0, shape=1.0),
    Scenario("Weibull 0.7, small C/M", mtbf_s=1 * DAY_S, cost_s=60.0, shape=0.7),
    Scenario("Weibull 0.7, large C/M", mtbf_s=4 * 3600.0, cost_s=1200.0, shape=0.7),
)

FROZEN_SCENARIOS = (
    Scenario("frozen bar, exp. small", mtbf_s=DAY_S / 2, cost_s=60.0, shape=1.0),
    Scenario("frozen bar, exp. large", mtbf_s=4 * 3600.0, cost_s=1200.0, shape=1.0),
    Scenario("frozen bar, Weib. large", mtbf_s=4 * 3600.0, cost_s=1200.0, shape=0.7),
    Scenario("frozen bar, M 1 h", mtbf_s=3600.0, cost_s=120.0, shape=1.0, interval_steps=200),
)
"""The same kind of jobs with a training bar whose clock does not advance
(``[12:00:00<99:00:00, …]`` on every redraw): interruptions must count within 2%."""
FROZEN_SCENARIOS = tuple(replace(s, frozen_bar_s=12 * 3600.0) for s in FROZEN_SCENARIOS)


@dataclass(frozen=True)
class Row:
    """One scenario's truth and estimate (seconds; errors as fractions)."""

    scenario: str
    failures_true: int
    failures_est: int
    mtbf_true_s: float
    mtbf_data_s: float
    mtbf_est_s: float
    mtbf_source: str | None
    weibull_shape: float | None
    cost_true_s: float
    cost_data_s: float
    cost_est_s: float
    daly_true_s: float
    daly_data_s: float
    recommended_s: float
    mtbf_error: float
    cost_error: float
    interval_error: float
    interval_error_truth: float


def run_scenario(scenario: Scenario, workdir: Path, *, seed: int = 0) -> Row:
    """Simulate, write, ingest and estimate one scenario in ``workdir``.

    Raises:
        RuntimeError: the estimate lacks M, C or the recommended interval.
    """
    job = simulate(
        mtbf_s=scenario.mtbf_s,
        cost_s=scenario.cost_s,
        interval_steps=scenario.interval_steps,
        step_time_s=scenario.step_time_s,
        restart_s=scenario.restart_s,
        duration_s=scenario.days * DAY_S,
        shape=scenario.shape,
        cost_sigma=scenario.cost_sigma,
        frozen_bar_s=scenario.frozen_bar_s,
        seed=seed,
    )
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "train.log"
    timings = workdir / "ckpt_timings.jsonl"
    log.write_text("".join(text for _, text in job.log), encoding="utf-8")
    timings.write_text("".join(text for _, text in job.timings), encoding="utf-8")
    store = open_store(workdir / "ckpt.db")
    specs = [
        WatchSpec("sim", (str(log),), fmt="auto"),
        WatchSpec("sim", (str(timings),), fmt="timing_jsonl"),
    ]
    tailer = Tailer(store, specs, clock=lambda: datetime.now(UTC), tz=UTC, backfill=True)
    tailer.scan()
    tailer.close()
    estimator = Estimator(EstimationPolicy(mtbf_window_s=(scenario.days + 1) * DAY_S))
    est = estimator.estimate(store, "sim", datetime.now(UTC).timestamp())
    if est.mtbf_s is None or est.checkpoint_cost_s is None or est.recommended_interval_s is None:
        raise RuntimeError(f"{scenario.name}: estimate incomplete: {est}")
    mtbf_data_s = job.exposure_s / job.n_interruptions
    cost_data_s = statistics.median(job.save_durations_s)
    daly_s = daly_interval_s(scenario.mtbf_s, scenario.cost_s)
    daly_data_s = daly_interval_s(mtbf_data_s, cost_data_s)
    return Row(
        scenario=scenario.name,
        failures_true=job.n_interruptions,
        failures_est=est.n_failures,
        mtbf_true_s=scenario.mtbf_s,
        mtbf_data_s=mtbf_data_s,
        mtbf_est_s=est.mtbf_s,
        mtbf_source=est.mtbf_source,
        weibull_shape=est.weibull_shape,
        cost_true_s=scenario.cost_s,
        cost_data_s=cost_data_s,
        cost_est_s=est.checkpoint_cost_s,
        daly_true_s=daly_s,
        daly_data_s=daly_data_s,
        recommended_s=est.recommended_interval_s,
        mtbf_error=est.mtbf_s / mtbf_data_s - 1.0,
        cost_error=est.checkpoint_cost_s / cost_data_s - 1.0,
        interval_error=est.recommended_interval_s / daly_data_s - 1.0,
        interval_error_truth=est.recommended_interval_s / daly_s - 1.0,
    )


def main() -> None:
    """Print the table (or JSON lines with ``--json``) for every scenario."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            run_scenario(s, Path(tmp) / str(i), seed=args.seed)
            for i, s in enumerate(SCENARIOS + FROZEN_SCENARIOS)
        ]
    if args.json:
        for row in rows:
            print(json.dumps(asdict(row)))
        return
    print(
        f"{'scenario':24} {'fail':>9} {'M data':>8} {'M est':>8} {'err':>6} {'shape':>5} "
        f"{'C data':>7} {'C est':>7} {'err':>6} {'Daly*':>7} {'rec':>7} {'err':>6} "
        f"{'Daly':>7} {'err':>6}"
    )
    for r in rows:
        shape = "-" if r.weibull_shape is None else f"{r.weibull_shape:.2f}"
        print(
            f"{r.scenario:24} {r.failures_est:>4}/{r.failures_true:<4} "
            f"{r.mtbf_data_s / 3600:7.2f}h {r.mtbf_est_s / 3600:7.2f}h {r.mtbf_error:+6.1%} "
            f"{shape:>5} {r.cost_data_s:6.1f}s {r.cost_est_s:6.1f}s {r.cost_error:+6.1%} "
            f"{r.daly_data_s:6.0f}s {r.recommended_s:6.0f}s {r.interval_error:+6.1%} "
            f"{r.daly_true_s:6.0f}s {r.interval_error_truth:+6.1%}"
        )
    print(
        "M data: realised running time per interruption; C data: median realised save; "
        "Daly*: eq. 37 at M data and C data; Daly: eq. 37 at the simulated M and C"
    )


if __name__ == "__main__":
    main()
