"""Fleet mode's tables, for both backends: the agents, the jobs they configure, the jobs' leases.

One voice (docs/RELIABILITY.md, scenario 32): each job's recommendation is decided and posted
by the one agent that holds the job's lease. A lease lasts ``ttl_s`` by the database's clock
(hosts' clocks differ) and is renewed by its holder every few seconds; an agent that dies stops
renewing, and once its lease has expired and the agent has not been seen for ``ttl_s`` another
agent takes the job over. The agent whose config names a job (the one that reads its logs) is
preferred: another agent holds it only while that one is away, and hands it back when it is
seen again. With SQLite there is one agent, which holds every lease.

A mixin of :class:`agent.store.sql.writes.SqlStore`, which provides the engine, the agent's
name and the write transaction.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from contextlib import AbstractContextManager
from importlib import metadata
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.engine import Connection

from ckpt_advisor.agent.store.records import (
    AgentNameInUse,
    FileState,
    FingerprintOwner,
    LeaseLost,
    RegisteredJob,
)
from ckpt_advisor.agent.store.sql import tables as t

AGENT_ALIVE_S = 30.0
"""An agent not seen for this long (and one that said it stopped) is away: its files may be
adopted, and its jobs' leases taken once expired."""


def _version() -> str:
    try:
        return metadata.version("ckpt-advisor")
    except metadata.PackageNotFoundError:
        return "unknown"


