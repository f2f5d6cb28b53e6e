"""Backfilled logs whose first events come before their first printed time (a restarted
Megatron-LM run's resume line; Lightning's untimed output before a torchrun block): those
events are dated at the file's first time, not at its mtime, so no phantom interruption and no
interruption split in two, and still no span is measured from them. Real fixtures, real
tailer and SQLite in a temp dir."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ckpt_advisor.agent.estimate import ESTIMATE_KINDS, Estimator
from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.rules.model import NoteCode

ROOT = Path(__file__).parents[2]
MEGATRON = ROOT / "tests" / "parsers" / "fixtures" / "megatron" / "megatron_2024.log"
TORCH = ROOT / "tests" / "parsers" / "fixtures" / "torch"
REAL = ROOT / "agent" / "fixtures" / "real"
NOW = datetime(2027, 1, 1, tzinfo=UTC)
STAMP = re.compile(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d")
LIGHTNING_EXPOSURE_S = (130 - 40) / 41.42  # its save at step 40 to step 130, at its bar's rate


def _ingest(store: Store, job: str, *paths: Path) -> None:
    """Backfill ``paths`` as one job (lines of a file without stamps dated at its mtime)."""
    tailer = Tailer(
        store, [WatchSpec(job, tuple(map(str, paths)))], clock=lambda: NOW, tz=UTC, backfill=True
    )
    tailer.scan()
    tailer.close()


def _megatron_run(path: Path, start: datetime) -> Path:
    """megatron_2024.log with its stamps moved to begin at ``start`` (as the trial's
    shift_mg.py did), its mtime at its last stamp (start + 4 min): one restarted run."""
    text = MEGATRON.read_text()
    first = datetime.fromisoformat(STAMP.findall(text)[0])

    def moved(m: re.Match[str]) -> str:
        return str(datetime.fromisoformat(m.group(0)) - first + start.replace(tzinfo=None))

    path.write_text(STAMP.sub(moved, text))
    mtime = (start + timedelta(minutes=4)).timestamp()
    os.utime(path, (mtime, mtime))
    return path


def test_clean_megatron_runs_have_no_interruption(tmp_path: Path) -> None:
    """Two restarted Megatron-LM runs a day apart (each resumes at iteration 100 two lines
    before its first stamp and ends with '[after training is done]'): 0 interruptions (the
    resume, dated at the mtime, made each run look killed: 2 of cause unknown, M 190 s), C the
    timer's 5.31261 s, running time the runs' 2 × 4 min, and no note of a file without stamps."""
    store = open_store(tmp_path / "s.db")
    day = datetime(2026, 11, 20, 10, tzinfo=UTC)
    runs = [_megatron_run(tmp_path / f"mg{i}.log", day + timedelta(days=i)) for i in (0, 1)]
    _ingest(store, "mg", *runs)
    resumes = [e.event for e in store.events(job="mg", kinds=("resume",))]
    assert [(e.time, e.time_estimated) for e in resumes] == [
        (day, True),
        (day + timedelta(days=1), True),
    ]
    est = Estimator().estimate(store, "mg", NOW.timestamp())
    assert est.n_failures == 0 and est.mtbf_s is None
    assert est.checkpoint_cost_s == pytest.approx(5.31261)
    assert est.exposure_s == pytest.approx(2 * 240.0)
    codes = {n.code for n in est.notes}
    assert NoteCode.NO_TIMESTAMPS not in codes and NoteCode.HOST_DATED_FAILURES not in codes


def test_lightning_before_torchrun_is_one_interruption_in_order(tmp_path: Path) -> None:
    """lightning_crash.log, torchrun_sigkill.log, lightning_resume.log in one file, its mtime
    days later: the Lightning crash (NCCL, step 130) and the launcher's SIGKILL of it are one
    interruption (they were two: the crash and its saves dated at the mtime, after the resumed
    run's end), its saves before the launcher's failure; and, as events no stamp of their own
    dates, the Lightning saves give no span: no C, no current interval of their own."""
    path = tmp_path / "train.log"
    parts = [REAL / "lightning_crash.log", TORCH / "torchrun_sigkill.log"]
    path.write_bytes(b"".join(p.read_bytes() for p in [*parts, REAL / "lightning_resume.log"]))
    mtime = datetime(2026, 12, 5, tzinfo=UTC).timestamp()
    os.utime(path, (mtime, mtime))
    store = open_store(tmp_path / "s.db")
    _ingest(store, "lt", path)
    launch = datetime(2026, 11, 29, 23, 3, 17, tzinfo=UTC)  # the first printed time after them
    saves = [e.event for e in store.events(job="lt", kinds=("checkpoint_start",))]
    assert [(e.line, e.time) for e in saves[:3]] == [(19, launch), (20, launch), (21, launch)]
    columns = store.event_columns("lt", ESTIMATE_KINDS)
    assert columns.host_dated.tolist()[:5] == [True] * 5  # the saves, the step, the crash
    est = Estimator().estimate(store, "lt", NOW.timestamp())
    assert est.n_failures == 1
    assert est.failure_classes == {"nccl_error": 1}
    assert est.mtbf_s == pytest.approx(LIGHTNING_EXPOSURE_S, abs=1e-3)
    assert est.checkpoint_cost_s is None
