"""`ckpt-advisor status`'s verdict from the heartbeat file and the outbox (pure, table-driven)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_advisor.agent.daemon.heartbeat import (
    FileLag,
    Heartbeat,
    assess,
    heartbeat_path,
    read_heartbeat,
    write_heartbeat,
)
from ckpt_advisor.agent.store import OutboxItem

NOW = 1_800_000_000.0


def _hb(**changes: object) -> Heartbeat:
    base: dict[str, object] = {
        "pid": 4242,
        "started_s": NOW - 3600,
        "updated_s": NOW - 1,
        "poll_every_s": 2.0,
        "estimate_every_s": 300.0,
        "jobs": ["llama"],
        "last_scan_s": NOW - 1,
        "last_estimate_s": NOW - 100,
        "files": [FileLag("llama", "/runs/a.log", 0, NOW - 5)],
    }
    return Heartbeat(**{**base, **changes})  # type: ignore[arg-type]


def _queued(age_s: float) -> OutboxItem:
    return OutboxItem(
        id=1, job="llama", created_s=NOW - age_s, action="notify", payload={}, attempts=3
    )


@pytest.mark.parametrize(
    ("heartbeat", "queued", "alive", "problem"),
    [
        (_hb(), [], True, None),
        (None, [], True, "no heartbeat"),
        (_hb(stopped_s=NOW - 60), [], True, "daemon stopped 1m 00s ago"),
        (_hb(), [], False, "daemon (pid 4242) is not running"),
        (_hb(updated_s=NOW - 61), [], True, "no scan for 1m 01s"),
        (_hb(problem="estimate run stuck for 700s"), [], True, "estimate run stuck"),
        (_hb(last_estimate_s=NOW - 721), [], True, "no estimate for 12m 01s"),
        (_hb(files=[FileLag("llama", "/runs/a.log", 2 << 20, NOW)]), [], True, "bytes behind"),
        (_hb(), [_queued(3601)], True, "1 Slack message(s) queued, oldest for 1h 00m"),
        (_hb(), [_queued(600)], True, None),
    ],
)
def test_assess(
    heartbeat: Heartbeat | None, queued: list[OutboxItem], alive: bool, problem: str | None
) -> None:
    """Each unhealthy condition is reported with its reason; a fresh heartbeat is healthy."""
    verdict = assess(heartbeat, queued, now_s=NOW, alive=lambda _pid: alive)
    assert verdict.healthy is (problem is None)
    if problem is not None:
        assert any(problem in p for p in verdict.problems), verdict.problems


def test_small_lag_is_listed_but_healthy() -> None:
    """A file a few bytes behind (written since the last scan) is listed as lagging, not a
    fault."""
    lag = FileLag("llama", "/runs/a.log", 120, NOW)
    verdict = assess(_hb(files=[lag]), [], now_s=NOW, alive=lambda _pid: True)
    assert verdict.healthy
    assert verdict.lagging == [lag]


def test_heartbeat_round_trips_through_its_file(tmp_path: Path) -> None:
    """write_heartbeat then read_heartbeat gives the same value; a torn file reads as None."""
    path = heartbeat_path(tmp_path / "ckpt.db")
    assert path.name == "ckpt.db.daemon.json"
    write_heartbeat(path, _hb())
    assert read_heartbeat(path) == _hb()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    path.write_text('{"pid": ')
    assert read_heartbeat(path) is None
