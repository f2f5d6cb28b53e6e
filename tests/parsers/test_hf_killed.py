"""An HF Trainer run killed with SIGKILL and resumed, on the real capture ``fixtures/hf_killed/``
(transformers 5.24.0): tqdm leaves the dead run's last redraw without a newline, so in a log
appended across restarts (``>> train.log``) the next run's first record is glued to it, and in
a file of its own that redraw is an unterminated last line. Either way the dead run's last
progress is dated by its bar, and the job's MTBF and restart cost are the capture's own
(``truth.json``: the kill's and the restart's wall-clock times)."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

CAPTURE = Path(__file__).parent / "fixtures" / "hf_killed"
TRUTH = json.loads((CAPTURE / "truth.json").read_text())
KILLED = datetime.fromisoformat(TRUTH["killed_utc"])
STAMP = re.compile(rb"\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) >> ")


def _stamps(name: str, message: bytes) -> list[datetime]:
    """UTC times of the records of ``name`` whose message starts with ``message``."""
    found = []
    for line in (CAPTURE / name).read_bytes().split(b"\n"):
        m = STAMP.search(line)
        if m is not None and line[m.end() :].lstrip().startswith(message):
            found.append(datetime.fromisoformat(m[1].decode().replace(",", ".") + "+00:00"))
    return found


def _appended(tmp_path: Path) -> Path:
    """The two runs' files one after the other, as ``>> train.log`` leaves them."""
    log = tmp_path / "train.log"
    log.write_bytes((CAPTURE / "run-1.log").read_bytes() + (CAPTURE / "run-2.log").read_bytes())
    return log


def test_the_dead_runs_last_redraw_glued_to_the_next_run_is_dated_by_its_bar(
    tmp_path: Path,
) -> None:
    """Line 48 is run 1's last redraw (step 75) with run 2's first record glued after it, 12 s
    later. Its step is dated by the bar's reading (its start measured by the save records glued
    after earlier redraws, plus its elapsed 20 s), within a second of the kill; it was dated at
    the glued record, the restart, and the interruption with it."""
    run1 = (CAPTURE / "run-1.log").read_bytes()
    assert not run1.endswith(b"\n") and run1.rsplit(b"\r", 1)[1].startswith(b" 38%")
    [first_of_run2] = _stamps("run-2.log", b"Model config: bos_token_id")
    events, _ = parse(read_lines(_appended(tmp_path)))
    [last] = [e for e in events if e.kind is EventKind.STEP and e.line == 48]
    assert last.step == 75 and last.time_estimated
    assert last.time is not None and abs((last.time - KILLED).total_seconds()) < 1.0
    assert (first_of_run2 - KILLED).total_seconds() > 12
    [start, _] = [e for e in events if e.kind is EventKind.RUN_START]
    [resume] = [e for e in events if e.kind is EventKind.RESUME]
    assert resume.step == 60 and start.time is not None and start.time < last.time


def _estimate(tmp_path: Path, name: str, files: list[Path], workers: int) -> dict[str, object]:
    db = str(tmp_path / f"{name}.db")
    args = ["ingest", *map(str, files), "--job", name, "--db", db, "--workers", str(workers)]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0, run.stderr
    assert "no newline" not in run.stderr
    [row] = json.loads(CliRunner().invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    return row


@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_run_gives_the_captures_mtbf_and_restart_appended_or_alone(
    tmp_path: Path, workers: int
) -> None:
    """Backfilled as one appended log, or as a file per run written 10 minutes ago (its
    writer gone, so its unterminated last redraw is read), the job has one interruption, an
    MTBF of its running time (run 1 from its start to the kill, run 2 from its start to its
    end) and a restart cost from the kill to run 2's start, each within a second of the
    capture's; the appended log had MTBF 69.8 s and restart cost 0.24 s, the file per run
    55.5 s (its last 5 s of progress unread)."""
    [start1] = _stamps("run-1.log", b"***** Running training *****")
    [start2] = _stamps("run-2.log", b"***** Running training *****")
    end2 = _stamps("run-2.log", b"")[-1]  # its last record: "Training completed."
    running_s = (KILLED - start1).total_seconds() + (end2 - start2).total_seconds()
    restart_s = (start2 - KILLED).total_seconds()
    alone = [tmp_path / "run-1.log", tmp_path / "run-2.log"]
    old = time.time() - 600
    for path in alone:
        path.write_bytes((CAPTURE / path.name).read_bytes())
        os.utime(path, (old, old))
    rows = [
        _estimate(tmp_path, "appended", [_appended(tmp_path)], workers),
        _estimate(tmp_path, "alone", alone, workers),
    ]
    for row in rows:
        assert row["mtbf_n_failures"] == 1
        assert abs(float(str(row["mtbf_s"])) - running_s) < 1.0
        assert abs(float(str(row["restart_cost_s"])) - restart_s) < 1.0
    keys = ("mtbf_s", "restart_cost_s", "goodput_current", "recommended_setting")
    assert [rows[0][k] for k in keys] == [rows[1][k] for k in keys]
