"""Fleet mode's tables, for both backends: the agents, the jobs they configure, the jobs' leases.

One voice (docs/RELIABILITY.md, scenario 32): each job's recommendation is decided and posted
by the one agent that holds the job's lease. A lease lasts ``ttl_s`` by the database's clock
(hosts' clocks differ) and is renewed by its holder every few seconds; an agent that dies stops
renewing, and once its lease has expired and the agent has not been seen for ``ttl_s`` another
agent takes the job over. The agent whose config names a job (the one that reads its logs) is
preferred: another agent holds it only while that one is away, and hands it back when it is
seen again. With SQLite there is one agent, which holds every lease.

A mixin of :class:`agent.store.sql.writes.SqlStore`; the statements run on the write
transaction's DB-API connection (``base.py``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import Any

from ckpt_advisor.agent import __version__
from ckpt_advisor.agent.store.records import (
    AgentNameInUse,
    FileState,
    FingerprintOwner,
    LeaseLost,
    RegisteredJob,
)
from ckpt_advisor.agent.store.sql.base import StoreBase, upsert

AGENT_ALIVE_S = 30.0
"""An agent not seen for this long (and one that said it stopped) is away: its files may be
adopted, and its jobs' leases taken once expired."""

AGENT_COLUMNS = ("name", "host", "pid", "version", "started_s", "seen_s", "stopped_s")
JOB_COLUMNS = ("name", "agent", "gpus", "nodes", "updated_s")
FILE_COLUMNS = ", ".join(f'"{k}"' for k in FileState.__slots__)
"""A :class:`FileState`'s columns of ``files``, in its order (``offset`` is a keyword)."""


def file_state(row: Any) -> FileState:
    """The :class:`FileState` of a ``files`` row read by name (:data:`FILE_COLUMNS`)."""
    values = {k: row[k] for k in FileState.__slots__}
    values["finished"] = bool(values["finished"])  # SQLite's BOOLEAN is 0 or 1
    return FileState(**values)


