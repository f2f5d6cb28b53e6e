"""Fleet mode in the store, on both backends: files per agent, one shared file stored once,
an away agent's file adopted, one lease per job across agents, fenced decisions and claimed
messages (docs/RELIABILITY.md, scenario 32)."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ckpt_advisor.agent.store import FileState, RegisteredJob, Store, StoreError, open_store
from ckpt_advisor.agent.store.records import AgentNameInUse, LeaseLost
from ckpt_advisor.agent.store.sql.fleet import AGENT_ALIVE_S
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.rules.model import AlertState

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
FULL = 1024  # the tailer's HEAD_BYTES: a full fingerprint


def _agents(target: str | Path, password: str | None, *names: str) -> list[Store]:
    stores = [open_store(target, agent=name, password=password) for name in names]
    for store in stores:
        store.register_agent()
    return stores


def _file(head: str = "h" * 32, head_len: int = FULL, ino: int = 2) -> FileState:
    return FileState(0, "j", "/logs/a.log", 1, ino, head, head_len, 0, 0, 0)


def _events(n: int) -> list[Event]:
    return [Event(EventKind.CHECKPOINT_START, i + 1, "hf_trainer", time=T0) for i in range(n)]


def test_files_are_identified_per_agent(
    store_target: str | Path, store_password: str | None
) -> None:
    """Two head nodes' files with the same device and inode numbers are two files: each
    agent finds only its own, and both files' events are stored."""
    a, b = _agents(store_target, store_password, "node-a", "node-b")
    fa = a.commit_read(_file("a" * 32), offset=10, lineno=2, events=_events(2), now_s=1.0)
    fb = b.commit_read(_file("b" * 32), offset=30, lineno=3, events=_events(3), now_s=1.0)
    assert a.find_files("j", 1, 2) == [fa] and b.find_files("j", 1, 2) == [fb]
    assert fa.id != fb.id and a.files() == [fa]
    assert a.count_events("j") == 5
    assert {e.name for e in a.agents()} == {"node-a", "node-b"}


def test_a_file_two_agents_tail_is_stored_once(
    store_target: str | Path, store_password: str | None
) -> None:
    """A second agent whose file has the same job and first KiB as a live agent's (one shared
    file, two agents' globs) stores none of its events; a short head is not enough to tell."""
    a, b = _agents(store_target, store_password, "node-a", "node-b")
    a.commit_read(_file(), offset=2000, lineno=20, events=_events(20), now_s=1.0)
    shared = b.commit_read(_file(ino=9), offset=2000, lineno=20, events=_events(20), now_s=1.0)
    assert shared.shared_with == "agent node-a (/logs/a.log)"
    assert b.count_events() == 20
    short = b.commit_read(
        _file("s" * 32, head_len=100), offset=100, lineno=1, events=_events(1), now_s=1.0
    )
    assert short.shared_with is None and b.count_events() == 21


def test_a_file_whose_head_grows_into_another_agents_drops_its_copy(
    store_target: str | Path, store_password: str | None
) -> None:
    """Two agents read a shared file while it was shorter than 1 KiB; once the later one's head
    reaches the full fingerprint the earlier one has, its copy of the events is removed."""
    a, b = _agents(store_target, store_password, "node-a", "node-b")
    a.commit_read(_file(), offset=2000, lineno=20, events=_events(4), now_s=1.0)
    early = b.commit_read(
        _file("p" * 32, head_len=500), offset=500, lineno=4, events=_events(4), now_s=1.0
    )
    assert b.count_events() == 8
    grown = b.commit_read(
        FileState(early.id, "j", "/logs/a.log", 1, 2, "h" * 32, FULL, 500, 4, 0),
        offset=2000,
        lineno=20,
        events=_events(16),
        now_s=2.0,
    )
    assert grown.shared_with is not None and b.count_events() == 4


def test_an_away_agents_file_is_adopted_at_its_offset(
    store_target: str | Path, store_password: str | None
) -> None:
    """A file of an agent that stopped is another agent's to read on from its stored offset;
    the first agent, back, cannot commit to it any more (nothing stored twice)."""
    a, b = _agents(store_target, store_password, "node-a", "node-b")
    fa = a.commit_read(_file(), offset=2000, lineno=20, events=_events(20), now_s=1.0)
    owner = b.fingerprint_owner("j", FULL, "h" * 32)
    assert owner is not None and owner.alive and owner.agent_name == "node-a"
    a.stop_agent()
    owner = b.fingerprint_owner("j", FULL, "h" * 32)
    assert owner is not None and not owner.alive
    assert b.adopt_file(fa.id, "node-a", 7, 8, "/mnt/a.log")
    assert not b.adopt_file(fa.id, "node-a", 7, 8, "/mnt/a.log")  # one adopter
    [adopted] = b.find_files("j", 7, 8)
    assert (adopted.offset, adopted.lineno, adopted.path) == (2000, 20, "/mnt/a.log")
    with pytest.raises(StoreError, match="another agent reads it now"):
        a.commit_read(fa, offset=2100, lineno=21, events=_events(1), now_s=2.0)
    assert a.count_events() == 20


