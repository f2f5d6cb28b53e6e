"""Advice that applies itself: a training job follows its advice file, within the user's bounds.

Opt-in and training-side (standard library only, like :mod:`ckpt_advisor.agent.training`):
:class:`AdvisedInterval` holds a job's checkpoint interval in steps, reads the daemon's advice
file (``[advice] dir``/``JOB.json``, DESIGN.md) every ``poll_every_steps`` steps, and moves the
interval as :class:`ckpt_advisor.rules.adoption.AdoptionPolicy` decides. The HF Trainer and
Lightning callbacks of :mod:`ckpt_advisor.agent.training` drive one; a hand-written loop calls it
directly::

    schedule = AdvisedInterval("/var/lib/ckpt-advisor/advice/llama.json", interval_steps=500,
                               policy=AdoptionPolicy(min_interval_s=600, max_interval_s=4 * 3600))
    for step in range(start, total):
        train_step()
        schedule.step_done(step + 1)
        if schedule.save_due(step + 1):
            with checkpoint_timer("ckpt_timings.jsonl", step=step + 1, path=d):
                save(d)
            schedule.save_done(step + 1)

Each change is logged on the ``ckpt_advisor.training`` logger at WARNING (so it shows under
Python's default logging too) in the line that ``parsers/adoption.py`` recognises::

    ckpt-advisor: checkpoint interval changed at step 61: 50 -> 25 steps (7.3 s -> 3.6 s);
    advice for job demo computed 2026-12-01T10:16:36.586+00:00; now 2026-12-01T10:16:37.041+00:00

(one line). A missing, unreadable, malformed or stale file changes nothing and is warned about
once (again only after a good reading, or for another problem).

Several processes (one per rank) must agree on the interval, or a collective save hangs: give
``broadcast`` (rank 0's value to every rank, e.g. ``torch.distributed.broadcast_object_list``)
and ``is_main`` (True on rank 0 only). Polls fall on the same steps on every rank (a multiple
of steps, never the clock), only rank 0 reads the file and logs, and every rank takes rank 0's
decision.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ckpt_advisor.rules.adoption import AdoptionPolicy, Advice, parse_advice

LOG = logging.getLogger("ckpt_advisor.training")
CHANGE_PREFIX = "ckpt-advisor: checkpoint interval changed at step "
"""Start of the change line (``parsers/adoption.py`` keys on it)."""

STEP_TIMES_KEPT = 64
"""Step durations behind the median step time."""


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


class AdvisedInterval:
    """A job's checkpoint interval in steps, moved by its advice file within a policy's bounds.

    Args:
        advice_file: the job's advice file (``[advice] dir``/``JOB.json``).
        interval_steps: the interval the job starts with, >= 1.
        policy: the user's bounds and pace (:class:`AdoptionPolicy`).
        tier: follow this tier's interval of the advice (``"memory"``, ``"persistent"``)
            instead of the single recommendation.
        poll_every_steps: read the file every this many steps; default a tenth of the current
            interval (at least 1), so a few reads per save.
        clock: seconds since the epoch (tests pass a fake).
        broadcast: rank 0's value to every rank, for multi-process jobs (module docstring).
        is_main: True where the file is read and changes are logged (rank 0).
        logger: where change lines and warnings go.

    Raises:
        ValueError: ``interval_steps`` or ``poll_every_steps`` below 1.
    """

    def __init__(
        self,
        advice_file: str | os.PathLike[str],
        *,
        interval_steps: int,
        policy: AdoptionPolicy,
        tier: str | None = None,
        poll_every_steps: int | None = None,
        clock: Callable[[], float] = time.time,
        broadcast: Callable[[int | None], int | None] | None = None,
        is_main: bool = True,
        logger: logging.Logger = LOG,
    ) -> None:
        if interval_steps < 1 or (poll_every_steps is not None and poll_every_steps < 1):
            raise ValueError("interval_steps and poll_every_steps must be >= 1")
        self.path = Path(advice_file)
        self.interval_steps = interval_steps
        self.policy = policy
        self.tier = tier
        self.last_save_step = 0
        self.changes = 0
        """Interval changes made so far."""
        self._poll_every = poll_every_steps
        self._clock = clock
        self._broadcast = broadcast
        self._is_main = is_main
        self._log = logger
        self._last_poll_step: int | None = None
        self._last_change_s: float | None = None
        self._last_step: tuple[int, float] | None = None
        self._saved_since_step = False
        self._step_times: deque[float] = deque(maxlen=STEP_TIMES_KEPT)
        self._warned: str | None = None

    @property
    def step_time_s(self) -> float | None:
        """Median seconds per step over recent steps without a save, None before two steps."""
        return statistics.median(self._step_times) if self._step_times else None

    def save_due(self, step: int) -> bool:
        """True when ``interval_steps`` have passed since the last save (:meth:`save_done`)."""
        return step - self.last_save_step >= self.interval_steps

    def save_done(self, step: int) -> None:
        """Note a save at ``step``: the next is due ``interval_steps`` later, and the time the
        save took is kept out of the step time."""
        self.last_save_step = step
        self._saved_since_step = True

    def step_done(self, step: int) -> int | None:
        """Note that training reached ``step``; poll the advice when a poll is due.

        Returns:
            The new interval in steps when it changed at this step, else None.
        """
        now = self._clock()
        if self._last_step is not None and not self._saved_since_step:
            last_step, last_s = self._last_step
            if step > last_step:
                self._step_times.append((now - last_s) / (step - last_step))
        self._last_step, self._saved_since_step = (step, now), False
        every = self._poll_every or max(1, self.interval_steps // 10)
        if self._last_poll_step is not None and step - self._last_poll_step < every:
            return None
        self._last_poll_step = step
        decided = self._decide(now) if self._is_main else None
        if self._broadcast is not None:
            decided = self._broadcast(decided)
        if decided is None or decided == self.interval_steps:
            return None
        self.interval_steps = decided
        self._last_change_s = now
        self.changes += 1
        return decided

    def _decide(self, now: float) -> int | None:
        """Rank 0's decision: the new interval in steps, or None to keep it."""
        advice = self._read()
        if advice is None:
            return None
        step_time = self.step_time_s
        advised_steps = advice.interval_steps(self.tier)
        advised_s = advice.interval_s(self.tier)
        if step_time is None and advised_steps and advised_s:
            step_time = advised_s / advised_steps  # the daemon's step time, until ours is known
        if step_time is None:
            return None
        current_s = self.interval_steps * step_time
        decision = self.policy(
            advice,
            current_interval_s=current_s,
            now_s=now,
            last_change_s=self._last_change_s,
            tier=self.tier,
        )
        if decision.stale:
            self._warn("stale", f"is stale: {decision.reason}")
            return None
        self._warned = None
        if decision.interval_s is None:
            return None
        steps = self.policy.steps(decision.interval_s, step_time, self.interval_steps)
        if steps == self.interval_steps:
            return None
        step = self._last_step[0] if self._last_step else 0
        self._log.warning(
            "%s%d: %d -> %d steps (%.1f s -> %.1f s); advice for job %s computed %s; now %s",
            CHANGE_PREFIX,
            step,
            self.interval_steps,
            steps,
            current_s,
            steps * step_time,
            advice.job,
            _iso(advice.computed_at_s),
            _iso(now),
        )
        return steps

    def _read(self) -> Advice | None:
        """The advice file's content, or None (warned once) when it cannot be used."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self._warn("missing", "not found")
            return None
        except OSError as exc:
            self._warn("unreadable", f"unreadable ({exc.strerror or exc})")
            return None
        try:
            return parse_advice(json.loads(text))
        except (ValueError, RecursionError) as exc:
            self._warn("malformed", f"malformed ({str(exc)[:120]})")
            return None

    def _warn(self, problem: str, text: str) -> None:
        if self._warned == problem:
            return
        self._warned = problem
        self._log.warning(
            "ckpt-advisor: advice file %s %s; keeping %d steps",
            self.path,
            text,
            self.interval_steps,
        )
