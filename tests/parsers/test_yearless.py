"""A stamp without a year (glog ``E1129 23:03:27``, syslog ``Feb 14 05:03:41``) takes its year
from the file's nearest full date, after it when none came before; never from the file's mtime
while the file has one (parsers/failures.py, "Time")."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.logs import YEARLESS_HOLD_LINES
from tests.parsers._helpers import parse, read_lines

TORCH = Path(__file__).parent / "fixtures" / "torch"


def test_a_glog_stamp_before_the_first_full_date_takes_its_year() -> None:
    """torchrun_sigkill.log: line 22 ``E1129 23:03:27.364000`` (the launcher's report of the
    SIGKILL) comes before any full date; the ChildFailedError banner after it prints
    ``time : 2026-11-29_23:03:27`` (line 45), so line 22 is 2026-11-29 23:03:27 UTC (whole
    seconds: the c10 fraction is not kept), and the file is not one without stamps."""
    events, _ = parse(read_lines(TORCH / "torchrun_sigkill.log"), clock=True)
    failures = {e.line: e.time for e in events if e.kind is EventKind.FAILURE}
    assert failures[22] == datetime(2026, 11, 29, 23, 3, 27, tzinfo=UTC)
    assert failures[39] == datetime(2026, 11, 29, 23, 3, 27, tzinfo=UTC)
    assert not [e for e in events if e.kind is EventKind.NO_TIMESTAMPS]


def test_a_file_of_stamps_without_a_year_says_so() -> None:
    """torchrun_restart.log prints glog stamps only (``E1129 23:15:16``), no full date: its
    failures stay without a time for the reader to date, and the note says the stamps had no
    year rather than that the file printed none."""
    events, _ = parse(read_lines(TORCH / "torchrun_restart.log"), clock=True)
    assert all(e.time is None for e in events if e.kind is EventKind.FAILURE)
    [note] = [e for e in events if e.kind is EventKind.NO_TIMESTAMPS]
    assert note.detail is not None and "without a year" in note.detail


def test_a_copied_log_is_one_interruption_whatever_its_mtime(tmp_path: Path) -> None:
    """A fresh copy of torchrun_sigkill.log (mtime 2 days after the crash, as after ``cp`` or
    ``git clone``) ingests as one death: its three failure lines (the traceback, the launcher's
    line 22, the banner) all at 2026-11-29 23:03:27, one interruption; line 22 was dated at the
    mtime and made a second interruption."""
    log = tmp_path / "torchrun_sigkill.log"
    shutil.copy(TORCH / "torchrun_sigkill.log", log)
    later_s = datetime(2026, 12, 1, 22, 0, tzinfo=UTC).timestamp()
    os.utime(log, (later_s, later_s))
    db = str(tmp_path / "tr.db")
    runner = CliRunner()
    ingest = runner.invoke(main, ["ingest", str(log), "--job", "tr", "--db", db])
    assert ingest.exit_code == 0, ingest.stderr
    assert "1 failure(s)" in ingest.stdout
    shown = runner.invoke(main, ["events", "--db", db, "--kind", "failure", "--json"])
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert sorted(r["line"] for r in rows) == [10, 22, 39]
    assert {r["time"][:19] for r in rows} == {"2026-11-29T23:03:27"}


def test_a_live_log_without_a_full_date_does_not_withhold_its_events() -> None:
    """torchrun_restart.log read live, followed by YEARLESS_HOLD_LINES more of its own launcher
    lines and still no full date: the failures of lines 49 and 69-70 come out while the file is read
    (without a time, for the reader to date), not only when it is finished."""
    lines = read_lines(TORCH / "torchrun_restart.log")
    parser = make_parser("auto")
    fed = [*lines, *[lines[0]] * (YEARLESS_HOLD_LINES + 1)]
    events = [e for n, line in enumerate(fed, 1) for e in parser.feed(line, n)]
    failures = [e for e in events if e.kind is EventKind.FAILURE]
    assert [e.line for e in failures] == [49, 69, 70]  # rank 1's traceback, then the launcher's
    assert all(e.time is None for e in failures)
