"""The store's interface: what the rest of the agent may ask of any backend.

Two protocols, typed with the backend-neutral records of :mod:`agent.store.records`:
:class:`StoreReader` (the queries; what the read-only commands need) and :class:`Store` (the
reader plus every write: the tailer's file state committed with its events, estimates, alert
state, the Slack outbox, silences, retention). Callers are typed against these, never against
a backend, and get one from :func:`agent.store.open_store` / :func:`agent.store.open_reader`,
so another backend (PostgreSQL for a fleet of agents) is an addition: a module that satisfies
both protocols and a branch in those two functions.

Every method raises :class:`~agent.store.records.StoreError` (naming the database) when the
database cannot be read or written; none returns a backend's rows or types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ckpt_advisor.agent.store.records import (
    AgentInfo,
    EventColumns,
    FileState,
    FingerprintOwner,
    OutboxItem,
    RegisteredJob,
    StoredEvent,
)

if TYPE_CHECKING:  # annotations only: the read-only commands start without parsers and rules
    from ckpt_advisor.parsers.events import Event
    from ckpt_advisor.rules.model import AlertState


class StoreReader(Protocol):
    """The queries: events, the estimator's columns, estimates, the outbox."""

    location: str
    """Where the store is, for messages: a file path (or a URL without its password)."""

    def close(self) -> None:
        """Release the connections (the data stays)."""
        ...

    def events(
        self,
        *,
        job: str | None = None,
        kinds: Iterable[str] | None = None,
        since_s: float | None = None,
        newest: int | None = None,
    ) -> list[StoredEvent]:
        """Stored events in time order (events without time last), filtered as asked; with
        ``newest``, only the last that many of that order (the newest), still in it."""
        ...

    def event_columns(self, job: str, kinds: Sequence[str]) -> EventColumns:
        """The job's events of ``kinds`` that have a time, as arrays in time order (the
        estimator's read; equal to :meth:`events` turned into columns)."""
        ...

    def jobs(self) -> list[str]:
        """Names of the jobs that have events or estimates, sorted."""
        ...

    def count_events(self, job: str | None = None) -> int:
        """How many events are stored (for one job or all)."""
        ...

    def estimate_history(
        self, *, job: str | None = None, since_s: float | None = None, latest_only: bool = False
    ) -> list[dict[str, Any]]:
        """Stored estimates (their ``estimates --json`` objects), oldest first per job;
        ``latest_only``: the newest of each job."""
        ...

    def queued_messages(self) -> list[OutboxItem]:
        """Messages not yet delivered (``queued`` or ``unsure``), in the order they were queued."""
        ...

    def silences(self, now_s: float) -> dict[str, float]:
        """The silences still running at ``now_s``: job → when each ends (epoch seconds)."""
        ...

    def check(self) -> str | None:
        """What is damaged in the store, with how to recover, or None when it is sound (a
        quick integrity check: ``check-config`` runs it)."""
        ...

    def agents(self) -> list[AgentInfo]:
        """Every agent that has opened the store for writing (fleet mode), by name."""
        ...

    def registered_jobs(self) -> dict[str, RegisteredJob]:
        """The jobs some agent's config names, with that agent and the job's size."""
        ...

    def leases(self) -> dict[str, tuple[str, float]]:
        """Each job's speaking agent and when its lease ends (epoch seconds)."""
        ...


