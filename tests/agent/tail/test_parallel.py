"""A backfill on two worker processes stores what one process stores, and survives a kill.

The buffers, ranges and line limit are made small (a range of two 128 kB buffers) so that a few
MB of log are cut many times: at quiet points, inside tracebacks and saves, in the public
corpus's odd files.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.tail import Tailer, WatchSpec, parallel, ranges, reader
from ckpt_advisor.agent.tail.parallel import ParallelBackfill
from ckpt_advisor.agent.tail.ranges import RangeResult, RangeTask, parse_range
from tests.agent.tail.helpers import FIXTURES, NOW

PUBLIC = Path(__file__).parents[2] / "parsers" / "fixtures" / "public"
SMALL = {"READ_CHUNK_BYTES": 128 << 10, "MAX_LINE_BYTES": 64 << 10}
"""Buffers of 128 kB and a 64 kB line limit (the same in the reader and the workers)."""
SPLIT = {"SPLIT_BYTES": 256 << 10, "RANGE_BYTES": 256 << 10}

DRIVER = """
import sys
from ckpt_advisor.agent.tail import parallel, ranges, reader
reader.READ_CHUNK_BYTES = 128 << 10
reader.MAX_LINE_BYTES = ranges.MAX_LINE_BYTES = 64 << 10
parallel.SPLIT_BYTES = parallel.RANGE_BYTES = 256 << 10
from ckpt_advisor.agent.cli import main
main(sys.argv[1:])
"""
"""``ckpt-advisor`` with the small sizes, for a run in a subprocess."""


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """The small buffers and ranges of the module docstring."""
    for name, value in SMALL.items():
        monkeypatch.setattr(reader, name, value)
    monkeypatch.setattr(ranges, "MAX_LINE_BYTES", SMALL["MAX_LINE_BYTES"])
    for name, value in SPLIT.items():
        monkeypatch.setattr(parallel, name, value)


def _generated(path: Path, *, dense: bool, hours: float) -> Path:
    """A log of the bench's dense or sparse shape (bench/inputs.py), ``hours`` of training."""
    job = simulate(
        mtbf_s=2500.0 if dense else 4 * 3600.0,
        cost_s=10.0 if dense else 120.0,
        interval_steps=20 if dense else 1800,
        step_time_s=1.0,
        restart_s=60.0 if dense else 600.0,
        duration_s=hours * 3600.0,
        seed=3,
        bar_every_steps=1,
        log_every_steps=2 if dense else 20,
    )
    path.write_text("".join(text for _, text in job.log))
    return path


def _corpus(directory: Path) -> list[Path]:
    """The real fixtures and the public corpus, concatenated: one file per stack directory of
    the corpus and one of everything (each with the real HF logs in front, ~1 MB)."""
    real = "".join(p.read_text(errors="replace") for p in sorted(FIXTURES.glob("*.log")))
    files, everything = [], [real]
    for stack in sorted(p for p in PUBLIC.iterdir() if p.is_dir()):
        text = "".join(p.read_text(errors="replace") for p in sorted(stack.glob("*.log")))
        if text:
            everything.append(text)
            files.append(directory / f"{stack.name}.log")
            files[-1].write_text(real + text)
    files.append(directory / "everything.log")
    files[-1].write_text("".join(everything) * 2)
    return files