def test_one_agent_holds_each_jobs_lease_and_an_away_one_is_replaced(
    store_target: str | Path, store_password: str | None
) -> None:
    """Each job's lease goes to the agent whose config names it; another agent takes it only
    once that agent is away, and hands it back when it is seen again."""
    a, b = _agents(store_target, store_password, "node-a", "node-b")
    a.register_jobs([RegisteredJob("ja", "node-a", 8, 1)])
    b.register_jobs([RegisteredJob("jb", "node-b", None, 2)])
    assert a.claim_leases(30) == {"ja"} and b.claim_leases(30) == {"jb"}
    assert a.claim_leases(30) == {"ja"}  # renewed, not taken from b
    a.stop_agent()
    assert b.claim_leases(30) == {"ja", "jb"}
    assert set(b.leases()) == {"ja", "jb"} and b.leases()["ja"][0] == "node-b"
    a.register_agent()  # back
    assert b.claim_leases(30) == {"jb"}  # handed back
    assert a.claim_leases(30) == {"ja"}
    assert b.registered_jobs()["jb"] == RegisteredJob("jb", "node-b", None, 2)


def test_a_decision_or_send_for_another_agents_job_is_refused(
    store_target: str | Path, store_password: str | None
) -> None:
    """While one agent holds a job's lease, another can neither record a decision for it nor
    claim its message; after the holder is gone the new holder looks before resending."""
    a, b = _agents(store_target, store_password, "node-a", "node-b")
    a.register_jobs([RegisteredJob("j", "node-a", None, None)])
    assert a.claim_leases(1.0) == {"j"}
    item = a.record_decision(
        "j", AlertState(True, 1.0, 60.0), message={"t": 1}, action="notify", now_s=1.0
    )
    assert item is not None
    with pytest.raises(LeaseLost):
        b.record_decision(
            "j", AlertState(True, 2.0, 60.0), message={"t": 2}, action="notify", now_s=2.0
        )
    assert b.claim_message(item, "j", 2.0) is None
    assert a.claim_message(item, "j", 2.0) == "queued"
    a.stop_agent()
    time.sleep(1.1)
    assert b.claim_leases(30) == {"j"}
    assert b.claim_message(item, "j", 3.0) == "unsure"  # node-a may have sent it when it died
    assert [m["payload"] for m in b.messages("j")] == [{"t": 1}]


def test_a_file_is_stored_once_when_two_agents_start_together(
    store_target: str | Path, store_password: str | None
) -> None:
    """Two agents whose first scans come before their first lease renewal (neither has said it
    runs yet): the first to commit the shared file is its reader, the second stores none of
    its events (an agent's first commit registers it, in the same transaction)."""
    a, b = (open_store(store_target, agent=n, password=store_password) for n in ("na", "nb"))
    a.commit_read(_file(), offset=2000, lineno=20, events=_events(20), now_s=1.0)
    shared = b.commit_read(_file(ino=9), offset=2000, lineno=20, events=_events(20), now_s=1.0)
    assert shared.shared_with == "agent na (/logs/a.log)"
    assert b.count_events() == 20
    assert [agent.name for agent in a.agents()] == ["na", "nb"]


def test_a_second_live_agent_of_one_name_is_refused_until_the_first_goes(
    pg_url: str, tmp_path: Path
) -> None:
    """An agent whose ``[agent] name`` another running process registered stores nothing and
    is told who holds the name; once that process has ended it starts at once, and a name last
    seen on another host is free once that host has been silent for ``AGENT_ALIVE_S``."""
    from tests import pg

    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, sys, time\n"
            "from ckpt_advisor.agent.store import open_store\n"
            "open_store(sys.argv[1], agent='node-a', password=sys.argv[2]).register_agent()\n"
            "pathlib.Path(sys.argv[3]).touch()\n"
            "time.sleep(120)\n",
            pg_url,
            pg.ROLE_PASSWORD,
            str(ready),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = open_store(pg_url, agent="node-a", password=pg.ROLE_PASSWORD)
        with pytest.raises(AgentNameInUse, match=rf"'node-a' is in use by \S+ pid {holder.pid},"):
            second.register_agent()
        with pytest.raises(AgentNameInUse):
            second.commit_read(_file(), offset=10, lineno=1, events=_events(1), now_s=1.0)
        assert second.count_events() == 0
    finally:
        holder.kill()
        holder.wait()
    second.register_agent()  # the holder's process has ended: this host's agent goes on
    second.commit_read(_file(), offset=10, lineno=1, events=_events(1), now_s=1.0)
    assert second.count_events() == 1
    with second.engine.begin() as conn:  # as if another host's agent of that name ran now
        conn.exec_driver_sql(
            "UPDATE agents SET host = 'elsewhere', seen_s = extract(epoch from now())"
        )
    third = open_store(pg_url, agent="node-a", password=pg.ROLE_PASSWORD)
    with pytest.raises(AgentNameInUse, match="in use by elsewhere pid"):
        third.register_agent()
    with second.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE agents SET seen_s = extract(epoch from now()) - {AGENT_ALIVE_S + 1}"
        )
    third.register_agent()
    assert [a.name for a in third.agents()] == ["node-a"]
