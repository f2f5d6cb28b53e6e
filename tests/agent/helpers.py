"""Helpers shared by several agent test modules (a module, not a conftest: they are called, not
injected); the daemon-subprocess ones are in ``processes.py``, the tailer's in ``tail/helpers.py``.
Each builds real values; none stands in for a component."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

from ckpt_advisor.rules.model import JobEstimate, Note, NoteCode, Status

TOKEN_ENV = "CKPT_ADVISOR_TEST_TOKEN"
"""The variable the daemon subprocesses of the tests read the (fake) Slack token from."""


def drifting_estimate(**changes: Any) -> JobEstimate:
    """A drifting job: checkpoint every 4 h (1,800 steps of 8 s) where 1 h (450 steps) is best,
    with one note (C changed from 4 to 5 min); ``changes`` replace fields."""
    base = JobEstimate(
        job="llama-70b",
        computed_at_s=1_700_000_000.0,
        checkpoint_cost_s=300.0,
        checkpoint_cost_ci_s=(280.0, 320.0),
        checkpoint_cost_source="timing_file",
        n_checkpoints=12,
        mtbf_s=21_600.0,
        mtbf_ci_s=(12_000.0, 50_000.0),
        n_failures=4,
        exposure_s=86_400.0,
        restart_cost_s=None,
        current_interval_s=14_400.0,
        young_interval_s=3_600.0,
        daly_interval_s=3_500.0,
        recommended_interval_s=3_600.0,
        recommended_interval_ci_s=None,
        step_time_s=8.0,
        current_interval_steps=1_800,
        recommended_interval_steps=450,
        waste_fraction_current=0.35,
        waste_fraction_recommended=0.15,
        drift_ratio=4.0,
        status=Status.DRIFT,
        newest_event_s=1_700_000_000.0,
        failure_classes={"nccl_timeout": 3, "xid_79": 1},
        notes=(Note(NoteCode.COST_CHANGED, {"previous_s": 240.0, "cost_s": 300.0, "n_saves": 3}),),
    )
    return dataclasses.replace(base, **changes)


ON_64_GPUS: dict[str, Any] = {"gpus": 64, "excess_gpu_hours_per_day": (0.35 - 0.15) * 64 * 24}
"""The fields :func:`drifting_estimate` gets from a job with ``gpus = 64`` (the rules' excess)."""


def downgrade_to_version_3(db: Path) -> None:
    """Turn a store into what schema version 3 wrote: no ``events.numbers``, its old index."""
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
