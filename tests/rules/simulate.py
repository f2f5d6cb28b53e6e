"""Timelines for the rules tests: hand-written helpers and simulated jobs with known truth."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckpt_advisor.rules.model import Observation
from tests.parsers._helpers import REAL_LOGS, parse, read_lines

T0 = 1.7e9
"""Epoch seconds where the hand-written timelines of the tests start."""


def obs(kind: str, at_s: float, **fields: Any) -> Observation:
    """An observation ``at_s`` seconds after T0."""
    return Observation(kind, T0 + at_s, **fields)


def hf_like_crash() -> list[Observation]:
    """A run whose step lines and traceback carry the last stamped time (HF Trainer backfill).

    2 s per step; saves at steps 500 (ends 1040 s) then the run dies at step 800, i.e. at
    1040 + 300·2 = 1640 s, but the traceback is stamped 1040 s. The next run starts at 2500 s.
    """
    return [
        obs("run_start", 0),
        *[obs("step", 0, step=s, duration_s=2.0) for s in (100, 200, 300, 400, 500)],
        obs("checkpoint_start", 1000, step=500),
        obs("checkpoint_end", 1040, step=500, duration_s=40.0),
        *[obs("step", 1040, step=s, duration_s=2.0) for s in (600, 700, 800)],
        obs("failure", 1040, step=800, failure_class="python_exception"),
        obs("failure", 1040, step=800, failure_class="cuda_illegal_memory_access"),
        obs("failure", 1041, failure_class="slurm_task_failure"),
        obs("run_start", 2500),
        obs("resume", 2500, step=500),
        *[obs("step", 2500, step=s, duration_s=2.0) for s in (600, 700)],
    ]


def parsed_observations(lines: list[str], source: str = "train.log") -> list[Observation]:
    """The timed events of a log's lines, as the agent hands them to the rules."""
    events, _ = parse(lines)
    return [
        Observation(
            str(e.kind),
            e.time.timestamp(),
            e.step,
            e.duration_s,
            e.failure_class,
            e.planned,
            source=source,
        )
        for e in events
        if e.time is not None
    ]


def real_hf_observations(*, drop_failures: bool = False) -> list[Observation]:
    """The captured HF Trainer crash and resume runs (agent/fixtures/real), parsed as the agent
    does; ``drop_failures`` leaves the crash's failure lines out (a run killed silently)."""
    observations = []
    for name in ("hf_trainer_crash.log", "hf_trainer_resume.log"):
        events, _ = parse(read_lines(REAL_LOGS / name))
        observations += [
            Observation(
                str(e.kind), e.time.timestamp(), e.step, e.duration_s, e.failure_class, source=name
            )
            for e in events
            if e.time is not None and not (drop_failures and e.kind == "failure")
        ]
    return observations


@dataclass(frozen=True)
class Trace:
    """A simulated job: its observations and the truth behind them."""

    observations: list[Observation]
    exposure_s: float
    n_failures: int


def simulate_trace(
    rng: np.random.Generator,
    *,
    mtbf_s: float,
    horizon_s: float,
    step_time_s: float = 1.0,
    save_steps: int = 600,
    log_steps: int = 10,
    cost_s: float = 30.0,
    downtime_s: float = 900.0,
    start_s: float = 1.7e9,
    failure_class: str = "nccl_error",
    shape: float = 1.0,
) -> Trace:
    """Simulate runs until ``horizon_s`` seconds of running time, failing at rate 1/``mtbf_s``.

    Each run logs ``run_start``, a ``step`` every ``log_steps`` steps and a timed save
    (``checkpoint_start`` + ``checkpoint_end`` with ``duration_s``) every ``save_steps`` steps,
    resumes from its last save after a failure and a ``restart`` after ``downtime_s``. The last
    run is cut at the horizon without a failure (right-censored). Exposure is measured the way
    the rules define it: from each ``run_start`` to its failure, and to the last observation.
    With ``shape`` other than 1 the running time between failures is Weibull with that shape
    and mean ``mtbf_s``.
    """
    scale_s = mtbf_s / math.gamma(1.0 + 1.0 / shape)
    observations: list[Observation] = []
    exposure_s = 0.0
    n_failures = 0
    now_s = start_s
    step = 0
    remaining_s = horizon_s
    while remaining_s > 0:
        life_s = float(rng.exponential(mtbf_s) if shape == 1.0 else scale_s * rng.weibull(shape))
        failed = life_s < remaining_s
        run_s = min(life_s, remaining_s)
        observations.append(Observation("run_start" if step == 0 else "restart", now_s))
        top = int(run_s / step_time_s) + 1
        logged = _steps_before(
            np.arange(log_steps, top + 1, log_steps), run_s, step_time_s, save_steps, cost_s, 0.0
        )
        saved = _steps_before(
            np.arange(save_steps, top + 1, save_steps),
            run_s,
            step_time_s,
            save_steps,
            cost_s,
            cost_s,
        )
        observations += [Observation("step", now_s + t, step=step + k) for k, t in logged]
        for k, t in saved:
            observations.append(Observation("checkpoint_start", now_s + t, step=step + k))
            observations.append(
                Observation("checkpoint_end", now_s + t + cost_s, step=step + k, duration_s=cost_s)
            )
        if failed:
            observations.append(Observation("failure", now_s + run_s, failure_class=failure_class))
            exposure_s += run_s
            n_failures += 1
        else:
            last_s = max([t for _, t in logged] + [t + cost_s for _, t in saved] + [0.0])
            exposure_s += last_s
        step += saved[-1][0] if saved else 0
        now_s += run_s + downtime_s
        remaining_s -= run_s
    return Trace(observations, exposure_s, n_failures)


