"""The store's writes of events and offsets, through SQLAlchemy Core, for both backends.

Events and the tailer's file offsets are committed in one transaction
(:meth:`SqlStore.commit_read`), so a crash at any moment neither loses nor repeats a line. A store
is opened as one agent: the files it remembers are that agent's (two hosts' inode numbers never
meet), and every event and estimate it writes carries the agent's name. A file whose first
:data:`FINGERPRINT_BYTES` match a file another agent reads (two agents' globs reaching one shared
file) is that agent's: this one stores none of its events (docs/RELIABILITY.md, scenario 32).

The backends (``sqlite/writer.py``, ``postgres/store.py``) give the engine, the queries and
their own SQL (a lock, the database's clock).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ckpt_advisor.agent.store.records import FileState, StoreError
from ckpt_advisor.agent.store.sql import tables as t
from ckpt_advisor.agent.store.sql.fleet import FleetTables
from ckpt_advisor.agent.store.sql.outbox import OutboxTables, new_id
from ckpt_advisor.agent.store.sql.rows import Row, event_rows
from ckpt_advisor.parsers.events import Event

PRUNE_BATCH_ROWS = 5000
"""Retention deletes this many events per transaction, so ingestion waits at most one batch."""
FINGERPRINT_BYTES = 1024
"""A file's first bytes that say it is the same file whoever reads it (the tailer's
``HEAD_BYTES``): two agents' files with the same job and these bytes alike are one file."""


