"""Monte Carlo of a checkpointed job, and a replay of a job's own interruptions (backtest).

The model is the one behind Young (1974) and Daly (2006): the job computes ``T`` seconds, then
saves for ``C`` seconds (training stalls), and repeats. A failure can strike at any moment of
running time (computing or saving); the work since the last completed save is lost, and the job
is down for ``R`` seconds before it runs again from that save. The running time between
failures (a *life*) is drawn from an exponential or a Weibull distribution with mean ``M`` and
renews at each restart. Nothing here reads a clock or a file: randomness comes from a seeded
:class:`numpy.random.Generator`, so a seed gives the same numbers everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ckpt_advisor.rules._checks import require_count, require_non_negative, require_positive
from ckpt_advisor.rules.interval import daly_interval_s
from ckpt_advisor.rules.timeline import FloatArray


@dataclass(frozen=True, slots=True)
class Replay:
    """What a fixed interval makes of a sequence of lives.

    Attributes:
        interval_s: compute time between saves T, seconds.
        useful_s: work kept (computed and saved, or computed before a clean end), seconds.
        wall_s: wall-clock time, seconds (lives, restarts and the censored tail).
        n_failures: lives that ended in a failure.
    """

    interval_s: float
    useful_s: float
    wall_s: float
    n_failures: int

    @property
    def goodput(self) -> float:
        """Useful fraction of wall time, in [0, 1]."""
        return self.useful_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def waste_fraction(self) -> float:
        """Fraction of wall time lost to saves, lost work and restarts: ``1 − goodput``."""
        return 1.0 - self.goodput


def replay(
    lives_s: Sequence[float] | FloatArray,
    *,
    interval_s: float,
    cost_s: float,
    restart_s: float,
    tail_s: float = 0.0,
) -> Replay:
    """Replay failures after each of ``lives_s`` seconds of running time against interval T.

    A life of ``X`` seconds completes ``floor(X / (T + C))`` compute-and-save cycles, keeps
    ``T`` of work per cycle, loses the rest and is followed by ``R`` seconds of restart. The
    censored tail (running time after the last failure, ended cleanly or still going) keeps all
    its compute: ``tail − floor(tail / (T + C))·C``.

    Args:
        lives_s: shape (f,), running time before each failure, seconds, >= 0.
        interval_s: compute time between saves T, seconds, > 0.
        cost_s: blocking save time C, seconds, >= 0.
        restart_s: downtime after a failure R, seconds, >= 0.
        tail_s: censored running time after the last failure, seconds, >= 0.

    Returns:
        The totals.

    Raises:
        ValueError: an argument out of range.
    """
    interval = require_positive("interval_s", interval_s)
    cost = require_non_negative("cost_s", cost_s)
    restart = require_non_negative("restart_s", restart_s)
    tail = require_non_negative("tail_s", tail_s)
    lives = np.asarray(lives_s, np.float64)
    if lives.size and (not np.isfinite(lives).all() or lives.min() < 0):
        raise ValueError("lives_s must be finite and >= 0")
    cycle = interval + cost
    useful = float(np.floor(lives / cycle).sum()) * interval
    useful += tail - math.floor(tail / cycle) * cost
    wall = float(lives.sum()) + lives.size * restart + tail
    return Replay(interval, useful, wall, int(lives.size))


def draw_lives(
    rng: np.random.Generator,
    *,
    mtbf_s: float,
    restart_s: float,
    horizon_s: float,
    shape: float = 1.0,
) -> tuple[FloatArray, float]:
    """Lives (running time between failures) of a job that runs for ``horizon_s`` wall seconds.

    Lives are independent with mean ``mtbf_s``: exponential for ``shape == 1``, else Weibull
    with that shape and scale ``M / Γ(1 + 1/k)``. Each failure is followed by ``restart_s`` of
    downtime; the life running at the horizon is cut there and returned as the censored tail.

    Args:
        rng: the random source.
        mtbf_s: mean life M, seconds, > 0.
        restart_s: downtime after each failure, seconds, >= 0.
        horizon_s: wall-clock length of the job, seconds, > 0.
        shape: Weibull shape k, > 0.

    Returns:
        ``(lives, tail)``: shape (f,) seconds, and the censored tail, seconds.

    Raises:
        ValueError: an argument out of range.
    """
    law = _LifeLaw.of(mtbf_s, restart_s, horizon_s, shape)
    restart, horizon, batch = law.restart_s, law.horizon_s, law.batch
    lives = np.zeros(0)
    while True:
        more = law.draw(rng, batch)
        lives = np.concatenate((lives, more))
        ends = np.cumsum(lives + restart) - restart  # wall time at each failure
        if ends[-1] >= horizon:
            break
    last = int(np.searchsorted(ends, horizon, "right"))  # failures strictly inside the horizon
    started = float(ends[last - 1] + restart) if last else 0.0
    return lives[:last], max(0.0, horizon - started)


@dataclass(frozen=True, slots=True)
class SimulatedInterval:
    """Monte Carlo result for one interval.

    Attributes:
        interval_s: compute time between saves T, seconds.
        waste_fraction: mean over replicates of the fraction of wall time lost.
        waste_stderr: standard error of that mean.
        goodput: ``1 − waste_fraction``.
        failures_per_replicate: mean number of failures per replicate.
    """

    interval_s: float
    waste_fraction: float
    waste_stderr: float
    goodput: float
    failures_per_replicate: float


def simulate_intervals(
    intervals_s: Sequence[float],
    *,
    mtbf_s: float,
    cost_s: float,
    restart_s: float = 0.0,
    shape: float = 1.0,
    horizon_s: float = 30 * 86400.0,
    replicates: int = 200,
    seed: int = 0,
) -> list[SimulatedInterval]:
    """Simulate ``replicates`` jobs of ``horizon_s`` and replay each interval against them.

    Every interval sees the same lives (common random numbers), so differences between
    intervals are not noise between draws. The numbers are those of :func:`draw_lives` called
    once per replicate and :func:`replay` of each replicate's lives at each interval, computed
    over all replicates at once (:func:`_drawn_replicates`).

    Args:
        intervals_s: compute times between saves to compare, seconds, each > 0.
        mtbf_s: mean life M, seconds, > 0.
        cost_s: blocking save time C, seconds, >= 0.
        restart_s: downtime after a failure R, seconds, >= 0.
        shape: Weibull shape of the lives (1: exponential), > 0.
        horizon_s: wall-clock length of each simulated job, seconds, > 0.
        replicates: simulated jobs, >= 2.
        seed: seed of :func:`numpy.random.default_rng`.

    Returns:
        One result per interval, in the order given.

    Raises:
        ValueError: an argument out of range.
    """
    require_count("replicates", replicates, minimum=2)
    drawn = _drawn_replicates(
        np.random.default_rng(seed),
        replicates,
        mtbf_s=mtbf_s,
        restart_s=restart_s,
        horizon_s=horizon_s,
        shape=shape,
    )
    restart = require_non_negative("restart_s", restart_s)
    wall = drawn.sums + drawn.counts * restart + drawn.tails
    out = []
    for interval in intervals_s:
        interval = require_positive("interval_s", interval)
        cost = require_non_negative("cost_s", cost_s)
        cycle = interval + cost
        useful = drawn.whole_cycles(cycle) * interval
        useful += drawn.tails - np.floor(drawn.tails / cycle) * cost
        goodput = np.divide(useful, wall, out=np.zeros(replicates), where=wall > 0)
        waste = 1.0 - goodput
        mean = float(waste.mean())
        out.append(
            SimulatedInterval(
                interval_s=interval,
                waste_fraction=mean,
                waste_stderr=float(waste.std(ddof=1) / math.sqrt(waste.size)),
                goodput=1.0 - mean,
                failures_per_replicate=float(np.mean(drawn.counts)),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class _Replicates:
    """The lives of simulated jobs (:func:`_drawn_replicates`).

    Attributes:
        blocks: the lives, one row per replicate in order, in blocks of rows of one width: a
            row's lives, then zeros.
        counts: shape (r,), each replicate's number of lives.
        tails: shape (r,), each one's censored tail, seconds.
        sums: shape (r,), each one's lives summed as :func:`replay` sums them (a float sum
            depends on its order: each row's lives alone).
    """

    blocks: list[FloatArray]
    counts: npt.NDArray[np.int64]
    tails: FloatArray
    sums: FloatArray

    def whole_cycles(self, cycle_s: float) -> FloatArray:
        """Per replicate, the compute-and-save cycles of ``cycle_s`` its lives complete, summed
        over its lives: whole numbers, whose sums below 2**53 are exact in any order, and to
        which a row's zeros add none."""
        return np.concatenate([np.floor(block / cycle_s).sum(axis=1) for block in self.blocks])


