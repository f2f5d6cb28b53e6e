"""A job whose logs mix a file with timestamps and one without: no span with an end the host
dated (the untimed file's events, dated at its mtime in a backfill) is measured, on the real
captured HF Trainer and Lightning crash logs, through the real tailer and store
(docs/RELIABILITY.md, scenario 33)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.estimate import ESTIMATE_KINDS, Estimator
from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.rules.model import NoteCode, Status
from ckpt_advisor.rules.simulate import simulated_goodput

REAL = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
NOW = datetime(2027, 1, 1, tzinfo=UTC)

# From the fixtures' lines (hf_trainer_crash.log: HF Trainer's own stamps; the bar's rates):
RUN_START_S = 34.899  # line 13, "***** Running training *****" at 22:11:34,899
SAVE_25 = (38.483, 38.555)  # lines 28 and 33: "Saving model checkpoint" .. "Model weights saved"
SAVE_50 = (42.640, 42.677)  # lines 39 and 44
# the bar's s/it at steps 5, 30, 55, 59 (7.25 -> 1/9.12, 1/7.00, 1/6.10, 1/5.95 it/s) and the
# Lightning bar's 41.42 it/s at step 130: the job's step time is their median, 1/7.00 s
STEP_S = 1 / 7.00
LIGHTNING_STEP_S = 1 / 41.42
# the HF failure (step 59) moves to the save at step 50 plus 9 steps; the Lightning run went
# from its save at step 40 (line 19) to step 130 (line 22) at its own bar's rate
HF_EXPOSURE_S = SAVE_50[1] - RUN_START_S + 9 * STEP_S
LIGHTNING_EXPOSURE_S = (130 - 40) * LIGHTNING_STEP_S


def _ingest(store: Store, job: str, *paths: Path) -> None:
    """Backfill ``paths`` as one job (lines of a file without stamps dated at its mtime)."""
    specs = [WatchSpec(job, tuple(str(p) for p in paths))]
    tailer = Tailer(store, specs, clock=lambda: NOW, tz=UTC, backfill=True)
    tailer.scan()
    tailer.close()


def _lightning_copy(tmp_path: Path, mtime: datetime) -> Path:
    """The Lightning log under tmp_path with the given mtime: the time a backfill dates it at."""
    path = tmp_path / "lightning_crash.log"
    shutil.copyfile(REAL / "lightning_crash.log", path)
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


@pytest.mark.parametrize("mtime", [datetime(2026, 12, 1, 9, 42, tzinfo=UTC), NOW])
def test_mixed_job_measures_only_placed_times(
    store_target: Path | str, store_password: str | None, tmp_path: Path, mtime: datetime
) -> None:
    """HF Trainer's crash log beside Lightning's (no timestamps): C, the current interval and
    the goodput split are the HF log's alone, whatever the Lightning file's mtime; M counts
    both failures over the HF run's running time (run start at 22:11:34.899 to the failure at
    step 59, moved to the step-50 save's end at 22:11:42.677 plus 9 steps of 1/7.00 s: 9.0637
    s) plus the Lightning run's 90 steps at its bar's 1/41.42 s (2.1729 s): M = 5.618 s; no
    restart is measured (the HF run never recovered; the Lightning failure has no time), so
    R is unknown and the restart bucket 0 s; the verdict waits for a third timed save."""
    store = open_store(store_target, password=store_password)
    lightning = _lightning_copy(tmp_path, mtime)
    _ingest(store, "mix", REAL / "hf_trainer_crash.log", lightning)

    columns = store.event_columns("mix", ESTIMATE_KINDS)
    assert columns.host_dated.tolist() == [False] * 10 + [True] * 6  # the Lightning rows, last
    est = Estimator().estimate(store, "mix", NOW.timestamp())
    assert est.exposure_s == pytest.approx(HF_EXPOSURE_S + LIGHTNING_EXPOSURE_S, abs=1e-3)
    assert est.mtbf_s == pytest.approx((HF_EXPOSURE_S + LIGHTNING_EXPOSURE_S) / 2, abs=1e-3)
    assert est.n_failures == 2 and est.n_checkpoints == 5
    assert est.restart_cost_s is None
    assert est.step_time_s == pytest.approx(STEP_S)
    assert est.checkpoint_cost_s == pytest.approx((0.072 + 0.037) / 2)  # the logged saves
    spacing_s = SAVE_50[1] - SAVE_25[1]
    assert est.current_interval_s == pytest.approx(spacing_s - (0.072 + 0.037) / 2, abs=1e-3)
    assert est.status is Status.INSUFFICIENT_DATA
    assert est.reason is not None and est.reason.values["n_saves"] == 2
    note = next(n for n in est.notes if n.code is NoteCode.HOST_DATED_FAILURES)
    assert note.by_name == {str(lightning): 1}
    assert note.values["n_failures"] == 1 and note.values["n_runs"] == 1
    assert note.values["exposure_s"] == pytest.approx(LIGHTNING_EXPOSURE_S, abs=1e-6)
    assert render_note(note).startswith(
        "1 interruption(s) count in M though no time of theirs is measured (no restart, lost "
        "work or goodput span ends at them): their lines came before any time their file "
        f"printed, in {lightning} (from line 1); "
    )
    assert "steps × the step time the file printed" in render_note(note)
    # simulated goodput rests on these C and M and no restart cost
    assert est.goodput_current is not None and est.daly_interval_s is not None
    assert est.mtbf_s is not None and est.current_interval_s is not None
    expected = simulated_goodput(
        [est.daly_interval_s, est.current_interval_s],
        mtbf_s=est.mtbf_s,
        cost_s=est.checkpoint_cost_s,
        restart_s=0.0,
    )
    assert [est.goodput_recommended, est.goodput_current] == expected

    assert est.goodput_spans is not None
    g = est.goodput_spans.breakdown(since_s=-np.inf)
    wall_s = HF_EXPOSURE_S  # the HF run, start to failure: no span reaches the Lightning file
    assert g.wall_s == pytest.approx(wall_s, abs=1e-3)
    assert g.n_interruptions == 1 and g.n_saves == 2
    productive, checkpoint, lost, restart, idle = g.seconds.tolist()
    assert checkpoint == pytest.approx(0.072 + 0.037, abs=1e-3)
    assert lost == pytest.approx(9 * STEP_S, abs=1e-3)  # the step-50 save to the failure
    assert (restart, idle) == (0.0, 0.0)
    assert productive == pytest.approx(wall_s - checkpoint - lost, abs=1e-3)
    assert g.goodput == pytest.approx(productive / wall_s)


def test_untimed_log_alone_counts_its_steps(tmp_path: Path) -> None:
    """The Lightning crash log alone: its failure counts over its 90 steps at its bar's
    1/41.42 s (M = 2.173 s, a lower bound the note names), and nothing is measured from its
    times: no C, no restart, and goodput has no wall time to split; the current interval is
    its saves' 40 steps at that rate, not a time of its own."""
    db = tmp_path / "s.db"
    store = open_store(db)
    lightning = _lightning_copy(tmp_path, datetime(2026, 12, 1, tzinfo=UTC))
    _ingest(store, "pl", lightning)
    est = Estimator().estimate(store, "pl", NOW.timestamp())
    assert est.mtbf_s == pytest.approx(LIGHTNING_EXPOSURE_S, abs=1e-6)
    assert est.n_failures == 1
    assert (est.checkpoint_cost_s, est.restart_cost_s) == (None,) * 2
    assert est.step_time_s is not None
    assert est.current_interval_s == pytest.approx(40 * est.step_time_s)
    assert est.reason is not None and est.reason.values["n_saves"] == 0
    store.close()
    result = CliRunner().invoke(main, ["goodput", "--job", "pl", "--db", str(db)])
    assert result.exit_code == 1
    assert "pl: no wall time to split: no timestamps in" in result.output