class SqlStore(FleetTables, OutboxTables):
    """The writes of a store over ``engine``, as ``agent`` (the backends' base).

    Thread-safe: writes are serialised by a lock (one writer per process; the database
    orders the agents'). Every database error becomes a :class:`StoreError` naming the
    database (:meth:`_error`). The alert state, outbox and silences are
    :class:`~agent.store.sql.outbox.OutboxTables`; agents, jobs and leases
    :class:`~agent.store.sql.fleet.FleetTables`; the queries come from the backend.
    """

    engine: Engine
    location: str

    def _setup(self, engine: Engine, agent: str) -> None:
        self.engine = engine
        self.agent = agent
        self._lock = threading.RLock()
        self._heads: dict[int, str] = {}  # file id -> head hash last checked against the fleet
        self._registered = False  # whether this agent's row was written (by a commit_read)

    def _error(self, exc: DBAPIError, what: str) -> StoreError:
        """The :class:`StoreError` of a database error while doing ``what``."""
        return StoreError(f"{self.location}: {what}: {exc.orig}")

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    yield conn
            except DBAPIError as exc:  # full disk, read-only file, corrupt page, server gone
                raise self._error(exc, "write failed") from None

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except DBAPIError as exc:
            raise self._error(exc, "read failed") from None

    def close(self) -> None:
        """Release the connections (the data stays)."""
        self.engine.dispose()

    # -- tailer state ---------------------------------------------------------------------

    def find_files(self, job: str, dev: int, ino: int) -> list[FileState]:
        """This agent's remembered files of ``job`` with this device and inode (the caller
        checks the head)."""
        c = t.files.c
        with self._read() as conn:
            rows = conn.execute(
                select(t.files)
                .where(c.agent == self.agent, c.job == job, c.dev == dev, c.ino == ino)
                .order_by(c.updated_s.desc())
            )
            return [_file_state(r) for r in rows]

    def forget_file(self, file_id: int) -> None:
        """Drop what is remembered of a file that is gone (its events stay)."""
        with self._write() as conn:
            conn.execute(delete(t.files).where(t.files.c.id == file_id))

    def files(self, job: str | None = None) -> list[FileState]:
        """This agent's remembered files (optionally of one job), newest first."""
        q = (
            select(t.files)
            .where(t.files.c.agent == self.agent)
            .order_by(t.files.c.updated_s.desc())
        )
        if job is not None:
            q = q.where(t.files.c.job == job)
        with self._read() as conn:
            return [_file_state(r) for r in conn.execute(q)]

    def commit_read(
        self,
        file: FileState,
        *,
        offset: int,
        lineno: int,
        events: Sequence[Event],
        now_s: float,
        from_timing_file: bool | Callable[[Event], bool] = False,
        truncated: bool = False,
        finished: bool = False,
    ) -> FileState:
        """Store ``events`` read from ``file`` and its new offset in ONE transaction.

        ``file.id == 0`` means a file not seen before: it is inserted. ``from_timing_file``:
        the same for every event, or a function of the event. ``finished``: the parser was
        flushed at ``offset`` (see :class:`FileState`). A file whose fingerprint another live
        agent's file has is stored as ``shared_with`` that agent, without events (its events
        stored earlier, before its head was long enough to tell, are dropped). Returns the
        stored state.

        Raises:
            StoreError: the database failed, or another agent took this file over (nothing of
                this commit is stored either way).
        """
        with self._write() as conn:
            if not self._registered:  # a file row's agent is in `agents` (alive) from its first
                self._register_agent(conn)  # commit: another agent that starts with it sees it
            values = {
                "offset": offset,
                "lineno": lineno,
                "updated_s": now_s,
                "path": file.path,
                "head_hash": file.head_hash,
                "head_len": file.head_len,
                "truncations": file.truncations + (1 if truncated else 0),
                "finished": finished,
            }
            shared = file.shared_with
            if shared is None and self._heads.get(file.id) != file.head_hash:
                shared = self._shared_with(conn, file)
            file_id = file.id
            if file_id == 0:
                row = {"job": file.job, "dev": file.dev, "ino": file.ino, "agent": self.agent}
                file_id = new_id(
                    conn.execute(insert(t.files).values(**row, **values, shared_with=shared))
                )
            else:
                mine = (t.files.c.id == file_id) & (t.files.c.agent == self.agent)
                changed = conn.execute(update(t.files).where(mine).values(**values)).rowcount
                if not changed:
                    raise StoreError(f"{self.location}: {file.path}: another agent reads it now")
                if shared is not None and file.shared_with is None:
                    conn.execute(update(t.files).where(mine).values(shared_with=shared))
                    conn.execute(delete(t.events).where(t.events.c.file_id == file_id))
            if events and shared is None:
                rows = event_rows(
                    file.job, file.path, file_id, self.agent, events, from_timing_file
                )
                self._insert_rows(conn, rows)
        self._heads[file_id] = file.head_hash
        self._registered = True
        return replace(
            file,
            id=file_id,
            offset=offset,
            lineno=lineno,
            truncations=file.truncations + (1 if truncated else 0),
            finished=finished,
            shared_with=shared,
        )

    def _insert_rows(self, conn: Connection, rows: list[Row]) -> None:
        """Insert ``rows`` (:data:`~agent.store.sql.rows.EVENT_COLUMNS`) into ``events`` in the
        transaction of ``conn``, in bulk: the backend's own way (one prepared ``executemany``
        on SQLite, ``COPY`` on PostgreSQL)."""
        raise NotImplementedError

    def _shared_with(self, conn: Connection, file: FileState) -> str | None:
        """Who else reads ``file``: another agent's file of the same job with the same full
        fingerprint, whose agent is alive (an agent that stopped or vanished has its files
        adopted instead: :meth:`adopt_file`); None when nobody does."""
        if file.head_len < FINGERPRINT_BYTES:
            return None
        self._lock_key(conn, f"head:{file.job}:{file.head_hash}")
        other = self._fingerprint_owner(conn, file.job, file.head_len, file.head_hash)
        if other is None or not other.alive:
            return None
        return f"agent {other.agent_name} ({other.state.path})"

    # -- events ---------------------------------------------------------------------------

    def prune_events(self, older_than_s: float, *, batch_rows: int = PRUNE_BATCH_ROWS) -> int:
        """Delete events older than ``older_than_s`` (epoch seconds); returns how many.

        Deletes ``batch_rows`` at a time, each batch its own transaction, so the tailer's
        commits wait at most one batch.
        """
        total = 0
        while True:
            with self._write() as conn:
                ids = (
                    select(t.events.c.id).where(t.events.c.time_s < older_than_s).limit(batch_rows)
                )
                n = conn.execute(delete(t.events).where(t.events.c.id.in_(ids))).rowcount
            total += n
            if n < batch_rows:
                return total

    # -- estimates ------------------------------------------------------------------------

    def save_estimate(
        self, job: str, computed_at_s: float, status: str, payload: dict[str, Any]
    ) -> None:
        """Append one estimate (its ``estimates --json`` object) to the job's history."""
        with self._write() as conn:
            conn.execute(
                insert(t.estimates).values(
                    job=job,
                    computed_at_s=computed_at_s,
                    status=status,
                    payload=json.dumps(payload, sort_keys=True),
                    agent=self.agent,
                )
            )


_FILE_KEYS = tuple(f for f in FileState.__slots__)


def _file_state(row: Any) -> FileState:
    return FileState(**{k: row._mapping[k] for k in _FILE_KEYS})
