"""The daemon's polling schedule and its read logs: the globs are searched every
``discover_every`` or at once on a file notification, and what was read is summarised at INFO at
most once a minute (docs/RELIABILITY.md, scenario 11). The daemon's threads in-process on real
files, watchdog and a real store."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ckpt_advisor.agent.app import build_daemon, utc_now
from ckpt_advisor.agent.config import parse_config
from ckpt_advisor.agent.daemon.loop import Daemon
from ckpt_advisor.agent.daemon.scan import SUMMARY_EVERY_S
from tests.agent.helpers import daemon_config
from tests.agent.processes import until
from tests.agent.tail.helpers import record


@pytest.mark.parametrize("file_events", ["true", "false"])
def test_run_dir_appearing_later_is_found_without_a_glob_search_every_poll(
    tmp_path: Path, running: Callable[[Daemon], threading.Thread], file_events: str
) -> None:
    """Scenario 11 with cheap polls: a new run directory and file are found at once through the
    "created" notification when file events are on (discover_every is an hour), and within
    ``discover_every`` by polling alone when they are off."""
    every = "1h" if file_events == "true" else "0.3s"
    raw = daemon_config(tmp_path, discover_every=every)
    raw["schedule"]["file_events"] = file_events == "true"
    daemon = build_daemon(parse_config(raw))
    (tmp_path / "runs" / "old.jsonl").write_text(record(1))
    running(daemon)
    assert until(lambda: daemon.store.count_events() == 1)
    run = tmp_path / "runs" / "job-7" / "rank0"
    run.mkdir(parents=True)
    (run / "t.jsonl").write_text(record(2))
    with (tmp_path / "runs" / "old.jsonl").open("a") as fh:
        fh.write(record(3))
    assert until(lambda: daemon.store.count_events() == 3)


def test_reads_are_logged_per_scan_at_debug_and_summarised_at_info_once_a_minute(
    tmp_path: Path,
    running: Callable[[Daemon], threading.Thread],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scans that read lines log at DEBUG only; once SUMMARY_EVERY_S has passed (by the
    daemon's clock) one INFO line gives the lines, events and files read, by job."""
    offset = [timedelta(0)]

    def clock() -> datetime:
        return utc_now() + offset[0]

    config = parse_config(daemon_config(tmp_path))
    daemon = build_daemon(config, clock=clock)
    path = tmp_path / "runs" / "t.jsonl"
    with caplog.at_level(logging.DEBUG, logger="ckpt_advisor.agent.daemon"):
        running(daemon)
        for step in range(1, 5):
            with path.open("a") as fh:
                fh.write(record(step))
            assert until(lambda step=step: daemon.store.count_events() == step)
        per_scan = [r for r in caplog.records if r.getMessage().startswith("read ")]
        assert per_scan and {r.levelno for r in per_scan} == {logging.DEBUG}
        assert not [r for r in caplog.records if r.levelno >= logging.INFO and "read" in r.msg]
        offset[0] = timedelta(seconds=SUMMARY_EVERY_S + 1)

        def summaries() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.levelno == logging.INFO and r.getMessage().startswith("read in the last")
            ]

        assert until(lambda: len(summaries()) == 1)
    assert summaries()[0].endswith(
        "4 line(s), 4 event(s) stored, 1 file(s), 1 job(s) (job lines/events/files: j 4/4/1)"
    )