def test_mixed_job_goodput_cli_has_no_restart_from_the_mtime(tmp_path: Path) -> None:
    """``ingest`` of both logs then ``goodput --json``: the window is the HF run's (22:11:34.899
    to 22:11:43.963), its restart bucket 0 s, not the 1d 11h to the Lightning file's mtime."""
    db = str(tmp_path / "s.db")
    lightning = _lightning_copy(tmp_path, datetime(2026, 12, 1, 9, 42, tzinfo=UTC))
    runner = CliRunner()
    ingest = ["ingest", str(REAL / "hf_trainer_crash.log"), str(lightning), "--job", "mix"]
    assert runner.invoke(main, [*ingest, "--db", db]).exit_code == 0
    result = runner.invoke(main, ["goodput", "--job", "mix", "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["window_start"] == "2026-11-29T22:11:34.899000+00:00"
    assert out["window_end"].startswith("2026-11-29T22:11:43.96")
    assert out["restart_s"] == 0.0 and out["idle_s"] == 0.0
    assert out["wall_s"] == pytest.approx(HF_EXPOSURE_S, abs=1e-3)


def test_live_read_times_measure_no_span(tmp_path: Path) -> None:
    """Live, the Lightning log's lines are dated when the daemon reads them (three reads a
    minute apart, one save each; the first, held for a printed time, goes out at the idle
    flush): the read times are the host's, not the log's, so they give
    no current interval and no C (the saves are counted, their spacing is not measured)."""
    lines = (REAL / "lightning_crash.log").read_text().splitlines(keepends=True)
    path = tmp_path / "lightning.log"
    path.write_text("".join(lines[:19]))  # up to the first save (line 19)
    now = [NOW]
    store = open_store(tmp_path / "s.db")
    tailer = Tailer(
        store, [WatchSpec("pl", (str(path),))], clock=lambda: now[0], tz=UTC, backfill=False
    )
    tailer.scan()  # the save is held for a first printed time (parsers/logs.py) ...
    now[0] = now[0].replace(second=3)
    tailer.scan()  # ... until the file is quiet past the idle flush: then dated at this read
    for line in lines[19:21]:  # the saves at steps 80 and 120, a minute apart
        now[0] = now[0].replace(minute=now[0].minute + 1)
        with path.open("a") as f:
            f.write(line)
        tailer.scan()
    tailer.close()
    columns = store.event_columns("pl", ESTIMATE_KINDS)
    assert columns.host_dated.all() and np.unique(columns.time_s).size == 3  # three reads
    est = Estimator().estimate(store, "pl", NOW.timestamp())
    assert est.n_checkpoints == 3
    assert (est.current_interval_s, est.checkpoint_cost_s) == (None, None)
    assert est.current_interval_steps == 40  # the steps the lines print are measured


@pytest.mark.parametrize("how", ["truncated", "rotated"])
def test_rewritten_file_keeps_its_old_content_host_dated(
    store_target: Path | str, store_password: str | None, tmp_path: Path, how: str
) -> None:
    """The trial's train.log: Lightning's crash and resume logs (no timestamps) appended live
    twice, each read at once (read times microseconds apart), then the file truncated and
    rewritten with HF Trainer's stamped crash log (or renamed to train.log.1 and a new
    train.log written with it: the same name, another file). The Lightning events stay
    host-dated (the old content's, though the new content's first stamped event, line 13,
    comes before their lines): no spacing is measured between their read times, so the
    current interval is 40 steps × Lightning's 1/41.42 s before the rewrite, and the HF
    saves' spacing less C after it, never the microseconds between two reads."""
    store = open_store(store_target, password=store_password)
    path = tmp_path / "train.log"
    path.write_text("")
    now = [NOW]
    tailer = Tailer(
        store, [WatchSpec("lt", (str(path),))], clock=lambda: now[0], tz=UTC, backfill=False
    )
    tailer.scan()
    for name in ("lightning_crash.log", "lightning_resume.log") * 2:
        with path.open("a") as f:
            f.write((REAL / name).read_text())
        now[0] += timedelta(microseconds=3)
        tailer.scan()
    now[0] += timedelta(seconds=3)  # quiet past the idle flush: the events held for a first
    tailer.scan()  # printed time (none comes) go, dated at this read
    before = Estimator().estimate(store, "lt", now[0].timestamp())
    assert before.step_time_s == pytest.approx(LIGHTNING_STEP_S, rel=1e-3)
    assert before.current_interval_s == pytest.approx(40 * before.step_time_s)
    n_lightning = store.event_columns("lt", ESTIMATE_KINDS).host_dated.size
    if how == "rotated":
        path.rename(tmp_path / "train.log.1")
    path.write_text((REAL / "hf_trainer_crash.log").read_text())  # truncated: the same inode
    for _ in range(2):  # the read, then the idle flush that ends the HF traceback
        now[0] += timedelta(minutes=1)
        tailer.scan()
    tailer.close()

    columns = store.event_columns("lt", ESTIMATE_KINDS)
    # in time order: the HF log's 10 (stamped 2026-11-29), then the Lightning reads
    assert columns.host_dated.tolist() == [False] * 10 + [True] * n_lightning
    est = Estimator().estimate(store, "lt", now[0].timestamp())
    assert est.checkpoint_cost_s == pytest.approx((0.072 + 0.037) / 2)  # the logged saves
    spacing_s = SAVE_50[1] - SAVE_25[1]
    assert est.current_interval_s == pytest.approx(spacing_s - (0.072 + 0.037) / 2, abs=1e-3)
    assert not any(n.code is NoteCode.SPACING_BELOW_COST for n in est.notes)


def test_stamped_file_rewritten_without_stamps_is_host_dated(tmp_path: Path) -> None:
    """The other way round: train.log held HF Trainer's stamped crash log, then is truncated
    and rewritten live with Lightning's (no timestamps, read in one go): the Lightning events
    are dated at the read that let them go, the idle flush (not at the old content's last
    stamp), and host-dated although the old content's stamps are at lines (13 on) before
    theirs, so no C and no spacing come from their read times; the HF ones keep their own."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "train.log"
    path.write_text((REAL / "hf_trainer_crash.log").read_text())
    now = [NOW]
    tailer = Tailer(
        store, [WatchSpec("lt", (str(path),))], clock=lambda: now[0], tz=UTC, backfill=True
    )
    tailer.scan()
    tailer.close()
    n_hf = store.event_columns("lt", ESTIMATE_KINDS).host_dated.size
    tailer = Tailer(
        store, [WatchSpec("lt", (str(path),))], clock=lambda: now[0], tz=UTC, backfill=False
    )
    tailer.scan()
    path.write_text((REAL / "lightning_crash.log").read_text())
    now[0] += timedelta(minutes=1)
    tailer.scan()
    now[0] += timedelta(seconds=3)  # the idle flush: the events held for a first printed
    tailer.scan()  # time (none comes) go, dated at this read
    tailer.close()
    columns = store.event_columns("lt", ESTIMATE_KINDS)
    host_dated = columns.host_dated
    assert host_dated.size > n_hf
    assert (columns.time_s[n_hf:] == now[0].timestamp()).all()  # released at 00:01:03
    assert host_dated.tolist() == [False] * n_hf + [True] * (host_dated.size - n_hf)
    est = Estimator().estimate(store, "lt", now[0].timestamp())
    assert est.checkpoint_cost_s == pytest.approx((0.072 + 0.037) / 2)  # the HF saves'
    spacing_s = SAVE_50[1] - SAVE_25[1]
    assert est.current_interval_s == pytest.approx(spacing_s - (0.072 + 0.037) / 2, abs=1e-3)