def _alive_elsewhere(agent: Any, host: str, pid: int, now_s: float) -> bool:
    """Whether the ``agents`` row ``agent`` is another agent that runs now: not stopped, seen
    within :data:`AGENT_ALIVE_S`, and neither this process nor an ended process of this host."""
    if agent["stopped_s"] is not None or agent["seen_s"] < now_s - AGENT_ALIVE_S:
        return False
    if agent["host"] != host:
        return True
    if agent["pid"] == pid:
        return False
    try:
        os.kill(agent["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: it exists
        return True
    return True


class FleetTables(StoreBase):
    """Agents, registered jobs, leases and file fingerprints across agents."""

    _registered: bool

    # -- agents ---------------------------------------------------------------------------

    def register_agent(self) -> None:
        """Say that this agent runs (host, pid, version): called at start (and by the first
        :meth:`commit_read`, in its transaction)."""
        with self._write() as conn:
            self._register_agent(conn)
        self._registered = True

    def _register_agent(self, conn: Any) -> None:
        """:meth:`register_agent` in the transaction of ``conn``.

        Raises:
            AgentNameInUse: on a server (PostgreSQL), another agent of this name is alive: not
                stopped, seen within :data:`AGENT_ALIVE_S`, and not this process or a process
                of this host that has ended (this agent's own earlier life). SQLite needs no
                check: its lock file lets one agent in (:attr:`one_agent`).
        """
        now_s = self._db_now_s(conn)
        host, pid = socket.gethostname(), os.getpid()
        if not self.one_agent:
            other = self._exec(
                conn, "SELECT * FROM agents WHERE name = ?", (self.agent,)
            ).fetchone()
            if other is not None and _alive_elsewhere(other, host, pid, now_s):
                raise AgentNameInUse(
                    f"{self.location}: [agent] name {self.agent!r} is in use by {other['host']} "
                    f"pid {other['pid']}, seen {now_s - other['seen_s']:.0f} s ago; give each "
                    "agent its own name (this one reads and posts nothing until that one stops "
                    f"or has been silent for {AGENT_ALIVE_S:.0f} s)"
                )
        row = (self.agent, host, pid, __version__, now_s, now_s, None)
        self._exec(conn, upsert("agents", AGENT_COLUMNS, ["name"]), row)

    def stop_agent(self) -> None:
        """Say that this agent stopped: its jobs and files go to others at once."""
        with self._write() as conn:
            now_s = self._db_now_s(conn)
            self._exec(conn, "UPDATE agents SET stopped_s = ? WHERE name = ?", (now_s, self.agent))
            self._exec(conn, "DELETE FROM leases WHERE agent = ?", (self.agent,))

    # -- jobs -----------------------------------------------------------------------------

    def register_jobs(self, jobs: Iterable[RegisteredJob]) -> None:
        """This agent's configured jobs and their sizes, replacing what it registered before
        (a job another agent registered later stays that agent's)."""
        jobs = list(jobs)
        with self._write() as conn:
            now_s = self._db_now_s(conn)
            names = [j.name for j in jobs]
            other = f" AND name NOT IN ({', '.join('?' * len(names))})" if names else ""
            self._exec(conn, f"DELETE FROM jobs WHERE agent = ?{other}", (self.agent, *names))
            sql = upsert("jobs", JOB_COLUMNS, ["name"])
            for job in jobs:
                self._exec(conn, sql, (job.name, self.agent, job.gpus, job.nodes, now_s))

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
            self._exec(
                conn,
                "UPDATE agents SET seen_s = ?, stopped_s = NULL WHERE name = ?",
                (now_s, self.agent),
            )
            owners = {
                r["name"]: r["agent"] for r in self._exec(conn, "SELECT name, agent FROM jobs")
            }
            seen = {
                r["name"]: r["stopped_s"] is None and r["seen_s"] >= now_s - AGENT_ALIVE_S
                for r in self._exec(conn, "SELECT name, seen_s, stopped_s FROM agents")
            }
            held = {
                r["job"]: r for r in self._exec(conn, "SELECT job, agent, expires_s FROM leases")
            }
        out: set[str] = set()
        for job, owner in sorted(owners.items()):
            lease = held.get(job)
            if lease is not None and lease["agent"] == self.agent:
                if owner != self.agent and seen.get(owner, False):
                    self._release(job)  # its own agent is back
                elif self._take(job, ttl_s, renew=True):
                    out.add(job)
                continue
            if lease is not None and lease["expires_s"] >= now_s:
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
            acquired = "" if renew else ", acquired_s = ?"
            won = self._exec(
                conn,
                f"UPDATE leases SET agent = ?, expires_s = ?{acquired} "
                "WHERE job = ? AND (agent = ? OR expires_s < ?)",
                (self.agent, now_s + ttl_s, *(() if renew else (now_s,)), job, self.agent, now_s),
            ).rowcount
            if won:
                return True
            if self._exec(conn, "SELECT job FROM leases WHERE job = ?", (job,)).fetchone():
                return False
            self._exec(
                conn,
                "INSERT INTO leases (job, agent, acquired_s, expires_s) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (job, self.agent, now_s, now_s + ttl_s),
            )
            held = self._exec(conn, "SELECT agent FROM leases WHERE job = ?", (job,)).fetchone()
            return held is not None and held["agent"] == self.agent

    def _release(self, job: str) -> None:
        with self._write() as conn:
            self._exec(conn, "DELETE FROM leases WHERE job = ? AND agent = ?", (job, self.agent))

    def _fence(self, conn: Any, job: str) -> None:
        """Raise :class:`LeaseLost` unless this agent may speak for ``job`` now: no other
        agent holds its lease in force (called inside the write that would speak)."""
        row = self._exec(
            conn, "SELECT agent, expires_s FROM leases WHERE job = ?", (job,)
        ).fetchone()
        if (
            row is not None
            and row["agent"] != self.agent
            and row["expires_s"] >= self._db_now_s(conn)
        ):
            raise LeaseLost(f"{self.location}: job {job!r} is agent {row['agent']}'s to speak for")

    # -- one file, several agents ---------------------------------------------------------

    def _fingerprint_owner(
        self, conn: Any, job: str, head_len: int, head_hash: str
    ) -> FingerprintOwner | None:
        row = self._exec(
            conn,
            f"SELECT {FILE_COLUMNS}, agent FROM files WHERE job = ? AND head_len = ? "
            "AND head_hash = ? AND agent != ? AND shared_with IS NULL ORDER BY id",
            (job, head_len, head_hash, self.agent),
        ).fetchone()
        if row is None:
            return None
        agent = self._exec(
            conn, "SELECT seen_s, stopped_s FROM agents WHERE name = ?", (row["agent"],)
        ).fetchone()
        now_s = self._db_now_s(conn)
        alive = (
            agent is not None
            and agent["stopped_s"] is None
            and agent["seen_s"] >= now_s - AGENT_ALIVE_S
        )
        return FingerprintOwner(file_state(row), row["agent"], alive)

    def fingerprint_owner(self, job: str, head_len: int, head_hash: str) -> FingerprintOwner | None:
        """Another agent's file of ``job`` with this fingerprint (first bytes), if any."""
        with self._reading() as conn:
            return self._fingerprint_owner(conn, job, head_len, head_hash)

    def adopt_file(self, file_id: int, from_agent: str, dev: int, ino: int, path: str) -> bool:
        """Make another (away) agent's file this agent's, where it is now (``dev``, ``ino``,
        ``path``), to read on from its offset; False when someone else adopted it first."""
        with self._write() as conn:
            return bool(
                self._exec(
                    conn,
                    "UPDATE files SET agent = ?, dev = ?, ino = ?, path = ? "
                    "WHERE id = ? AND agent = ?",
                    (self.agent, dev, ino, path, file_id, from_agent),
                ).rowcount
            )
