"""Helpers shared by several agent test modules (a module, not a conftest: they are called, not
injected); the daemon-subprocess ones are in ``processes.py``, the tailer's in ``tail/helpers.py``.
Each builds real values; none stands in for a component."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ckpt_advisor.agent.advisor import Advice
from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate

TOKEN_ENV = "CKPT_ADVISOR_TEST_TOKEN"
"""The variable the daemon subprocesses of the tests read the (fake) Slack token from."""


STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}")
"""A Python ``logging`` stamp as the HF Trainer captures print it (``2026-11-29 22:11:34,676``)."""
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S,%f"
"""The :mod:`datetime` format of :data:`STAMP` (``%f`` reads the milliseconds)."""


def capture_lines(path: Path) -> list[str]:
    """A captured log's physical lines (tqdm's ``\\r`` redraws kept inside them)."""
    return path.read_bytes().decode("utf-8").removesuffix("\n").split("\n")


def stamps_later(lines: Sequence[str], seconds: float) -> list[str]:
    """``lines`` with every :data:`STAMP` ``seconds`` later (a cycle of a capture repeated)."""

    def later(m: re.Match[str]) -> str:
        t = datetime.strptime(m.group(), STAMP_FORMAT) + timedelta(seconds=seconds)
        return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"

    return [STAMP.sub(later, line) for line in lines]


ON_64_GPUS: dict[str, Any] = {"gpus": 64, "excess_gpu_hours_per_day": (0.35 - 0.15) * 64 * 24}
"""The fields ``tests.samples.drifting_estimate`` gets from a job with ``gpus = 64`` (the rules'
excess)."""


def advice_of(estimate: JobEstimate, action: Action = Action.NONE) -> Advice:
    """``estimate`` with the decision its own verdict gives (no drift rule scripted): what the
    advisor hands the metrics."""
    return Advice(estimate, Decision(action, estimate.reason, AlertState()))


V5_COLUMNS = (
    ("outbox", "claimed_s"),
    ("outbox", "claimed_by"),
    ("outbox", "agent"),
    ("estimates", "agent"),
    ("events", "agent"),
    ("files", "shared_with"),
    ("files", "agent"),
)
"""The columns schema version 5 added (fleet mode)."""


def downgrade_to_version_5(db: Path) -> None:
    """Turn a SQLite store into what schema version 5 wrote: no ``events.tier``, at Alembic's
    ``r0005``."""
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE events DROP COLUMN tier")
    conn.execute("UPDATE alembic_version SET version_num='r0005'")
    conn.execute("UPDATE meta SET value='5' WHERE key='schema'")
    conn.commit()
    conn.close()


def downgrade_to_version_4(db: Path) -> None:
    """Turn a SQLite store into what schema version 4 (before Alembic) wrote: no agents,
    leases, claims, agent or tier columns, its old files index, no ``alembic_version``."""
    downgrade_to_version_5(db)
    conn = sqlite3.connect(db)
    for table in ("leases", "jobs", "agents", "alembic_version"):
        conn.execute(f"DROP TABLE {table}")
    for index in ("ix_events_file", "ix_files_head", "ix_files_agent_identity"):
        conn.execute(f"DROP INDEX {index}")
    conn.execute("CREATE INDEX ix_files_identity ON files (job, dev, ino)")
    for table, column in V5_COLUMNS:
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value='4' WHERE key='schema'")
    conn.commit()
    conn.close()


def downgrade_to_version_3(db: Path) -> None:
    """Turn a store into what schema version 3 wrote: no ``events.numbers``, its old index."""
    downgrade_to_version_4(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP INDEX ix_events_job_time_numbers")
    conn.execute("ALTER TABLE events DROP COLUMN numbers")
    conn.execute("CREATE INDEX ix_events_job_time ON events (job, time_s)")
    conn.execute("UPDATE meta SET value='3' WHERE key='schema'")
    conn.commit()
    conn.close()


def daemon_config(tmp: Path, **schedule: str) -> dict[str, Any]:
    """A config for an in-process daemon: store in ``tmp``, job ``j`` over ``tmp/runs/**`` timing
    files, polling every 0.1 s, estimating hourly unless ``schedule`` says otherwise."""
    (tmp / "runs").mkdir(exist_ok=True)
    return {
        "store": {"path": str(tmp / "s.db")},
        "schedule": {"poll_every": "0.1s", "estimate_every": "1h", **schedule},
        "jobs": [{"name": "j", "timings": [f"{tmp}/runs/**/*.jsonl"]}],
    }


def make_odd_paths(directory: Path, nowhere: Path) -> None:
    """Put in ``directory`` every kind of glob match that is not a regular file: ``fifo.log``
    (a FIFO), ``dir.log`` (a directory), ``dangling.log`` (a symlink to ``nowhere``, which must
    not exist) and ``loop1.log``/``loop2.log`` (two symlinks to each other)."""
    os.mkfifo(directory / "fifo.log")
    (directory / "dir.log").mkdir()
    (directory / "dangling.log").symlink_to(nowhere)
    (directory / "loop1.log").symlink_to(directory / "loop2.log")
    (directory / "loop2.log").symlink_to(directory / "loop1.log")


WITHOUT_DAC = (
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
)
"""setpriv's options that take from root the two capabilities that let it read any file."""


def unreadable_file(path: Path) -> list[str]:
    """Make ``path`` (an existing file) unreadable with mode 000 and return the command prefix
    under which a subprocess cannot read it: none for a user other than root; for root, whom
    file modes do not stop, ``setpriv`` without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (the
    same uid: the test's tmp dirs stay reachable). Skips the test when neither works."""
    path.chmod(0)
    prefix = ["setpriv", *WITHOUT_DAC] if os.geteuid() == 0 else []
    if prefix and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no file is unreadable to this test")
    probe = [*prefix, sys.executable, "-c", "import sys; open(sys.argv[1], 'rb')", str(path)]
    if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        pytest.skip(f"{path} with mode 000 is still readable here (setpriv could not drop)")
    return prefix
