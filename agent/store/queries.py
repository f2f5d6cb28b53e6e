"""The store's read queries, once for both backends, over a DB-API connection.

``ckpt-advisor estimates``, ``events`` and ``status`` only read, and used to spend most of
their start-up importing SQLAlchemy (~0.25 s): the SQLite reader (``sqlite/reader.py``) runs
these queries over the standard library's sqlite3, and every store (SQLite or PostgreSQL) runs
the same ones over the driver connection its pool lends (:class:`SqlQueries` is the base of all
of them), so each query exists once. Written with ``?`` placeholders in SQL both databases
speak; :meth:`SqlQueries._sql` turns them into the driver's. The estimator's read
(:meth:`SqlQueries.event_columns`) goes straight into numpy arrays (``columns.py``); the one
part of it that is each database's own (concatenating the events' packed numbers in time
order, a chunk at a time) is the backend's :meth:`SqlQueries._number_chunks`.

Times are stored as Unix epoch seconds (UTC) and returned as aware UTC datetimes. Standard
library only (numpy inside :meth:`SqlQueries.event_columns`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.store.records import (
    AgentInfo,
    EventColumns,
    OutboxItem,
    RegisteredJob,
    StoredEvent,
    StoreError,
)
from ckpt_advisor.agent.store.schema import SCHEMA_VERSION, group_key

if TYPE_CHECKING:
    import numpy.typing as npt


MERGED_JOBS = 100
"""Up to this many jobs, :meth:`SqlQueries.events` merges per-job index reads (two parts a
job, within SQLite's 500 terms of a compound SELECT); beyond, it sorts."""


def _dt(s: float | None) -> datetime | None:
    return None if s is None else datetime.fromtimestamp(s, UTC)


def _stored_events(rows: list[Any], tiers: bool) -> list[StoredEvent]:
    """The events of ``rows``; ``tiers``: the store has ``events.tier`` (schema 6)."""
    # the parsers (~0.1 s of imports) only here: the commands that list no events start without
    from ckpt_advisor.parsers.events import Event, EventKind

    return [
        StoredEvent(
            job=m["job"],
            source=m["source"],
            event=Event(
                kind=EventKind(m["kind"]),
                line=m["line"],
                parser=m["parser"],
                time=_dt(m["time_s"]),
                step=m["step"],
                duration_s=m["duration_s"],
                failure_class=m["failure_class"],
                planned=bool(m["planned"]),
                persist_s=m["persist_s"],
                detail=m["detail"],
                time_estimated=bool(m["time_estimated"]),
                tier=m["tier"] if tiers else None,
            ),
            from_timing_file=bool(m["from_timing_file"]),
        )
        for m in rows
    ]


class SqlQueries:
    """The read queries of a store, over the DB-API connection :meth:`_reading` lends.

    Args:
        location: the database, for messages (a path, or a URL without its password).
        version: its schema version (:data:`~agent.store.schema.SCHEMA_VERSION` or older:
            the columnar read needs version 4).
    """

    def __init__(self, location: str, version: int) -> None:
        self.location = location
        self._version = version

    def _reading(self) -> AbstractContextManager[Any]:
        """A DB-API connection to read with (the reader's own, or one from the pool); errors
        of the database while it is used become :class:`StoreError`."""
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        """``sql`` in the driver's placeholder style (``?`` as written: sqlite3's)."""
        return sql

    def _cursor(self, conn: Any) -> Any:
        """A cursor of ``conn`` whose rows are read by column name."""
        raise NotImplementedError

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement (``?`` placeholders) on ``conn``; its cursor, rows by column name
        (the writes run theirs through here too: ``sql/base.py``)."""
        cur = self._cursor(conn)
        cur.execute(self._sql(sql), tuple(params))
        return cur

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._reading() as conn:
            return list(self._exec(conn, sql, params).fetchall())

    def _snapshot(self, conn: Any) -> AbstractContextManager[None]:
        """Run the queries inside it on ``conn`` against one snapshot of the database (the
        estimator's read takes several); nothing where each query already is one."""
        return nullcontext()

    _CHUNK_SQL = ""
    """One chunk of the estimator's read: ``count(*)`` and the ``numbers`` blobs concatenated
    in time order (ties by id) of the job's events from a time on (``?``: job, from time,
    LIMIT, OFFSET); each database's own aggregate."""
    chunk_rows = 1 << 16
    """Events per chunk of the estimator's read (2.6 MB of numbers): small enough to be
    reused from the heap, large enough that a query per chunk costs nothing."""

    def _number_chunks(self, conn: Any, job: str) -> Iterator[npt.NDArray[Any]]:
        """The ``numbers`` records (:data:`~agent.store.columns.NUMBERS_DTYPE`) of the job's
        events that have a time, in time order (ties by id), :attr:`chunk_rows` at a time
        (:attr:`_CHUNK_SQL`): the next chunk starts at the last one's last time and skips the
        rows at that time already read (``OFFSET``), so ties stay in id order.

        Raises:
            StoreError: an event lacks its numbers.
        """
        import numpy as np

        from ckpt_advisor.agent.store.columns import NUMBERS_DTYPE

        from_s, skip, limit = -math.inf, 0, self.chunk_rows
        while True:
            count, packed = self._all(conn, self._CHUNK_SQL, (job, from_s, limit, skip))[0]
            chunk = np.frombuffer(bytes(packed or b""), NUMBERS_DTYPE)
            if chunk.size != count:
                raise StoreError(f"{self.location}: events of job {job!r} lack their numbers")
            yield chunk
            if count < limit:
                return
            time_s = chunk["time_s"]
            last_s = float(time_s[-1])
            tied = count - int(np.searchsorted(time_s, last_s, "left"))
            skip = tied + (skip if from_s == last_s else 0)  # the rows at last_s read before
            from_s = last_s

    def events(
        self,
        *,
        job: str | None = None,
        kinds: Iterable[str] | None = None,
        since_s: float | None = None,
        newest: int | None = None,
    ) -> list[StoredEvent]:
        """Stored events in time order (events without time last; ties by id), filtered as
        asked; with ``newest``, only the last that many of that order (``tail -n``, the newest
        events), still in it.

        With ``newest`` and no ``kinds``, each job's events are read backwards in the order of
        its ``(job, time_s, id)`` index, those with a time and those without apart, each part
        cut at ``newest``, and the parts merged: the database walks an index to the limit
        instead of sorting every event (``events --limit 1000`` over a million: 0.22 s ->
        0.01 s). Otherwise (and over more than :data:`MERGED_JOBS` jobs) one sort of the
        matching events: with ``kinds``, the ``(job, kind, time_s)`` index finds them (a walk in
        time order would visit every event of the job to find a rare kind), searched at each
        job's kinds when no job is given (``job IN`` every job's name: SQLite scanned the whole
        index instead, 0.14 s for ``events --kind failure`` over a million events, 0.006 s
        searched).
        """
        where: list[str] = []
        params: list[Any] = []
        if kinds is not None:
            names = list(kinds)
            where.append(f"kind IN ({','.join('?' * len(names))})")
            params += names
        if since_s is not None:
            where.append("time_s >= ?")
            params.append(since_s)
        merge = newest is not None and kinds is None  # else an index of kinds, or all, is read
        jobs = ([job] if job is not None else self.event_jobs()) if merge else []
        cut = "" if newest is None else " LIMIT ?"
        back = "" if newest is None else " DESC"  # the newest: read the order backwards
        parts: list[str] = []
        args: list[Any] = []
        if merge and len(jobs) <= MERGED_JOBS:
            for name in jobs:
                halves = [("time_s IS NOT NULL", f"time_s{back}, id{back}")]
                if since_s is None:  # an event without time is never since a time
                    halves.append(("time_s IS NULL", f"id{back}"))
                for timed, order in halves:
                    cond = " AND ".join(["job = ?", timed, *where])
                    parts.append(
                        f"SELECT * FROM (SELECT * FROM events WHERE {cond} ORDER BY {order}{cut})"
                        f" AS p{len(parts)}"
                    )
                    args += [name, *params, *([] if newest is None else [newest])]
            source = f"({' UNION ALL '.join(parts)}) AS merged" if parts else "events WHERE FALSE"
        else:
            if job is not None:
                where.insert(0, "job = ?")
                params.insert(0, job)
            elif kinds is not None and len(jobs := self.event_jobs()) <= MERGED_JOBS:
                if not jobs:
                    return []
                where.insert(0, f"job IN ({','.join('?' * len(jobs))})")
                params[0:0] = jobs
            source = f"events WHERE {' AND '.join(['TRUE', *where])}"
            args = list(params)
        sql = f"SELECT * FROM {source} ORDER BY time_s IS NULL{back}, time_s{back}, id{back}{cut}"
        args += [] if newest is None else [newest]
        found = _stored_events(self._rows(sql, args), self._version >= 6)
        return found if newest is None else found[::-1]

    def event_jobs(self) -> list[str]:
        """Names of the jobs that have events, sorted: one index probe per job (a skip scan of
        ``(job, …)``), not a read of every event."""
        rows = self._rows(
            "WITH RECURSIVE j(job) AS (SELECT min(job) FROM events UNION ALL "
            "SELECT (SELECT min(e.job) FROM events AS e WHERE e.job > j.job) FROM j "
            "WHERE j.job IS NOT NULL) SELECT job FROM j WHERE job IS NOT NULL"
        )
        return [r["job"] for r in rows]

    def event_columns(self, job: str, kinds: Sequence[str]) -> EventColumns:
        """The job's events of ``kinds`` that have a time, as arrays (:class:`EventColumns`).

        The estimator's read path: the job's ``events.numbers`` blobs
        (:func:`~agent.store.schema.event_numbers`) come in time order from an index that holds
        them, concatenated by the database a chunk at a time (:meth:`_number_chunks`), and
        :class:`~agent.store.columns.ColumnBuilder` turns each chunk into columns; the blobs'
        group keys name each event's source, parser, timing flag, kind and tier (schema 6),
        resolved with one indexed look-up per distinct key. Small queries add the failures'
        classes and the events without time (for the per-parser counts). Both this and
        :meth:`events` give the same timeline (tests, on both backends).

        Raises:
            StoreError: the store predates schema version 4 (open it once read-write, e.g. by
                the daemon or ``ingest``, to upgrade it), or an event lacks its numbers.
        """
        from ckpt_advisor.agent.store.columns import ColumnBuilder  # numpy: only here
        from ckpt_advisor.agent.store.host_dated import host_dated_flags

        if self._version < 4:
            raise StoreError(
                f"{self.location}: schema version {self._version}, from an older ckpt-advisor; "
                f"estimating needs version {SCHEMA_VERSION}: open it once read-write (start "
                "the daemon, or `ingest` into it) to upgrade it"
            )
        kinds = tuple(kinds)
        marks = ",".join("?" * len(kinds))
        with self._reading() as raw, self._snapshot(raw):
            built = ColumnBuilder(kinds, lambda key, time_s: self._group(raw, job, key, time_s))
            for chunk in self._number_chunks(raw, job):
                built.add(chunk)
            untimed = self._all(  # few rows: a range of the (job, time_s) index
                raw,
                "SELECT parser, count(*), MIN(id) FROM events "
                f"WHERE job = ? AND time_s IS NULL AND kind IN ({marks}) AND from_timing_file = 0 "
                "GROUP BY parser",
                (job, *kinds),
            )
            failures = [] if "failure" not in kinds else self._failures(raw, job)
            host_dated = host_dated_flags(
                lambda sql, params: self._all(raw, sql, params), job, kinds
            )
        return built.columns(failures, untimed, host_dated)

    def _failures(self, conn: Any, job: str) -> list[Any]:
        """``(failure_class, planned)`` of the job's timed failures in time order."""
        return self._all(
            conn,
            "SELECT failure_class, planned FROM events "
            "WHERE job = ? AND kind = 'failure' AND time_s IS NOT NULL ORDER BY time_s, id",
            (job,),
        )

    def _all(self, conn: Any, sql: str, params: Sequence[Any]) -> list[Any]:
        """All rows (tuples) of ``sql`` on ``conn``."""
        cur = conn.cursor()
        cur.execute(self._sql(sql), tuple(params))
        return list(cur.fetchall())

    def _group(
        self, raw: Any, job: str, key: int, time_s: float
    ) -> tuple[str, str, int, str, str | None]:
        """Source, parser, timing flag, kind and tier of the group ``key``, whose first event
        is at ``time_s``."""
        tier = "tier" if self._version >= 6 else "NULL"
        for row in self._all(
            raw,
            f"SELECT source, parser, from_timing_file, kind, {tier} FROM events "
            "WHERE job = ? AND time_s = ?",
            (job, time_s),
        ):
            if group_key(*row) == key:
                return (row[0], row[1], int(row[2]), row[3], row[4])
        raise StoreError(f"{self.location}: events of job {job!r} have numbers that match no event")

    def jobs(self) -> list[str]:
        """Names of the jobs that have events or estimates, sorted."""
        estimated = self._rows("SELECT DISTINCT job FROM estimates")
        return sorted({*self.event_jobs(), *(r["job"] for r in estimated)})

    def count_events(self, job: str | None = None) -> int:
        """How many events are stored (for one job or all)."""
        if job is None:
            return int(self._rows("SELECT count(*) AS n FROM events")[0]["n"])
        return int(self._rows("SELECT count(*) AS n FROM events WHERE job = ?", (job,))[0]["n"])

    def estimate_history(
        self, *, job: str | None = None, since_s: float | None = None, latest_only: bool = False
    ) -> list[dict[str, Any]]:
        """Stored estimates (JSON objects), oldest first; ``latest_only``: newest per job."""
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if job is not None:
            where.append("job = ?")
            params.append(job)
        if since_s is not None:
            where.append("computed_at_s >= ?")
            params.append(since_s)
        if latest_only:
            where.append("id IN (SELECT max(id) FROM estimates GROUP BY job)")
        sql = f"SELECT payload FROM estimates WHERE {' AND '.join(where)} ORDER BY job, id"
        return [json.loads(r["payload"]) for r in self._rows(sql, params)]

    def queued_messages(self) -> list[OutboxItem]:
        """Messages not yet delivered (``queued`` or ``unsure``), in the order they were queued;
        a reply (its payload's ``thread_of``) with the ``ts`` of the message it goes under, once
        that was sent."""
        rows = self._rows(
            "SELECT id, job, created_s, action, payload, attempts, state FROM outbox "
            "WHERE state IN ('queued', 'unsure') ORDER BY id"
        )
        payloads = [json.loads(r["payload"]) for r in rows]
        parents = sorted({p["thread_of"] for p in payloads if p.get("thread_of") is not None})
        sent: dict[int, str | None] = {}
        if parents:
            marks = ", ".join("?" * len(parents))
            found = self._rows(f"SELECT id, ts FROM outbox WHERE id IN ({marks})", parents)
            sent = {r["id"]: r["ts"] for r in found}
        return [
            OutboxItem(
                id=r["id"],
                job=r["job"],
                created_s=r["created_s"],
                action=r["action"],
                payload=payload,
                attempts=r["attempts"],
                state=r["state"],
                thread_of=payload.get("thread_of"),
                thread_ts=sent.get(payload.get("thread_of", -1)),
            )
            for r, payload in zip(rows, payloads, strict=True)
        ]

    def silences(self, now_s: float) -> dict[str, float]:
        """The silences still running at ``now_s``: job → when it ends (epoch seconds)."""
        if 0 < self._version < 2:  # schema 1 had no silences
            return {}
        rows = self._rows(
            "SELECT job, until_s FROM silences WHERE until_s > ? ORDER BY job", (now_s,)
        )
        return {r["job"]: float(r["until_s"]) for r in rows}

    # -- fleet mode (schema 5): the agents of the store, the jobs they name, who speaks ------

    def agents(self) -> list[AgentInfo]:
        """Every agent that has opened the store for writing, by name."""
        if self._version < 5:
            return []
        rows = self._rows(
            "SELECT name, host, pid, version, started_s, seen_s, stopped_s FROM agents "
            "ORDER BY name"
        )
        return [AgentInfo(**{k: r[k] for k in AgentInfo.__slots__}) for r in rows]

    def registered_jobs(self) -> dict[str, RegisteredJob]:
        """The jobs some agent's config names, with the agent and the job's size."""
        if self._version < 5:
            return {}
        rows = self._rows("SELECT name, agent, gpus, nodes FROM jobs ORDER BY name")
        return {
            r["name"]: RegisteredJob(r["name"], r["agent"], r["gpus"], r["nodes"]) for r in rows
        }

    def leases(self) -> dict[str, tuple[str, float]]:
        """Which agent decides and posts for each job, and until when (epoch seconds; an
        expired lease is still listed: its agent stopped renewing it)."""
        if self._version < 5:
            return {}
        rows = self._rows("SELECT job, agent, expires_s FROM leases ORDER BY job")
        return {r["job"]: (r["agent"], r["expires_s"]) for r in rows}
