"""The file watcher: which notifications wake the main loop (agent/daemon/watcher.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from watchdog.events import FileSystemEvent

from ckpt_advisor.agent.daemon import watcher as agent_watcher
from tests.agent.processes import until


def test_reads_raise_no_notification_and_writes_wake_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory listed (each glob search) and a log opened, read and closed (another reader,
    or ours) reach no handler at all: inotify is not asked for reads, so watchdog's threads
    have nothing to take in. A write wakes the main loop; a new file also asks for a glob
    search."""
    seen: list[str] = []
    wake = agent_watcher._Wake.on_any_event

    def recording(self: agent_watcher._Wake, event: FileSystemEvent) -> None:
        seen.append(event.event_type)
        wake(self, event)

    monkeypatch.setattr(agent_watcher._Wake, "on_any_event", recording)
    log = tmp_path / "a.log"
    log.write_text("one\n")
    watcher = agent_watcher.Watcher()
    watcher.start([str(tmp_path)])
    try:
        assert watcher.observer is not None
        for _ in range(3):
            os.listdir(tmp_path)
            log.read_text()
        time.sleep(1.0)  # watchdog's inotify buffer holds a notification for 0.5 s
        assert seen == []
        assert not watcher.wake.is_set()
        with log.open("a") as fh:
            fh.write("two\n")
        assert until(watcher.wake.is_set, 10)
        assert not watcher.discover.is_set()
        (tmp_path / "b.log").write_text("three\n")
        assert until(watcher.discover.is_set, 10)
    finally:
        watcher.stop()
