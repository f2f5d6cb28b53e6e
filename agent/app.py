"""The composition root: config in, the policy and the adapters out.

Everything that turns configuration into working parts is here, once (cosmicpython's
``bootstrap.py`` is the model): the estimation policy from ``[estimation]``, the jobs' sizes from
``[[jobs]]``, the tailer's globs, the notifier from ``[slack]``, the store from ``[store]``, and
:func:`build_daemon`, which takes each adapter (store, notifier, clock, systemd, metrics) as a
keyword argument so tests pass real-but-local ones. The CLI commands that estimate (``ingest``,
``simulate --job``) take their policy from here too, so a job is estimated the same way
whichever command does it.

The daemon's modules are imported inside :func:`build_daemon` only: ``ingest`` and the read-only
commands start without APScheduler, watchdog or slack-sdk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.rules.policy import EstimationPolicy, JobFacts

if TYPE_CHECKING:
    from ckpt_advisor.agent.config import Config, EstimationConfig
    from ckpt_advisor.agent.tail import WatchSpec

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The default clock: the current aware UTC datetime."""
    return datetime.now(UTC)


def policy_of(estimation: EstimationConfig) -> EstimationPolicy:
    """The estimation policy of an ``[estimation]`` section (durations already in seconds).

    Raises:
        ValueError: a combination the config's own checks let through is out of range (the
            message names the setting).
    """
    return EstimationPolicy(
        confidence=estimation.confidence,
        cost_window_saves=estimation.cost_window_saves,
        mtbf_window_s=estimation.mtbf_window,
        min_saves=estimation.min_saves,
        min_failures=estimation.min_failures,
        min_weibull_failures=estimation.min_weibull_failures,
        drift_ratio=estimation.drift_ratio,
        resolve_ratio=estimation.resolve_ratio,
        repeat_after_s=estimation.repeat_after,
        min_excess_gpu_hours_per_day=estimation.min_excess_gpu_hours_per_day,
        price_per_gpu_hour=estimation.price_per_gpu_hour,
    )


def job_sizes(config: Config) -> dict[str, JobFacts]:
    """Each sized job's facts from ``[[jobs]]``: its GPUs, and its units for M per unit and the
    fleet's rate (``nodes``, else ``gpus``). Jobs with neither are left out."""
    return {
        job.name: JobFacts(gpus=job.gpus, units=job.nodes or job.gpus)
        for job in config.jobs
        if job.gpus or job.nodes
    }


def estimator_of(config: Config | None) -> Estimator:
    """The estimator of a config (its policy and job sizes); the defaults without one."""
    if config is None:
        return Estimator()
    return Estimator(policy_of(config.estimation), job_sizes(config))


def backfill_specs(
    job: str, paths: Iterable[str], *, fmt: str, config: Config | None
) -> list[WatchSpec]:
    """The tailer's specs for ``ingest``: each file under ``job``, read with ``fmt`` (``auto``:
    a timing file is known by its content, :func:`parsers.make_parser`), and with the custom
    patterns of the job of that name in ``config``, as the daemon would read it."""
    from ckpt_advisor.agent.tail import WatchSpec

    configured = [j for j in (config.jobs if config else []) if j.name == job]
    custom = tuple(p.compiled() for j in configured for p in j.patterns)
    return [WatchSpec(job, (str(Path(p).resolve()),), fmt=fmt, custom=custom) for p in paths]