def _alive_elsewhere(agent: Any, host: str, pid: int, now_s: float) -> bool:
    """Whether the ``agents`` row ``agent`` is another agent that runs now: not stopped, seen
    within :data:`AGENT_ALIVE_S`, and neither this process nor an ended process of this host."""
    if agent.stopped_s is not None or agent.seen_s < now_s - AGENT_ALIVE_S:
        return False
    if agent.host != host:
        return True
    if agent.pid == pid:
        return False
    try:
        os.kill(agent.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: it exists
        return True
    return True


class FleetTables:
    """Agents, registered jobs, leases and file fingerprints across agents."""

    engine: Engine
    agent: str
    location: str
    _registered: bool

    def _write(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _db_now_s(self, conn: Connection) -> float:
        """The database's clock, epoch seconds (PostgreSQL's; SQLite's is this host's)."""
        raise NotImplementedError

    def _lock_key(self, conn: Connection, key: str) -> None:
        """Hold a lock named ``key`` until the transaction of ``conn`` ends (a no-op where the
        database allows one writer at a time)."""

    def _upsert(self, table: Any, values: dict[str, Any], keys: list[str]) -> Any:
        """INSERT … ON CONFLICT (``keys``) DO UPDATE of ``values`` (each dialect's own)."""
        raise NotImplementedError

    # -- agents ---------------------------------------------------------------------------

    def register_agent(self) -> None:
        """Say that this agent runs (host, pid, version): called at start (and by the first
        :meth:`commit_read`, in its transaction)."""
        with self._write() as conn:
            self._register_agent(conn)
        self._registered = True

    def _register_agent(self, conn: Connection) -> None:
        """:meth:`register_agent` in the transaction of ``conn``.

        Raises:
            AgentNameInUse: on a server (PostgreSQL), another agent of this name is alive: not
                stopped, seen within :data:`AGENT_ALIVE_S`, and not this process or a process
                of this host that has ended (this agent's own earlier life). SQLite needs no
                check: its lock file lets one agent in.
        """
        now_s = self._db_now_s(conn)
        host, pid = socket.gethostname(), os.getpid()
        if self.engine.dialect.name != "sqlite":
            other = conn.execute(select(t.agents).where(t.agents.c.name == self.agent)).first()
            if other is not None and _alive_elsewhere(other, host, pid, now_s):
                raise AgentNameInUse(
                    f"{self.location}: [agent] name {self.agent!r} is in use by {other.host} "
                    f"pid {other.pid}, seen {now_s - other.seen_s:.0f} s ago; give each agent "
                    "its own name (this one reads and posts nothing until that one stops or "
                    f"has been silent for {AGENT_ALIVE_S:.0f} s)"
                )
        row = {
            "name": self.agent,
            "host": host,
            "pid": pid,
            "version": _version(),
            "started_s": now_s,
            "seen_s": now_s,
            "stopped_s": None,
        }
        conn.execute(self._upsert(t.agents, row, ["name"]))

    def stop_agent(self) -> None:
        """Say that this agent stopped: its jobs and files go to others at once."""
        with self._write() as conn:
            now_s = self._db_now_s(conn)
            conn.execute(
                update(t.agents).where(t.agents.c.name == self.agent).values(stopped_s=now_s)
            )
            conn.execute(delete(t.leases).where(t.leases.c.agent == self.agent))

    # -- jobs -----------------------------------------------------------------------------

    def register_jobs(self, jobs: Iterable[RegisteredJob]) -> None:
        """This agent's configured jobs and their sizes, replacing what it registered before
        (a job another agent registered later stays that agent's)."""
        jobs = list(jobs)
        with self._write() as conn:
            now_s = self._db_now_s(conn)
            names = [j.name for j in jobs]
            mine = t.jobs.c.agent == self.agent
            conn.execute(delete(t.jobs).where(mine, t.jobs.c.name.not_in(names)))
            for job in jobs:
                row: dict[str, Any] = {"name": job.name, "agent": self.agent, "gpus": job.gpus}
                row |= {"nodes": job.nodes, "updated_s": now_s}
                conn.execute(self._upsert(t.jobs, row, ["name"]))

    # -- leases ---------------------------------------------------------------------------

    def claim_leases(self, ttl_s: float) -> set[str]:
        """Renew this agent's leases and take the free ones it should hold; returns the jobs
        it holds now (until ``ttl_s`` from now by the database's clock). Also marks the agent
        as seen.

        Per registered job: its own agent (the config that names it) takes it when it is free
        or expired; another agent takes it only when it is expired (or free) and its own agent
        is away; a job held for an away agent is handed back once that agent is seen again.
        """
        with self._write() as conn:
            now_s = self._db_now_s(conn)
            conn.execute(
                update(t.agents)
                .where(t.agents.c.name == self.agent)
                .values(seen_s=now_s, stopped_s=None)
            )
            owners = dict(conn.execute(select(t.jobs.c.name, t.jobs.c.agent)).all())
            seen = {
                r.name: r.stopped_s is None and r.seen_s >= now_s - AGENT_ALIVE_S
                for r in conn.execute(select(t.agents))
            }
            held = {r.job: r for r in conn.execute(select(t.leases))}
        out: set[str] = set()
        for job, owner in sorted(owners.items()):
            lease = held.get(job)
            if lease is not None and lease.agent == self.agent:
                if owner != self.agent and seen.get(owner, False):
                    self._release(job)  # its own agent is back
                elif self._take(job, ttl_s, renew=True):
                    out.add(job)
                continue
            if lease is not None and lease.expires_s >= now_s:
                continue  # another agent's, in force
            free_to_take = owner == self.agent or not seen.get(owner, False)
            if free_to_take and self._take(job, ttl_s, renew=False):
                out.add(job)
        return out

    def _take(self, job: str, ttl_s: float, *, renew: bool) -> bool:
        """Take (or renew) ``job``'s lease unless another agent holds one in force; True if
        this agent holds it now. Atomic: of agents racing for one lease, one wins."""
        with self._write() as conn:
            now_s = self._db_now_s(conn)
            c = t.leases.c
            won = conn.execute(
                update(t.leases)
                .where(c.job == job, (c.agent == self.agent) | (c.expires_s < now_s))
                .values(
                    agent=self.agent,
                    expires_s=now_s + ttl_s,
                    **({} if renew else {"acquired_s": now_s}),
                )
            ).rowcount
            if won:
                return True
            if conn.execute(select(c.job).where(c.job == job)).first() is not None:
                return False
            row = {"job": job, "agent": self.agent, "acquired_s": now_s}
            conn.execute(self._insert_new(t.leases, row | {"expires_s": now_s + ttl_s}))
            held = conn.execute(select(c.agent).where(c.job == job)).scalar_one_or_none()
            return bool(held == self.agent)

    def _insert_new(self, table: Any, values: dict[str, Any]) -> Any:
        """INSERT … ON CONFLICT DO NOTHING (each dialect's own)."""
        raise NotImplementedError

    def _release(self, job: str) -> None:
        with self._write() as conn:
            c = t.leases.c
            conn.execute(delete(t.leases).where(c.job == job, c.agent == self.agent))

    def _fence(self, conn: Connection, job: str) -> None:
        """Raise :class:`LeaseLost` unless this agent may speak for ``job`` now: no other
        agent holds its lease in force (called inside the write that would speak)."""
        c = t.leases.c
        row = conn.execute(select(c.agent, c.expires_s).where(c.job == job)).first()
        if row is not None and row.agent != self.agent and row.expires_s >= self._db_now_s(conn):
            raise LeaseLost(f"{self.location}: job {job!r} is agent {row.agent}'s to speak for")

    # -- one file, several agents ---------------------------------------------------------

    def _fingerprint_owner(
        self, conn: Connection, job: str, head_len: int, head_hash: str
    ) -> FingerprintOwner | None:
        c = t.files.c
        row = conn.execute(
            select(t.files)
            .where(
                c.job == job,
                c.head_len == head_len,
                c.head_hash == head_hash,
                c.agent != self.agent,
                c.shared_with.is_(None),
            )
            .order_by(c.id)
        ).first()
        if row is None:
            return None
        agent = conn.execute(select(t.agents).where(t.agents.c.name == row.agent)).first()
        now_s = self._db_now_s(conn)
        alive = (
            agent is not None
            and agent.stopped_s is None
            and agent.seen_s >= now_s - (AGENT_ALIVE_S)
        )
        state = FileState(**{k: row._mapping[k] for k in FileState.__slots__})
        return FingerprintOwner(state, row.agent, alive)

    def fingerprint_owner(self, job: str, head_len: int, head_hash: str) -> FingerprintOwner | None:
        """Another agent's file of ``job`` with this fingerprint (first bytes), if any."""
        with self._read() as conn:
            return self._fingerprint_owner(conn, job, head_len, head_hash)

    def adopt_file(self, file_id: int, from_agent: str, dev: int, ino: int, path: str) -> bool:
        """Make another (away) agent's file this agent's, where it is now (``dev``, ``ino``,
        ``path``), to read on from its offset; False when someone else adopted it first."""
        with self._write() as conn:
            c = t.files.c
            return bool(
                conn.execute(
                    update(t.files)
                    .where(c.id == file_id, c.agent == from_agent)
                    .values(agent=self.agent, dev=dev, ino=ino, path=path)
                ).rowcount
            )