DRAWN_PER_BLOCK = 1 << 15
"""Lives drawn at most at once by :func:`_drawn_replicates` (256 kB of float64: a block and
its arrays stay in the cache)."""


def _drawn_replicates(
    rng: np.random.Generator,
    replicates: int,
    *,
    mtbf_s: float,
    restart_s: float,
    horizon_s: float,
    shape: float,
) -> _Replicates:
    """The lives of ``replicates`` jobs, as ``replicates`` calls of :func:`draw_lives` draw
    them one after the other from ``rng``.

    A replicate's first batch of :func:`draw_lives` is a row of a block of replicates drawn at
    once (a generator fills an array value after value, so the block holds the same numbers
    in the same order). A replicate that needs a second batch (its lives fall short of the
    horizon) is drawn by :func:`draw_lives` itself, from the generator's state rewound to its
    row; the next block starts after it.
    """
    law = _LifeLaw.of(mtbf_s, restart_s, horizon_s, shape)
    restart, horizon, batch = law.restart_s, law.horizon_s, law.batch

    def block(rows: int) -> FloatArray:
        return law.draw(rng, (rows, batch))

    blocks: list[FloatArray] = []
    counts: list[int] = []
    tails: list[float] = []
    sums: list[float] = []
    while len(counts) < replicates:
        rows = min(replicates - len(counts), max(1, DRAWN_PER_BLOCK // batch))
        state = rng.bit_generator.state
        drawn = block(rows)
        ends = drawn + restart
        for row in ends:  # np.cumsum along axis 1 runs down the columns: several times slower
            row.cumsum(out=row)
        ends -= restart  # wall time at each failure
        short = np.flatnonzero(ends[:, -1] < horizon)
        if short.size:  # that row needs more lives: its replicate is drawn as draw_lives does
            rows = int(short[0])
            rng.bit_generator.state = state
            block(rows)  # the rows before it, drawn again: the generator is at its row
            drawn, ends = drawn[:rows], ends[:rows]
        last = np.count_nonzero(ends <= horizon, axis=1)  # failures strictly inside the horizon
        started = np.where(last > 0, ends[np.arange(rows), last - 1] + restart, 0.0)
        drawn[np.arange(batch) >= last[:, None]] = 0.0
        blocks.append(drawn)
        n_lives = last.tolist()
        counts += n_lives
        tails += np.maximum(0.0, horizon - started).tolist()
        sums += [float(row[:n].sum()) for row, n in zip(drawn, n_lives, strict=True)]
        if short.size:
            one, tail = draw_lives(
                rng, mtbf_s=law.mtbf_s, restart_s=restart, horizon_s=horizon, shape=law.shape
            )
            blocks.append(one[np.newaxis])
            counts.append(one.size)
            tails.append(tail)
            sums.append(float(one.sum()))
    return _Replicates(blocks, np.array(counts, np.int64), np.array(tails), np.array(sums))


@dataclass(frozen=True, slots=True)
class _LifeLaw:
    """The lives :func:`draw_lives` draws: mean ``mtbf_s``, Weibull ``shape`` (exponential at
    1) with its ``scale``, ``restart_s`` after each failure, ``batch`` drawn at once for a job
    of ``horizon_s`` (:func:`_batch`); seconds."""

    mtbf_s: float
    restart_s: float
    horizon_s: float
    shape: float
    scale: float
    batch: int

    @classmethod
    def of(cls, mtbf_s: float, restart_s: float, horizon_s: float, shape: float) -> _LifeLaw:
        """The law of these arguments.

        Raises:
            ValueError: an argument out of range.
        """
        mtbf = require_positive("mtbf_s", mtbf_s)
        restart = require_non_negative("restart_s", restart_s)
        horizon = require_positive("horizon_s", horizon_s)
        k = require_positive("shape", shape)
        scale = mtbf / math.gamma(1.0 + 1.0 / k)
        return cls(mtbf, restart, horizon, k, scale, _batch(horizon, mtbf + restart))

    def draw(self, rng: np.random.Generator, size: int | tuple[int, int]) -> FloatArray:
        """``size`` lives from ``rng``, seconds."""
        if self.shape == 1.0:
            drawn: FloatArray = self.mtbf_s * rng.standard_exponential(size)
        else:
            drawn = self.scale * rng.weibull(self.shape, size)
        return drawn


def _batch(horizon_s: float, life_s: float) -> int:
    """Lives drawn at once for a job of ``horizon_s`` whose lives and restarts average
    ``life_s``: enough for the horizon but rarely (1.2 times the expected number, and 16)."""
    return int(horizon_s / life_s * 1.2) + 16


def interval_grid_s(
    mtbf_s: float, cost_s: float, *, span: float = 4.0, points: int = 81
) -> list[float]:
    """Intervals spaced evenly in log scale from Daly/span to Daly·span (Daly 2006, eq. 37).

    Raises:
        ValueError: ``span`` <= 1, ``points`` < 2, or a bad M or C.
    """
    if require_positive("span", span) <= 1.0:
        raise ValueError(f"span must be > 1, got {span!r}")
    require_count("points", points, minimum=2)
    center = daly_interval_s(mtbf_s, cost_s)
    return [float(x) for x in center * np.geomspace(1.0 / span, span, points)]


SIMULATED_DAYS_MAX = 30.0
"""Longest simulated job behind :func:`simulated_goodput`, days (shorter when M is short: the
goodput of a job of a thousand lives is as good as that of a longer one)."""


def simulated_goodput(
    intervals_s: Sequence[float],
    *,
    mtbf_s: float,
    cost_s: float,
    restart_s: float,
    shape: float = 1.0,
    replicates: int = 200,
    seed: int = 0,
) -> list[float]:
    """Goodput at each interval over simulated jobs with a job's own M, C and R.

    :func:`simulate_intervals` (common random numbers: every interval sees the same lives, so
    the difference between two intervals is not noise between draws) over ``replicates`` jobs of
    ``min(30 d, 1000·(M + R))``, and at least 20 cycles of the longest interval (but never more
    than 5,000 lives: then goodput is about 0 anyway). With M = 6 h
    and 200 replicates a goodput's standard error is about 0.1 point (20 ms).

    Args:
        intervals_s: compute times between saves T, seconds, each > 0.
        mtbf_s: mean life M, seconds, > 0.
        cost_s: blocking save time C, seconds, >= 0.
        restart_s: downtime after a failure R, seconds, >= 0.
        shape: Weibull shape of the lives (1: exponential), > 0.
        replicates: simulated jobs, >= 2.
        seed: seed of the lives (the same seed gives the same goodput).

    Returns:
        Goodput (kept work over wall time, in [0, 1]) per interval, in the order given.

    Raises:
        ValueError: an argument out of range.
    """
    mtbf = require_positive("mtbf_s", mtbf_s)
    restart = require_non_negative("restart_s", restart_s)
    cost = require_non_negative("cost_s", cost_s)
    longest = max((require_positive("interval_s", t) for t in intervals_s), default=0.0)
    life_s = mtbf + restart
    horizon_s = max(min(SIMULATED_DAYS_MAX * 86400.0, 1000.0 * life_s), 20.0 * (longest + cost))
    horizon_s = min(horizon_s, 5000.0 * life_s)  # at most ~5,000 lives a job
    runs = simulate_intervals(
        intervals_s,
        mtbf_s=mtbf,
        cost_s=cost,
        restart_s=restart,
        shape=shape,
        horizon_s=horizon_s,
        replicates=replicates,
        seed=seed,
    )
    return [r.goodput for r in runs]