class Store(StoreReader, Protocol):
    """The reader plus every write, as one agent (``agent``). Safe to share between the
    daemon's threads."""

    agent: str
    """The agent this store was opened as: its files, and the name on what it writes."""

    # -- the tailer's state: offsets are committed with the events read up to them ---------

    def files(self, job: str | None = None) -> list[FileState]:
        """Every remembered file (optionally of one job), most recently read first."""
        ...

    def find_files(self, job: str, dev: int, ino: int) -> list[FileState]:
        """This agent's remembered files of ``job`` with this device and inode (the caller
        checks the head)."""
        ...

    def fingerprint_owner(self, job: str, head_len: int, head_hash: str) -> FingerprintOwner | None:
        """Another agent's file of ``job`` whose first ``head_len`` bytes hash to
        ``head_hash`` (its state, agent, whether that agent is alive), or None."""
        ...

    def adopt_file(self, file_id: int, from_agent: str, dev: int, ino: int, path: str) -> bool:
        """Take over an away agent's file (to read on from its offset); False if another
        agent was first."""
        ...

    def forget_file(self, file_id: int) -> None:
        """Drop what is remembered of a file that is gone (its events stay)."""
        ...

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
        """Store ``events`` read from ``file`` and its new offset in ONE transaction, so a crash
        neither loses nor repeats a line. ``file.id == 0``: a file not seen before.
        ``from_timing_file``: the same for every event, or a function of the event.
        ``finished``: the parser was flushed at ``offset``. Returns the stored state."""
        ...

    def prune_events(self, older_than_s: float, *, batch_rows: int = 5000) -> int:
        """Delete events older than ``older_than_s`` in batches of ``batch_rows`` (each its own
        transaction, so ingestion waits at most one batch); returns how many."""
        ...

    # -- estimates, decisions and the outbox ------------------------------------------------

    def save_estimate(
        self, job: str, computed_at_s: float, status: str, payload: dict[str, Any]
    ) -> None:
        """Append one estimate (its ``estimates --json`` object) to the job's history."""
        ...

    def alert_state(self, job: str) -> AlertState:
        """What was last told about ``job`` (the default state when nothing was)."""
        ...

    def record_decision(
        self,
        job: str,
        state: AlertState,
        *,
        message: dict[str, Any] | None,
        action: str,
        now_s: float,
        replies: Sequence[tuple[str, dict[str, Any]]] = (),
        reply_to: int | None = None,
    ) -> int | None:
        """Persist the new alert state and, in the same transaction, queue ``message`` (a reply
        under the outbox item ``reply_to`` when given) and ``replies`` (``(action, payload)``
        pairs, each a reply under ``message``: its ``OutboxItem.thread_of``); returns the
        message's outbox id (None without a message). Written before sending: exactly-once
        delivery. Raises ``LeaseLost`` (a :class:`StoreError`) when another agent holds the
        job's lease."""
        ...

    def claim_message(self, item_id: int, job: str, now_s: float) -> str | None:
        """Claim a queued message to send it now: the state to send it in (``unsure``: look
        for it in the channel first), or None when it is not this agent's to send."""
        ...

    def mark_message(
        self,
        item_id: int,
        *,
        state: str,
        now_s: float,
        ts: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of one delivery attempt (``sent``, ``failed``, ``unsure`` or still
        ``queued``)."""
        ...

    def messages(self, job: str | None = None) -> list[dict[str, Any]]:
        """Every outbox record, oldest first (``payload`` decoded)."""
        ...

    def silence(self, job: str, until_s: float) -> None:
        """Send nothing about ``job`` until ``until_s`` (epoch seconds); decisions go on."""
        ...

    def silenced_until(self, job: str, now_s: float) -> float | None:
        """When the silence of ``job`` ends, or None if it is not silenced at ``now_s``."""
        ...

    # -- fleet mode: agents, their jobs, one voice per job -----------------------------------

    def register_agent(self) -> None:
        """Say that this agent runs (at start)."""
        ...

    def stop_agent(self) -> None:
        """Say that this agent stopped, releasing its leases."""
        ...

    def register_jobs(self, jobs: Iterable[RegisteredJob]) -> None:
        """This agent's configured jobs and sizes, replacing what it registered before."""
        ...

    def claim_leases(self, ttl_s: float) -> set[str]:
        """Renew this agent's leases and take the free ones it should hold; returns the jobs
        it speaks for now (see ``agent/store/sql/fleet.py``)."""
        ...
