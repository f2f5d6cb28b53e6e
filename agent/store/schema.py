"""The store's schema version and the packed numbers of an event (standard library only).

Every backend, and the SQLite reader (sqlite3 alone, for fast read-only commands), need these,
so they live apart from the SQLAlchemy tables (``sql/tables.py``).
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct

from ckpt_advisor.agent.store.records import StoreError

SCHEMA_VERSION = 6
"""1: the first release; 2: adds ``silences``; 3: adds ``files.finished``; 4: adds
``events.numbers`` (:func:`event_numbers`) and the index that covers it; 5 (fleet mode): the
agent that read each file and event, the agents, the jobs they configure, the jobs' leases (one
voice) and the outbox's claims; 6: each event's tier (``events.tier``, for jobs that save to
two tiers). Kept in the ``meta`` table; the migrations are Alembic's."""
HEAD_REVISION = f"r{SCHEMA_VERSION:04d}"
"""Alembic's revision of :data:`SCHEMA_VERSION` (``migrations/versions/``): a new store's stamp."""
UPGRADE_S_PER_MILLION_EVENTS = 30.0
"""A generous bound on the schema 3 -> 4 upgrade's time (8 s per million events measured on a
local SSD), for callers that must say how long a start may take."""

NUMBERS = struct.Struct("<4dQ")
"""``events.numbers``: time_s, step, duration_s, persist_s (NaN when unknown), group key."""
NUMBER_FIELDS = ("time_s", "step", "duration_s", "persist_s")


@functools.lru_cache(maxsize=4096)
def group_key(
    source: str, parser: str, from_timing_file: int, kind: str, tier: str | None = None
) -> int:
    """A 64-bit key (BLAKE2b) naming an event's source, parser, timing flag, kind and tier
    (an event without a tier is keyed as before schema 6, so no stored blob changes)."""
    text = f"{source}\0{parser}\0{int(from_timing_file)}\0{kind}"
    text += "" if tier is None else f"\0{tier}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def event_numbers(
    time_s: float | None,
    step: float | None,
    duration_s: float | None,
    persist_s: float | None,
    source: str,
    parser: str,
    from_timing_file: int,
    kind: str,
    tier: str | None = None,
) -> bytes:
    """The ``events.numbers`` blob of one event (40 bytes, little-endian, NULL as NaN).

    The estimator's read (:meth:`agent.store.queries.SqlQueries.event_columns`)
    concatenates these blobs in SQL and hands them to numpy whole: a million events cost one
    row, not a million Python tuples.
    """
    return NUMBERS.pack(
        *(math.nan if v is None else v for v in (time_s, step, duration_s, persist_s)),
        group_key(source, parser, from_timing_file, kind, tier),
    )


def check_schema(location: object, version: int | None) -> None:
    """Raise :class:`StoreError` naming ``location`` when its schema is newer than this code."""
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"{location}: schema version {version} is newer than this ckpt-advisor "
            f"understands ({SCHEMA_VERSION}); upgrade ckpt-advisor"
        )
