"""The store's writes of events and offsets, as SQL both backends speak (``base.py``).

Events and the tailer's file offsets are committed in one transaction
(:meth:`SqlStore.commit_read`), so a crash at any moment neither loses nor repeats a line. A store
is opened as one agent: the files it remembers are that agent's (two hosts' inode numbers never
meet), and every event and estimate it writes carries the agent's name. A file whose first
:data:`FINGERPRINT_BYTES` match a file another agent reads (two agents' globs reaching one shared
file) is that agent's: this one stores none of its events (docs/RELIABILITY.md, scenario 32).

The backends (``sqlite/writer.py``, ``postgres/store.py``) give the connection and the
transaction, the queries and their own SQL (a lock, the database's clock, the bulk insert).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.store.records import FileState, StoreError
from ckpt_advisor.agent.store.sql.fleet import FILE_COLUMNS, FleetTables, file_state
from ckpt_advisor.agent.store.sql.outbox import OutboxTables
from ckpt_advisor.agent.store.sql.rows import Row, event_rows

if TYPE_CHECKING:  # the parsers' package is not imported for its type alone
    from ckpt_advisor.parsers.events import Event

PRUNE_BATCH_ROWS = 5000
"""Retention deletes this many events per transaction, so ingestion waits at most one batch."""
FINGERPRINT_BYTES = 1024
"""A file's first bytes that say it is the same file whoever reads it (the tailer's
``HEAD_BYTES``): two agents' files with the same job and these bytes alike are one file."""

_STATE = (
    "offset",
    "lineno",
    "updated_s",
    "path",
    "head_hash",
    "head_len",
    "truncations",
    "finished",
)
"""The columns of ``files`` that a commit sets, in this order."""
_QUOTED = [f'"{c}"' for c in _STATE]  # "offset" is a keyword of both
_NEW_FILE = (
    f"INSERT INTO files (job, dev, ino, agent, shared_with, {', '.join(_QUOTED)}) "
    f"VALUES ({', '.join('?' * (5 + len(_STATE)))})"
)
_UPDATE_FILE = f"UPDATE files SET {' = ?, '.join(_QUOTED)} = ? WHERE id = ? AND agent = ?"


class SqlStore(FleetTables, OutboxTables):
    """The writes of a store, as ``agent`` (the backends' base).

    Thread-safe: writes are serialised by a lock (one writer per process; the database
    orders the agents'). Every database error becomes a :class:`StoreError` naming the
    database (the backend's :meth:`_write`). The alert state, outbox and silences are
    :class:`~agent.store.sql.outbox.OutboxTables`; agents, jobs and leases
    :class:`~agent.store.sql.fleet.FleetTables`; the queries come from the backend.
    """

    def _setup(self, agent: str) -> None:
        self.agent = agent
        self._lock = threading.RLock()
        self._heads: dict[int, str] = {}  # file id -> head hash last checked against the fleet
        self._registered = False  # whether this agent's row was written (by a commit_read)

    # -- tailer state ---------------------------------------------------------------------

    def find_files(self, job: str, dev: int, ino: int) -> list[FileState]:
        """This agent's remembered files of ``job`` with this device and inode (the caller
        checks the head)."""
        rows = self._rows(
            f"SELECT {FILE_COLUMNS} FROM files WHERE agent = ? AND job = ? AND dev = ? "
            "AND ino = ? ORDER BY updated_s DESC",
            (self.agent, job, dev, ino),
        )
        return [file_state(r) for r in rows]

    def forget_file(self, file_id: int) -> None:
        """Drop what is remembered of a file that is gone (its events stay)."""
        with self._write() as conn:
            self._exec(conn, "DELETE FROM files WHERE id = ?", (file_id,))

    def files(self, job: str | None = None) -> list[FileState]:
        """This agent's remembered files (optionally of one job), newest first."""
        where, params = (
            ("AND job = ? ", (self.agent, job)) if job is not None else ("", (self.agent,))
        )
        rows = self._rows(
            f"SELECT {FILE_COLUMNS} FROM files WHERE agent = ? {where}ORDER BY updated_s DESC",
            params,
        )
        return [file_state(r) for r in rows]

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
        truncations = file.truncations + (1 if truncated else 0)
        head = (file.path, file.head_hash, file.head_len)
        values = (offset, lineno, now_s, *head, truncations, finished)  # in _STATE's order
        with self._write() as conn:
            if not self._registered:  # a file row's agent is in `agents` (alive) from its first
                self._register_agent(conn)  # commit: another agent that starts with it sees it
            shared = file.shared_with
            if shared is None and self._heads.get(file.id) != file.head_hash:
                shared = self._shared_with(conn, file)
            file_id = file.id
            if file_id == 0:
                row = (file.job, file.dev, file.ino, self.agent, shared)
                file_id = self._insert_id(conn, _NEW_FILE, row + values)
            else:
                mine = (file_id, self.agent)
                if not self._exec(conn, _UPDATE_FILE, values + mine).rowcount:
                    raise StoreError(f"{self.location}: {file.path}: another agent reads it now")
                if shared is not None and file.shared_with is None:
                    share = "UPDATE files SET shared_with = ? WHERE id = ? AND agent = ?"
                    self._exec(conn, share, (shared, *mine))
                    self._exec(conn, "DELETE FROM events WHERE file_id = ?", (file_id,))
            if events and shared is None:
                fixed = (file.job, file_id, file.path, self.agent)
                rows = event_rows(
                    file.path, events, from_timing_file, null=self._null, blob=self._blob
                )
                self._insert_rows(conn, fixed, rows)
        self._heads[file_id] = file.head_hash
        self._registered = True
        return replace(
            file,
            id=file_id,
            offset=offset,
            lineno=lineno,
            truncations=truncations,
            finished=finished,
            shared_with=shared,
            updated_s=now_s,
        )

    _null: Any = None
    _blob: Callable[[bytes], Any] | None = None
    """What an event's row holds for an unknown value, and for its ``numbers`` bytes
    (:func:`~agent.store.sql.rows.event_rows`): what the backend's driver binds fastest."""

    def _insert_rows(self, conn: Any, fixed: Row, rows: list[Row]) -> None:
        """Insert ``rows`` (:data:`~agent.store.sql.rows.ROW_COLUMNS`), each with ``fixed``
        (:data:`~agent.store.sql.rows.FIXED_COLUMNS`), into ``events`` in the transaction of
        ``conn``, in bulk: the backend's own way (multi-row INSERTs by one ``executemany`` on
        SQLite, ``COPY`` on PostgreSQL)."""
        raise NotImplementedError

    def _shared_with(self, conn: Any, file: FileState) -> str | None:
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
                n: int = self._exec(
                    conn,
                    "DELETE FROM events WHERE id IN "
                    "(SELECT id FROM events WHERE time_s < ? LIMIT ?)",
                    (older_than_s, batch_rows),
                ).rowcount
            total += n
            if n < batch_rows:
                return total

    # -- estimates ------------------------------------------------------------------------

    def save_estimate(
        self, job: str, computed_at_s: float, status: str, payload: dict[str, Any]
    ) -> None:
        """Append one estimate (its ``estimates --json`` object) to the job's history."""
        with self._write() as conn:
            self._exec(
                conn,
                "INSERT INTO estimates (job, computed_at_s, status, payload, agent) "
                "VALUES (?, ?, ?, ?, ?)",
                (job, computed_at_s, status, json.dumps(payload, sort_keys=True), self.agent),
            )
