"""The records the store hands out and takes in, whatever the backend: plain frozen values.

No SQL here and no backend's types: the tailer, the estimator, the outbox and the CLI see only
these (and the rules' :class:`~rules.model.AlertState`). Times are Unix epoch seconds (UTC) in
numbers, aware UTC datetimes in events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the read-only commands start without the parsers
    import numpy as np
    import numpy.typing as npt

    from ckpt_advisor.parsers.events import Event


class StoreError(Exception):
    """The store cannot be opened, read or written; the message names the database."""


class NoStoreHere(StoreError):
    """There is no SQLite store at the path given (:attr:`path`); the message names it."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: no database here")
        self.path = path


class LeaseLost(StoreError):
    """Fleet mode: another agent holds the job's lease, so this one must not decide or post
    for it (nothing was written)."""


class AgentNameInUse(StoreError):
    """Fleet mode: another agent that is alive registered this ``[agent] name``: two agents
    of one name would read each other's files twice and post twice, so this one writes
    nothing until that one stops or goes away."""


@dataclass(frozen=True, slots=True)
class FileState:
    """What the tailer remembers of one file: its identity and how far it has been read.

    ``offset`` is the byte offset just after the last complete line committed; ``lineno`` the
    number of lines before it. Identity is device + inode + a hash of the first ``head_len`` bytes.
    Identity is per agent (the store is opened as one): two hosts' inode numbers never meet.
    ``finished``: the parser's pending state (a traceback waiting for its next line) was flushed
    at ``offset``, so a parser rebuilt by replaying the file must be flushed there too. ``id`` 0
    is a file the store has not seen yet.
    """

    id: int
    job: str
    path: str
    dev: int
    ino: int
    head_hash: str
    head_len: int
    offset: int
    lineno: int
    truncations: int
    finished: bool = False
    shared_with: str | None = None
    """Fleet mode: another agent reads this very file (its first bytes match: a shared
    filesystem that two agents' globs both reach); this agent stores none of its events. The
    text names that agent and its path."""
    updated_s: float | None = field(default=None, compare=False)
    """When this state was last committed (Unix seconds: the file was read then, maybe by an
    earlier process); None for a file not stored yet. Not part of the state's equality."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: the parser's event plus the job, its source file and its kind."""

    job: str
    source: str
    event: Event
    from_timing_file: bool = False


@dataclass(frozen=True, slots=True)
class EventColumns:
    """A job's timed events of some kinds as parallel arrays in time order (ties: stored order).

    Attributes:
        kinds: the kind strings asked for; ``kind`` indexes into them.
        time_s: shape (n,), Unix epoch seconds, ascending.
        kind: shape (n,), index into ``kinds``.
        step, duration_s, persist_s: shape (n,), NaN when unknown.
        from_timing_file: shape (n,).
        first_of_source: shape (n,), True at each log source's first event (timing files: never).
        failure_class, failure_planned: length f, for the ``failure`` rows in order.
        parser_counts: log events (time or not) per parser, most first, ties by first seen.
        tier: shape (n,), the save's tier code (``rules.timeline.TIER_CODES``), -1 when none.
        host_dated: shape (n,), True for an event of a log file that had printed no time
            before it (a stored ``no_timestamps`` finding names the file), dated by the host
            (``agent/tail/dating.py``): ``rules.timeline.Timeline.host_dated``.
        sources: the files the events came from, in the order of their first events.
        source: shape (n,), each event's file, an index into ``sources``.
    """

    kinds: tuple[str, ...]
    time_s: npt.NDArray[np.float64]
    kind: npt.NDArray[np.int8]
    step: npt.NDArray[np.float64]
    duration_s: npt.NDArray[np.float64]
    persist_s: npt.NDArray[np.float64]
    from_timing_file: npt.NDArray[np.bool_]
    first_of_source: npt.NDArray[np.bool_]
    failure_class: tuple[str | None, ...]
    failure_planned: npt.NDArray[np.bool_]
    parser_counts: dict[str, int]
    tier: npt.NDArray[np.int8]
    host_dated: npt.NDArray[np.bool_]
    sources: tuple[str, ...]
    source: npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """A Slack message written before sending, so it is delivered once even across crashes.

    ``thread_of``: for a reply (a message's detail, its plot, a resolve), the outbox id of the
    message it goes under (kept in the payload as ``thread_of``); ``thread_ts``: that message's
    Slack ``ts`` once it was sent (None while it is not, or when it could not be: the reply
    then goes to the channel).
    """

    id: int
    job: str
    created_s: float
    action: str
    payload: dict[str, Any]
    attempts: int
    state: str = "queued"  # or "unsure": an earlier send may have landed; look before resending
    thread_of: int | None = None
    thread_ts: str | None = None


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """One agent of a store (fleet mode): who it is and when it was last seen (epoch seconds,
    the database's clock for PostgreSQL)."""

    name: str
    host: str
    pid: int
    version: str
    started_s: float
    seen_s: float
    stopped_s: float | None = None


@dataclass(frozen=True, slots=True)
class RegisteredJob:
    """A job some agent's config names, and its size (what the fleet's rate is pooled by)."""

    name: str
    agent: str
    gpus: int | None
    nodes: int | None


@dataclass(frozen=True, slots=True)
class FingerprintOwner:
    """Another agent's file with a given fingerprint: its state, its agent, whether alive."""

    state: FileState
    agent_name: str
    alive: bool
