"""Helpers for the fleet tests: ``ckpt-advisor run`` agents as subprocesses on one PostgreSQL
store (tests/pg.py), their configs, and timing records to append (real values, no stand-ins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ckpt_advisor.agent.store import StoreError, open_reader
from ckpt_advisor.agent.synth import simulate
from tests import pg
from tests.agent.helpers import TOKEN_ENV
from tests.agent.processes import RunProcess

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def agent_config(
    tmp: Path,
    name: str,
    url: str,
    jobs: dict[str, Path],
    *,
    slack_url: str | None = None,
    estimate_every: str = "1h",
    extra: str = "",
) -> Path:
    """A config for agent ``name`` in ``tmp/name/``: store ``url``; each job reads the timing
    files (``*.jsonl``) and logs (``*.log``) of its folder."""
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    text = (
        f'[store]\nurl = "{url}"\npath = "{home / "state" / "ckpt.db"}"\n\n'
        f'[agent]\nname = "{name}"\n\n'
        f'[schedule]\npoll_every = "0.2s"\nestimate_every = "{estimate_every}"\n'
        'after_failure = "0.5s"\n\n'
    )
    for job, folder in jobs.items():
        text += (
            f'[[jobs]]\nname = "{job}"\ntimings = ["{folder}/*.jsonl"]\n'
            f'logs = ["{folder}/*.log"]\ngpus = 64\nnodes = 8\n\n'
        )
    if slack_url:
        text += (
            f'[slack]\nchannel = "C0FLEET"\ntoken_env = "{TOKEN_ENV}"\nbase_url = "{slack_url}"\n'
        )
    config = home / "config.toml"
    config.write_text(text + extra)
    return config


def agent_env(token: str = "", **extra: str) -> dict[str, str]:
    """The environment of an agent: the database password (never in the file), the token."""
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    return {**env, pg.PASSWORD_ENV: pg.ROLE_PASSWORD, TOKEN_ENV: token, **extra}


class Agent(RunProcess):
    """An agent of a fleet: ``ckpt-advisor run`` with its stderr in ``agent.stderr``."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        super().__init__(config, env, stderr_name="agent.stderr")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A ``ckpt-advisor`` command in another process."""
    return subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", *args],
        capture_output=True, text=True, timeout=120, env=env or agent_env(),
    )  # fmt: skip


def timing_records(first: int, n: int) -> str:
    """``n`` timing-file records (JSON Lines) for saves ``first`` … ``first + n - 1``: one save
    of 240 s every 2 h of steps (so a job with failures drifts)."""
    out = []
    for i in range(first, first + n):
        end = T0 + timedelta(hours=2 * i, seconds=240)
        out.append(json.dumps({"step": 1200 * i, "end": end.isoformat(), "duration_s": 240.0}))
    return "".join(line + "\n" for line in out)


def stored_lines(url: str, job: str) -> Counter[tuple[str, int, str]]:
    """How often each (source, line, kind) of ``job`` is stored (none while there is no store
    yet, or its server is away)."""
    try:
        reader = open_reader(url, password=pg.ROLE_PASSWORD)
    except StoreError:
        return Counter()
    try:
        return Counter((e.source, e.event.line, str(e.event.kind)) for e in reader.events(job=job))
    finally:
        reader.close()


def drifting_job(folder: Path, seed: int) -> None:
    """Write a simulated week of a job that checkpoints far too rarely (HF Trainer log and
    timing file, ``agent/synth.py``) into ``folder``: its estimate drifts, so it is posted."""
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, step_time_s=6.0, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.log").write_text("".join(text for _, text in job.log))
    (folder / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