def _tables(db: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Every events column but the row ids (the file by its path), in file and row order, and
    every files column but the row id and the time of the last update."""
    with sqlite3.connect(db) as conn:

        def columns(table: str, leave: set[str]) -> str:
            names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            return ", ".join(f'{table}."{n}"' for n in names if n not in leave)

        events = conn.execute(
            f"SELECT files.path, {columns('events', {'id', 'file_id'})} FROM events "
            "JOIN files ON files.id = events.file_id ORDER BY files.path, events.id"
        ).fetchall()
        files = conn.execute(
            f"SELECT {columns('files', {'id', 'updated_s'})} FROM files ORDER BY path"
        ).fetchall()
    return events, files


def _ingest(db: Path, files: list[Path], workers: int, job: str = "j") -> str:
    result = CliRunner().invoke(
        main, ["ingest", *map(str, files), "--job", job, "--db", str(db), "--workers", str(workers)]
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_two_workers_store_the_events_and_offsets_of_one(small: None, tmp_path: Path) -> None:
    """Ingested with 1 and with 2 workers, the corpus files (cut at many points, tracebacks
    and saves among them) and a generated dense and sparse log give identical events and
    files tables."""
    files = _corpus(tmp_path)
    files.append(_generated(tmp_path / "dense.log", dense=True, hours=4))
    files.append(_generated(tmp_path / "sparse.log", dense=False, hours=30))
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    out_one, out_two = _ingest(one, files, 1), _ingest(two, files, 2)
    events, stored = _tables(one)
    assert len(events) > 2000
    assert {e[4] for e in events} >= {"checkpoint_start", "checkpoint_end", "failure", "step"}
    assert _tables(two) == (events, stored)
    assert out_one == out_two  # the same summary: lines, events, estimate


def _tailer_events(
    db: Path, path: Path, workers: int
) -> tuple[list[object], ParallelBackfill | None]:
    """``path`` backfilled by a :class:`Tailer` on ``workers``: the events stored, and the
    tailer's worker pool (None on one process)."""
    store = open_store(db)
    spec = WatchSpec("j", (str(path),))
    tailer = Tailer(store, [spec], clock=lambda: NOW, tz=UTC, backfill=True, workers=workers)
    tailer.scan()
    pool = tailer._reader.parallel
    tailer.close()
    events = [(e.event, e.source) for e in store.events()]
    store.close()
    return events, pool


@pytest.mark.parametrize(
    ("window_kb", "overlap", "range_kb", "kept"),
    [(128, 8, 1024, True), (16, 1, 32, False)],
    ids=["dense log, overlaps that reach a run start", "corpus, short overlaps"],
)
def test_ranges_are_kept_or_parsed_again_here(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    window_kb: int,
    overlap: int,
    range_kb: int,
    kept: bool,
) -> None:
    """The dense log's ranges, whose overlaps reach back to a run's start, are all kept (the
    worker's parser state at each cut is the sequential one); the corpus, cut every 32 kB
    inside tracebacks and after a run's header, has ranges whose state differs: they are
    parsed again in the main process, and then the rest of the file; either way the events
    are those of one process."""
    monkeypatch.setattr(reader, "READ_CHUNK_BYTES", window_kb << 10)
    for module in (reader, ranges):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", window_kb << 9)
    monkeypatch.setattr(parallel, "SPLIT_BYTES", range_kb << 10)
    monkeypatch.setattr(parallel, "RANGE_BYTES", range_kb << 10)
    monkeypatch.setattr(parallel, "OVERLAP_WINDOWS", overlap)
    if kept:
        path = _generated(tmp_path / "dense.log", dense=True, hours=12)
    else:
        path = _corpus(tmp_path)[-1]
    one, _ = _tailer_events(tmp_path / "one.db", path, 1)
    two, pool = _tailer_events(tmp_path / "two.db", path, 2)
    assert two == one
    assert pool is not None
    if kept:
        assert (pool.ranges, pool.differed, pool.fallbacks) == (pool.ranges, 0, 0)
        assert pool.ranges >= 4
    else:
        assert pool.differed > parallel.MAX_DIFFERING
        assert pool.fallbacks == 1


def test_a_state_that_differs_at_the_cut_is_not_kept(small: None, tmp_path: Path) -> None:
    """A range whose parser, started fresh before its cut, is inside a traceback that began
    before the overlap has another signature than the sequential parser's: it is not kept."""
    frame = '  File "/x/train.py", line 1, in <module>\n    main()\n'
    text = "Traceback (most recent call last):\n" + frame * 12000 + "RuntimeError: boom\n"
    path = tmp_path / "tb.log"
    path.write_text(text + "after\n")
    events, pool = _tailer_events(tmp_path / "tb.db", path, 2)
    assert pool is not None
    assert pool.differed >= 1
    assert events == _tailer_events(tmp_path / "one.db", path, 1)[0]
    failures = [e for e, _ in events if e.kind == "failure"]
    assert [(e.line, e.failure_class) for e in failures] == [(1, "python_exception")]


def test_a_killed_ingest_run_again_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """An ingest on 2 workers killed (SIGKILL) after its first commits, then run again, stores
    exactly the events and offsets of one uninterrupted run on one process."""
    log = _generated(tmp_path / "dense.log", dense=True, hours=8)
    killed, whole = tmp_path / "killed.db", tmp_path / "whole.db"
    cmd = [sys.executable, "-c", DRIVER, "ingest", str(log), "--job", "j", "--workers", "2"]
    proc = subprocess.Popen([*cmd, "--db", str(killed)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    offset = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        try:
            with sqlite3.connect(killed) as conn:
                row = conn.execute('SELECT "offset" FROM files').fetchone()
        except sqlite3.OperationalError:
            continue  # not created yet
        if row is not None and row[0] > 0:
            offset = row[0]
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 0 < offset < log.stat().st_size, "killed after its first commit, before its end"
    subprocess.run([*cmd, "--db", str(killed)], check=True, capture_output=True)
    subprocess.run([*cmd[:-1], "1", "--db", str(whole)], check=True, capture_output=True)
    assert _tables(killed) == _tables(whole)


SLURM = "slurmstepd: error: *** JOB 3884617 ON node023 CANCELLED AT 2018-08-19T16:3{}:21 DUE TO "
"""A real Slurm kill line (public corpus), ``{}`` a digit of its minute."""


SAVE = (
    "[INFO|trainer.py:4149] 2018-08-19 16:50:00,000 >> Saving model checkpoint to "
    "/data/run/checkpoint-100"
)
"""An HF Trainer save's start (bench/run.py's header), the last stamp before line 500."""


def _signatures(
    path: Path, failure_lines: tuple[int, ...], fresh_from: int
) -> tuple[RangeResult, RangeResult]:
    """``path``'s 600 lines (a Slurm kill at each of ``failure_lines``, an HF save's start at
    line 480, else filler) parsed by a parser from line 1 and by a fresh one from line
    ``fresh_from``, both cut at line 500."""
    lines = [
        SLURM.format(n % 10) + "TIME LIMIT ***" if n in failure_lines else f"filler {n}"
        for n in range(1, 601)
    ]
    lines[479] = SAVE  # the file's latest stamp before the cut, in both parsers' view
    path.write_text("".join(line + "\n" for line in lines))
    at = [0]
    for line in lines:
        at.append(at[-1] + len(line) + 1)
    spec = WatchSpec("j", (str(path),))

    def run(origin: int) -> RangeResult:
        task = RangeTask(spec, str(path), "auto", UTC, 1 << 20, at[origin], origin, at[500],
                         at[600], True)  # fmt: skip
        return parse_range(task)

    return run(0), run(fresh_from - 1)


def test_dedup_memory_that_can_no_longer_act_is_not_state(tmp_path: Path) -> None:
    """A failure remembered 490 lines before the cut (beyond the 200-line dedup window) leaves
    the parser's signature that of a parser that never saw it, and both report the next kill;
    one 100 lines before the cut is state: the signatures differ."""
    whole, fresh = _signatures(tmp_path / "old.log", (10, 510), 301)
    assert whole.start_signature == fresh.start_signature
    assert whole.events() == fresh.events()
    assert [e.line for e in whole.events() if e.kind == "failure"] == [510]
    whole, fresh = _signatures(tmp_path / "recent.log", (400, 510), 451)
    assert whole.start_signature != fresh.start_signature


def test_only_an_event_dense_log_is_parsed_on_several_cores_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--workers 0`` asks :func:`parallel.dense_enough` of the biggest file: true for the
    bench's event-dense HF log (a save every 20 steps, a metrics line per step), false for its
    sparse one (a save every 1,800 steps, a metrics line per 20), both sampled on 1 MB; true
    when it cannot tell (a file too small to sample, or none to read)."""
    monkeypatch.setattr(parallel, "SAMPLE_BYTES", 1 << 20)
    dense = dict(mtbf_s=2500.0, cost_s=10.0, interval_steps=20, restart_s=60.0)
    sparse = dict(mtbf_s=12 * 3600.0, cost_s=120.0, interval_steps=1800, restart_s=600.0)
    for name, shape, days, every in (("dense", dense, 0.3, 1), ("sparse", sparse, 2.0, 20)):
        job = simulate(
            **shape,
            step_time_s=1.0,
            duration_s=days * 86400.0,
            start=NOW,
            seed=3,
            log_every_steps=every,
        )
        path = tmp_path / f"{name}.log"
        path.write_text("".join(text for _, text in job.log))
        assert path.stat().st_size > parallel.SAMPLE_BYTES // 2
        assert parallel.dense_enough(str(path), "auto") is (name == "dense"), name
    small = tmp_path / "small.log"
    small.write_text(
        "[INFO|trainer.py:1] 2026-11-29 22:11:34,899 >> ***** Running training *****\n"
    )
    assert parallel.dense_enough(str(small), "auto")
    assert parallel.dense_enough(str(tmp_path / "missing.log"), "auto")
