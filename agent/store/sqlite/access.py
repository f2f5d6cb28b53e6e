"""Opening a SQLite store, and what is said when it cannot be: a directory this user may not
write, a WAL this user may not read, a damaged file (docs/RELIABILITY.md scenario 24).

Standard library only: the read-only commands open the store through here.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ckpt_advisor.agent.store.records import StoreError

CORRUPT_ADVICE = (
    "to recover, stop the daemon, move the store aside (mv {db} {db}.corrupt, and its -wal and "
    "-shm files) and start the daemon again: it makes a new store and reads every log still on "
    "disk from its start (estimates and alert history from before are lost with the old file)"
)
"""What to do with a damaged store, for every message that finds one."""


def explain(db: Path, exc: object, doing: str = "") -> str:
    """The message of a SQLite error on the store ``db`` (``doing``: ``"write failed: "``…),
    with what to do when the file is damaged."""
    text = str(exc)
    if "malformed" in text or "not a database" in text:
        return f"{db}: {doing}damaged: {text}; {CORRUPT_ADVICE.format(db=db)}"
    return f"{db}: {doing}{text}"


def open_read_only(db: Path) -> sqlite3.Connection:
    """A read-only connection to ``db``, open for real (the first read maps the WAL index).

    A WAL store's reader needs ``DB-shm`` beside it, created if missing. When this user cannot
    write the directory and no ``DB-wal`` holds changes (the daemon is stopped: every change is
    in the file itself), the file is opened ``immutable`` instead (SQLite then takes no lock and
    reads no WAL). When the WAL holds changes this user cannot read, the error says why and
    what to do.

    Raises:
        sqlite3.DatabaseError: the file is damaged or not a database.
        StoreError: it cannot be opened (the message says why and what to do).
    """
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        wal = db.with_name(db.name + "-wal")
        changes = wal.exists() and wal.stat().st_size > 0
        as_owner = (
            "run the command as the daemon's user (sudo -u USER ckpt-advisor ...), or let "
            "this user's group read the store (UMask=0027 and a shared Group= in the unit)"
        )
        if not os.access(db, os.R_OK):
            raise StoreError(f"{db}: not readable by this user ({exc}); {as_owner}") from None
        if changes and not os.access(wal, os.R_OK):
            raise StoreError(
                f"{db}: cannot be read by this user: its latest changes are in {wal.name} (the "
                f"daemon is running, or stopped uncleanly), which this user may not read; "
                f"{as_owner}"
            ) from None
        if os.access(db.parent, os.W_OK):
            raise
        if not changes:
            return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        raise StoreError(
            f"{db}: cannot be read by this user: the store is in WAL mode with changes in "
            f"{wal.name}, and reading them needs {db.name}-shm, which this user cannot create "
            f"in {db.parent} (not writable); {as_owner}"
        ) from None
