"""Deterministic benchmark inputs: a long HF Trainer log, many small logs, a big store.

The long log is made of real captured HF Trainer output (:mod:`agent.synth`): a few distinct
simulated stretches of training are rendered once and written one after another, each shifted
to its own time span, until the file reaches the asked size. Same arguments, same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from ckpt_advisor.agent.store import FileState, Store, is_url, open_store
from ckpt_advisor.agent.synth import SynthJob, simulate
from ckpt_advisor.parsers.events import Event, EventKind

CHUNK_DAYS = 3.0
"""Simulated days per distinct stretch of training (about 15 MB of log each)."""
DISTINCT_CHUNKS = 4
"""How many distinct stretches are simulated; the file cycles through them."""
START = datetime(2026, 1, 1, tzinfo=UTC)

_TS = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@dataclass(frozen=True)
class LogTruth:
    """What the generated log holds: bytes, lines, and the saves and failures written, and the
    SHA-256 of its first stretch (the generator's output: a log made by an older generator, or
    of another shape, is made again)."""

    size_bytes: int
    lines: int
    saves: int
    failures: int
    days: float
    first_sha256: str = ""


@dataclass(frozen=True)
class LogShape:
    """How a generated log is made: each of ``DISTINCT_CHUNKS`` stretches of ``chunk_days``
    simulated by :func:`agent.synth.simulate` with these arguments (1 s steps)."""

    name: str
    chunk_days: float
    mtbf_s: float
    cost_s: float
    interval_steps: int
    restart_s: float
    bar_every_steps: int
    log_every_steps: int


SPARSE = LogShape("sparse", CHUNK_DAYS, 12 * 3600.0, 120.0, 1800, 600.0, 1, 20)
"""The issue-7 log: a bar redraw per step, a metrics line every 20 steps (so a physical line
of about 1.3 kB), a save every 30 min costing 2 min, MTBF 12 h: ~8 events per MB."""

DENSE = LogShape("dense", 2.0, 2500.0, 10.0, 20, 60.0, 1, 2)
"""An event-dense log (issue 15): a metrics line every 2 steps (so a physical line of about
300 bytes: the bar drawn again after the last write, two redraws, the bar's clearing and the
metrics, as ``tqdm.write`` prints them), a save every 20 steps (~16 lines, its start glued
after a bar redraw) costing 10 s, a failure every ~2,500 running seconds (every ~2,000 lines)
restarted after 1 min: ~250 saves and ~2 failures per MB, as many events as the issue's
430,000 in 404 MB."""


def _chunk(shape: LogShape, seed: int) -> SynthJob:
    return simulate(
        mtbf_s=shape.mtbf_s,
        cost_s=shape.cost_s,
        interval_steps=shape.interval_steps,
        step_time_s=1.0,
        restart_s=shape.restart_s,
        duration_s=shape.chunk_days * 86400.0,
        start=START,
        seed=seed,
        bar_every_steps=shape.bar_every_steps,
        log_every_steps=shape.log_every_steps,
    )


def _shift(text: bytes, days: float) -> bytes:
    """Move every ``YYYY-MM-DD HH:MM:SS`` stamp in ``text`` ``days`` later."""
    delta = timedelta(days=days)
    moved: dict[bytes, bytes] = {}

    def move(m: re.Match[bytes]) -> bytes:
        stamp = m.group()
        if stamp not in moved:
            t = datetime.strptime(stamp.decode(), "%Y-%m-%d %H:%M:%S") + delta
            moved[stamp] = t.strftime("%Y-%m-%d %H:%M:%S").encode()
        return moved[stamp]

    return _TS.sub(move, text)


def training_log(path: Path, size_bytes: int, shape: LogShape = SPARSE) -> LogTruth:
    """Write (or reuse, if already written by the same generator with the same size) a log of
    at least ``size_bytes`` bytes at ``path`` made as ``shape`` says; return what it holds."""
    first = _chunk(shape, 0)
    first_text = "".join(text for _, text in first.log).encode()
    first_sha256 = hashlib.sha256(first_text).hexdigest()
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists():
        truth = LogTruth(**json.loads(meta.read_text()))
        written = path.stat().st_size == truth.size_bytes and truth.first_sha256 == first_sha256
        if written and 0 <= truth.size_bytes - size_bytes < 20 << 20:
            return truth
    chunks = [(first_text, first.n_saves, first.n_failures)]
    for seed in range(1, DISTINCT_CHUNKS):
        job = _chunk(shape, seed)
        text = "".join(text for _, text in job.log).encode()
        chunks.append((text, job.n_saves, job.n_failures))
    written = lines = saves = failures = 0
    i = 0
    with path.open("wb") as fh:
        while written < size_bytes:
            text, n_saves, n_failures = chunks[i % DISTINCT_CHUNKS]
            data = _shift(text, i * shape.chunk_days) if i else text
            fh.write(data)
            written += len(data)
            lines += data.count(b"\n")
            saves += n_saves
            failures += n_failures
            i += 1
        if not data.endswith(b"\n"):  # the last bar redraw: closed, as tqdm.close() does
            fh.write(b"\n")
            written, lines = written + 1, lines + 1
    truth = LogTruth(written, lines, saves, failures, i * shape.chunk_days, first_sha256)
    meta.write_text(json.dumps(asdict(truth)))
    return truth


def event_store(
    target: str | Path, n_events: int, *, job: str = "big", password: str | None = None
) -> Store:
    """A store holding ``n_events`` events of one job (or the one already at ``target``, a
    SQLite path or a PostgreSQL URL with ``password``): a step every 30 s, a save every 30 min
    costing 2 min, failures with a 12 h MTBF, a resume 10 min after each; written through
    :meth:`Store.commit_read` in batches, as the tailer does."""
    if is_url(target):
        store = open_store(target, password=password)
        if store.count_events(job) == n_events:
            return store
        store.prune_events(float("inf"))  # another size: start again
    else:
        path = Path(target)
        if path.exists():
            store = open_store(path)
            if store.count_events(job) == n_events:
                return store
            store.close()
            remove_store(path)
        store = open_store(path)
    rng = np.random.default_rng(7)
    t = START.timestamp()
    next_fail = t + rng.exponential(12 * 3600.0)
    state = FileState(0, job, "/bench/train.log", 1, 1, "0" * 32, 1024, 0, 0, 0)
    batch: list[Event] = []
    step = line = made = 0

    def add(kind: EventKind, at: float, **kw: object) -> None:
        nonlocal line, made
        line += 1
        made += 1
        when = datetime.fromtimestamp(at, UTC)
        batch.append(Event(kind, line, "hf_trainer", time=when, **kw))  # type: ignore[arg-type]

    while made < n_events:
        t += 30.0
        step += 30
        if t >= next_fail:
            add(EventKind.FAILURE, t, step=step, failure_class="cuda_error")
            t += 600.0
            step -= step % 1800
            add(EventKind.RESUME, t, step=step)
            next_fail = t + rng.exponential(12 * 3600.0)
        elif step % 1800 == 0:
            add(EventKind.CHECKPOINT_START, t, step=step)
            add(EventKind.CHECKPOINT_END, t + 120.0, step=step, duration_s=120.0)
            t += 120.0
        else:
            add(EventKind.STEP, t, step=step, duration_s=1.0)
        if len(batch) >= 50_000 or made >= n_events:
            state = store.commit_read(
                state, offset=line, lineno=line, events=batch, now_s=t, from_timing_file=False
            )
            batch = []
    return store


def remove_store(db: Path | str) -> None:
    """Delete an SQLite store and its WAL and shared-memory files, if there."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
