"""Synthetic long training jobs made of real captured output, with known truth.

The demo, the end-to-end tests and the benchmark need days of training log whose true checkpoint
cost C and MTBF M are known. This module simulates such a job (failures in running time drawn
from an exponential distribution with mean M; a save every ``interval_steps`` steps that blocks
for C seconds; a restart delay after each failure; resume from the last save) and renders it with
the lines that HF Transformers 5.24.0 really printed, taken verbatim from the captured runs in
``agent/fixtures/real`` with only the timestamps, steps and paths changed. It also writes the
job's checkpoint timing file (DESIGN.md schema), which carries the exact C.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources

import numpy as np

_TS = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}")
_RUN_DIR = "/data/hf/run"


def _fixture(name: str) -> list[str]:
    text = (
        resources.files("ckpt_advisor.agent").joinpath("fixtures", "real", name).read_text("utf-8")
    )
    return text.split("\n")


def _last_record(line: str) -> str:
    """The record glued after the last tqdm redraw of a physical line."""
    tail = line.split("\r")[-1]
    return tail[tail.index("[INFO|") :] if "[INFO|" in tail else tail


@dataclass(frozen=True)
class Templates:
    """Verbatim blocks cut from the captured HF Trainer runs (see fixtures/real/README.md):
    the fresh and resume headers up to the first step, one save (start, "saved in" lines, the
    shard bar), the crash's traceback, a metrics dict and the end of a finished run. Tests
    re-time them (:func:`stamp`, :func:`save_lines`) to build logs of a given shape."""

    fresh_header: list[str]
    resume_header: list[str]
    save_block: list[str]
    traceback: list[str]
    metrics: str
    completed: list[str]

    @classmethod
    def load(cls) -> Templates:
        crash = _fixture("hf_trainer_crash.log")
        resume = _fixture("hf_trainer_resume.log")

        def find(lines: list[str], needle: str, start: int = 0) -> int:
            return next(i for i in range(start, len(lines)) if needle in lines[i])

        banner_end = find(crash, "Number of trainable parameters")
        resume_end = find(resume, "Fast-forwarding the dataloader")
        save_at = find(crash, "Saving model checkpoint to")
        weights_at = find(crash, "Model weights saved in", save_at)
        tb_at = find(crash, "Traceback (most recent call last)")
        exc_at = find(crash, "RuntimeError: CUDA error", tb_at)
        done_at = find(resume, "Training completed.")
        return cls(
            fresh_header=crash[: banner_end + 1],
            resume_header=resume[: resume_end + 1],
            save_block=[_last_record(crash[save_at]), *crash[save_at + 1 : weights_at + 1]],
            traceback=[
                crash[tb_at][crash[tb_at].index("Traceback") :],
                *crash[tb_at + 1 : exc_at + 1],
            ],
            metrics=crash[find(crash, "{'loss'")].split("\r")[-1],
            completed=resume[done_at - 2 : done_at + 1],
        )


# Exception lines really raised in the captured runs (HF crash; Lightning crash).
_EXCEPTIONS = (
    (
        'raise RuntimeError("CUDA error: an illegal memory access was encountered")',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ),
    (
        'raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error '
        '(run with NCCL_DEBUG=INFO for details)")',
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details)",
    ),
)


@dataclass
class SynthJob:
    """A simulated job: what to write, and the truth behind it.

    ``log`` and ``timings`` are lists of ``(sim_time, text)`` in time order; ``text`` is written
    to the file as is (it carries its own newlines and tqdm carriage returns).
    ``n_interruptions`` counts failures as DESIGN.md does: a run that dies again before it
    shows any progress (no bar redraw) is a failed restart of the same interruption.
    """

    mtbf_s: float
    cost_s: float
    restart_s: float
    step_time_s: float
    interval_steps: int
    log: list[tuple[datetime, str]] = field(default_factory=list)
    timings: list[tuple[datetime, str]] = field(default_factory=list)
    n_failures: int = 0
    n_interruptions: int = 0
    n_saves: int = 0
    exposure_s: float = 0.0
    save_durations_s: list[float] = field(default_factory=list)
    truth: list[tuple[str, datetime, datetime]] = field(default_factory=list)

    def truth_seconds(self, since: datetime, until: datetime) -> dict[str, float]:
        """The true seconds of each goodput bucket (``productive``, ``checkpoint``, ``lost``,
        ``restart``, ``idle``) between ``since`` and ``until``, as the simulation spent them
        (:attr:`truth`: completed saves block for their duration; the work since the last
        completed save, a save cut short included, is lost at each failure; restart is the
        downtime after it, and a run that dies again before it shows progress is part of the
        same restart; idle is the time between a clean stop and the next run, ``stops``)."""
        out = dict.fromkeys(("productive", "checkpoint", "lost", "restart", "idle"), 0.0)
        for bucket, start, end in self.truth:
            out[bucket] += max(0.0, (min(end, until) - max(start, since)).total_seconds())
        return out

    @property
    def interval_s(self) -> float:
        """The job's true checkpoint interval as Daly's T: compute time between saves (the
        save itself, C, not included)."""
        return self.interval_steps * self.step_time_s


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def stamp(line: str, t: datetime) -> str:
    """``line`` with its first ``YYYY-MM-DD HH:MM:SS,mmm`` stamp replaced by ``t``."""
    return _TS.sub(_ts(t), line, count=1)


def bar_redraw(
    step: int, total: int, elapsed_s: float, step_time_s: float, remaining_s: float | None = None
) -> str:
    """A tqdm redraw in tqdm's default ``{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining},
    {rate}]`` layout, as in the captured runs (``remaining_s``: what the bar shows as left,
    by default what the steps left take)."""
    frac = step / total
    filled = int(frac * 10)
    bar = "█" * filled + " " * (10 - filled)

    def hms(s: float) -> str:
        s = int(s)
        return (
            f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
            if s >= 3600
            else f"{s // 60:02d}:{s % 60:02d}"
        )

    remaining = (total - step) * step_time_s if remaining_s is None else remaining_s
    rate = f"{step_time_s:.2f}s/it" if step_time_s >= 1 else f"{1 / step_time_s:.2f}it/s"
    return f"\r{frac:4.0%}|{bar}| {step}/{total} [{hms(elapsed_s)}<{hms(remaining)}, {rate}]"


def written(message: str, bar: str) -> str:
    """``message`` as ``tqdm.write`` prints it under the bar ``bar`` (a :func:`bar_redraw`, or
    ``""`` if none is drawn yet): the bar cleared by a carriage return, as many spaces as it
    is wide and a carriage return, the message and its newline, then the bar drawn again, so
    the next record is glued after it, as in the captured runs (tqdm 4.67, ``tqdm.write``)."""
    clear = f"\r{' ' * (len(bar) - 1)}\r" if bar else "\r"
    return f"{clear}{message}\n{bar}"


def simulate(
    *,
    mtbf_s: float,
    cost_s: float,
    interval_steps: int,
    step_time_s: float = 6.0,
    restart_s: float = 600.0,
    duration_s: float = 7 * 86400.0,
    start: datetime | None = None,
    seed: int = 0,
    bar_every_steps: int = 10,
    log_every_steps: int = 50,
    logged_cost_fraction: float = 0.4,
    shape: float = 1.0,
    cost_sigma: float = 0.0,
    frozen_bar_s: float | None = None,
    lives_s: Sequence[float] | None = None,
    stops: Sequence[tuple[float, float]] = (),
) -> SynthJob:
    """Simulate a job for ``duration_s`` of wall time.

    Failures arrive in running time (exposure) with exponential gaps of mean ``mtbf_s`` (or,
    with ``shape`` other than 1, Weibull gaps of that shape and the same mean; each save lasts
    C, or with ``cost_sigma`` > 0 a lognormal duration of median C and log-sd ``cost_sigma``); after
    each, the job is down for ``restart_s`` and resumes from its last save. The log shows the
    start of each save and, ``logged_cost_fraction``·C later, its last "saved in" line (HF logs
    nothing when the optimizer state finishes), so the log alone underestimates C, as in life.

    With ``lives_s`` the running time before each failure is given instead of drawn (after the
    last one the job runs to the end without failing): a job of a known shape.

    With ``stops`` (pairs of wall seconds from the start and idle seconds, in time order) the
    run ends cleanly ("Training completed.") at its first save at or after each offset, the job
    is idle that long and a new run resumes from that save: idle time, as between two
    allocations of a job that is not failing.

    With ``frozen_bar_s`` the bar's clock does not advance: every redraw shows that elapsed
    time and 99:00:00 remaining (``[12:00:00<99:00:00, 6.00s/it]``), as the bars of wrappers,
    resumed bars and some custom loggers do; the steps still advance.

    Raises:
        ValueError: a non-positive duration, cost, MTBF, step time, interval or shape.
    """
    if min(mtbf_s, cost_s, step_time_s, duration_s, shape) <= 0 or interval_steps < 1:
        raise ValueError(
            "mtbf_s, cost_s, step_time_s, duration_s, interval_steps and shape must be > 0"
        )
    scale_s = mtbf_s / math.gamma(1.0 + 1.0 / shape)
    tpl = Templates.load()
    rng = np.random.default_rng(seed)
    lives = None if lives_s is None else iter(lives_s)
    job = SynthJob(mtbf_s, cost_s, restart_s, step_time_s, interval_steps)
    t = start or datetime(2026, 11, 1, tzinfo=UTC)
    end = t + timedelta(seconds=duration_s)
    total = math.ceil(duration_s / step_time_s)
    saved_step = 0
    run = 0
    pending = list(stops)
    start0 = t
    fresh = True  # the run follows no interruption (the first, or one after a clean stop)
    while t < end:
        run_start = t
        if lives is not None:
            life_s = next(lives, math.inf)
        else:
            life_s = rng.exponential(mtbf_s) if shape == 1.0 else scale_s * rng.weibull(shape)
        fail_at = t + timedelta(seconds=min(float(life_s), duration_s + 1.0))  # inf: never
        header = tpl.resume_header if saved_step else tpl.fresh_header
        for line in header:
            text = line.replace(f"{_RUN_DIR}/checkpoint-50", f"{_RUN_DIR}/checkpoint-{saved_step}")
            text = re.sub(r"global step \d+", f"global step {saved_step}", text)
            text = re.sub(
                r"past 0 epochs and \d+ batches", f"past 0 epochs and {saved_step} batches", text
            )
            text = re.sub(
                r"Total optimization steps = [\d,]+", f"Total optimization steps = {total:,}", text
            )
            job.log.append((t, stamp(text, t) + "\n"))
        step = restart_step = saved_step
        drawn = ""  # the bar as last drawn in this run
        failed = False
        kept = t  # the work since then is not saved yet
        while t < end:
            nxt = t + timedelta(seconds=step_time_s)
            if nxt > fail_at:
                failed = True
                break
            t, step = nxt, step + 1
            if step % bar_every_steps == 0:
                elapsed_s = (t - run_start).total_seconds()
                shown = (elapsed_s, None) if frozen_bar_s is None else (frozen_bar_s, 99 * 3600.0)
                drawn = bar_redraw(step, total, shown[0], step_time_s, shown[1])
                job.log.append((t, drawn))
            if step % log_every_steps == 0:
                job.log.append((t, written(tpl.metrics, drawn)))
            if step % interval_steps == 0:
                save_s = (
                    cost_s * math.exp(cost_sigma * rng.standard_normal()) if cost_sigma else cost_s
                )
                save_end = t + timedelta(seconds=save_s)
                if save_end > fail_at:
                    failed = True
                    break
                _append_save(job, tpl, t, save_end, step, logged_cost_fraction)
                job.truth += [("productive", kept, t), ("checkpoint", t, save_end)]
                t, saved_step, kept = save_end, step, save_end
                if pending and (t - start0).total_seconds() >= pending[0][0]:
                    break
        if failed:
            t = min(fail_at, end)
            if fail_at <= end:
                job.n_failures += 1
                new = step - restart_step >= bar_every_steps or fresh
                job.n_interruptions += int(new)
                job.log.extend((t, text) for text in traceback_lines(tpl, run))
                job.truth += [
                    ("lost" if new else "restart", kept, t),
                    ("restart", t, min(end, t + timedelta(seconds=restart_s))),
                ]
            else:
                job.truth.append(("productive", kept, end))
            job.exposure_s += (t - run_start).total_seconds()
            t += timedelta(seconds=restart_s)
            run, fresh = run + 1, False
        else:
            job.exposure_s += (t - run_start).total_seconds()
            if t >= end:
                job.truth.append(("productive", kept, end))
            else:  # a clean stop at a save (``stops``)
                idle_s = pending.pop(0)[1]
                job.log.extend((t, stamp(line, t) + "\n") for line in tpl.completed)
                job.truth.append(("idle", t, min(end, t + timedelta(seconds=idle_s))))
                t += timedelta(seconds=idle_s)
                run, fresh = run + 1, True
    return job


def _captured(line: str) -> datetime:
    """The ``YYYY-MM-DD HH:MM:SS,mmm`` stamp of a captured record (naive: only differences
    between two are used)."""
    found = _TS.search(line)
    if found is None:
        raise ValueError(f"no timestamp in the captured record {line!r}")
    return datetime.strptime(found.group(), "%Y-%m-%d %H:%M:%S,%f")


def save_lines(tpl: Templates, start: datetime, logged_end: datetime, step: int) -> list[str]:
    """The captured save block for ``checkpoint-<step>`` (no newlines): its start line stamped
    ``start``, its last "saved in" line ``logged_end``, and each "Configuration saved" line
    its own stamp, as long after ``start`` as it was after the captured save's start (1-3 ms),
    but never after ``logged_end``."""
    lines = []
    began = _captured(tpl.save_block[0])
    for line in tpl.save_block:
        text = re.sub(r"checkpoint-\d+", f"checkpoint-{step}", line)
        if "[INFO|" in text:
            own = start + (_captured(text) - began)
            text = stamp(text, logged_end if "Model weights" in text else min(own, logged_end))
        lines.append(text)
    return lines


def _append_save(
    job: SynthJob, tpl: Templates, start: datetime, end: datetime, step: int, logged: float
) -> None:
    """Append one save: its log block and its timing record."""
    weights_at = start + (end - start) * logged
    job.log.extend((start, text + "\n") for text in save_lines(tpl, start, weights_at, step))
    record = {
        "step": step,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "path": f"{_RUN_DIR}/checkpoint-{step}",
    }
    job.timings.append((end, json.dumps(record) + "\n"))
    job.n_saves += 1
    job.save_durations_s.append((end - start).total_seconds())


def traceback_lines(tpl: Templates, run: int) -> Iterator[str]:
    """The captured traceback, raising run ``run``'s exception (CUDA, then NCCL, in turn),
    one line (with its newline) at a time."""
    raise_line, exc_line = _EXCEPTIONS[run % len(_EXCEPTIONS)]
    for line in tpl.traceback:
        if line.startswith("RuntimeError:"):
            yield exc_line + "\n"
        elif "raise RuntimeError(" in line:
            yield line[: line.index("raise")] + raise_line + "\n"
        else:
            yield line + "\n"