def _steps_before(
    steps: np.ndarray,
    run_s: float,
    step_time_s: float,
    save_steps: int,
    cost_s: float,
    margin_s: float,
) -> list[tuple[int, float]]:
    """(step, seconds into the run it ends) for the ``steps`` that end ``margin_s`` before
    ``run_s``; a step ends after its own time plus one save per earlier multiple of save_steps."""
    ends_s = steps * step_time_s + ((steps - 1) // save_steps) * cost_s
    keep = ends_s + margin_s < run_s
    return list(zip(steps[keep].tolist(), ends_s[keep].tolist(), strict=True))


@dataclass(frozen=True)
class TwoTierTrace:
    """A generated two-tier job and its truth.

    Attributes:
        observations: saves (timing records with their tier), step rates, failures, restarts.
        exposure_s: running time.
        n_recoverable, n_unrecoverable: interruptions a memory copy survives, and the others.
    """

    observations: list[Observation]
    exposure_s: float
    n_recoverable: int
    n_unrecoverable: int


def two_tier_trace(
    *,
    fast_cost_s: float,
    persistent_cost_s: float,
    fast_interval_s: float,
    saves_per_persistent: int,
    class_mtbf_s: dict[str, float],
    restart_s: float,
    days: float,
    step_time_s: float = 2.0,
    seed: int = 0,
) -> TwoTierTrace:
    """A job that computes ``fast_interval_s``, then saves (every ``saves_per_persistent``-th
    save persistent, the others to memory, each a timing record with its tier and a duration
    drawn ±10% around its tier's cost), with interruptions of each class as a Poisson process
    in running time (``class_mtbf_s``), each followed by ``restart_s`` of downtime and a
    restart; a step rate line after every save. Truth: the costs, the classes' MTBFs (which
    tier survives each: ``rules/tiers.py``)."""
    from ckpt_advisor.rules.tiers import Tier, surviving_tier

    rng = np.random.default_rng(seed)
    total_rate = sum(1.0 / m for m in class_mtbf_s.values())
    names = list(class_mtbf_s)
    weights = np.array([1.0 / class_mtbf_s[n] for n in names]) / total_rate
    observations = [Observation("run_start", T0, source="train.log")]
    now_s, end_s, exposure_s, step = T0, T0 + days * 86400.0, 0.0, 0
    n_rec = n_unrec = 0
    while now_s < end_s:
        life_s = float(rng.exponential(1.0 / total_rate))
        run_end_s = min(now_s + life_s, end_s)
        saves = 0
        t = now_s
        while True:
            saves += 1
            persistent = saves % saves_per_persistent == 0
            cost = persistent_cost_s if persistent else fast_cost_s
            duration = cost * float(rng.uniform(0.9, 1.1))
            if t + fast_interval_s + duration >= run_end_s:
                break
            t += fast_interval_s
            step += round(fast_interval_s / step_time_s)
            observations.append(
                Observation(
                    "checkpoint_end",
                    t + duration,
                    step=step,
                    duration_s=duration,
                    from_timing_file=True,
                    source="ckpt_timings.jsonl",
                    tier="persistent" if persistent else "memory",
                )
            )
            t += duration
            observations.append(
                Observation(
                    "step", t + 1.0, step=step + 1, duration_s=step_time_s, source="train.log"
                )
            )
        exposure_s += run_end_s - now_s
        if run_end_s >= end_s:
            break
        name = names[int(rng.choice(len(names), p=weights))]
        if surviving_tier(name).tier is Tier.MEMORY:
            n_rec += 1
        else:
            n_unrec += 1
        observations.append(
            Observation("failure", run_end_s, failure_class=name, source="train.log")
        )
        now_s = run_end_s + restart_s
        observations.append(Observation("restart", now_s, source="train.log"))
    return TwoTierTrace(observations, exposure_s, n_rec, n_unrec)
