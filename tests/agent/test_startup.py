"""What a command imports: only what its path needs (start-up time, issue 15). Each test runs
the real command in a fresh interpreter and fails when an eager import brings a heavy library
onto a path that does not use it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.agent.processes import RunProcess, cli_imports

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "agent" / "fixtures" / "real" / "hf_trainer_crash.log"

NOT_ON_INGEST = [
    "alembic",  # a new store is stamped without it; only a migration imports it
    "apscheduler",
    "importlib.metadata",  # the agents row's version is ckpt_advisor.agent.__version__
    "mako",
    "matplotlib",
    "pandas",
    "prometheus_client",
    "psycopg",
    "pydantic",  # no --config
    "rich",  # no terminal: no progress bar
    "scipy",
    "slack_sdk",
    "sqlalchemy",  # SQLite's store runs on sqlite3; only an older store's upgrade imports it
    "watchdog",
    *(f"ckpt_advisor.agent.cli.{m}" for m in ("calc", "goodput", "query", "service", "status")),
    *(
        f"ckpt_advisor.parsers.{m}"  # an HF log's: its stack's module alone (parsers/registry.py)
        for m in ("accelerate", "composer", "lightning", "megatron", "nemo", "torchtitan")
    ),
]
"""Libraries an ``ingest`` of a log into a new SQLite store, estimate included, never uses,
the modules of the other commands, and the other training stacks' modules."""


def test_an_ingest_into_a_new_store_imports_only_what_it_uses(tmp_path: Path) -> None:
    """An ingest of a real log with saves and a failure into a new store, estimate included,
    imports none of :data:`NOT_ON_INGEST` (SQLAlchemy, Alembic, scipy, pandas, the daemon's and
    the notifier's libraries: each 0.05 to 0.4 s of CPU at start-up; the other commands; the
    stacks the HF log does not need)."""
    db = tmp_path / "s.db"
    out, imported = cli_imports(
        ["ingest", str(LOG), "--job", "j", "--db", str(db)], NOT_ON_INGEST, tmp_path
    )
    assert "2 checkpoint(s), 1 failure(s)" in out.stdout
    assert imported == []
    again, imported = cli_imports(
        ["ingest", str(LOG), "--job", "j", "--db", str(db)], NOT_ON_INGEST, tmp_path
    )  # an up-to-date store: opened without Alembic too
    assert "0 line(s) read" in again.stdout and imported == []


def test_help_and_the_store_readers_start_without_numpy_or_the_parsers(tmp_path: Path) -> None:
    """``--help``, and ``estimates`` and ``status`` of a store (their answers are stored),
    import neither numpy, SQLAlchemy, the parsers nor the estimation rules."""
    db = tmp_path / "s.db"
    cli_imports(["ingest", str(LOG), "--job", "j", "--db", str(db)], [], tmp_path)
    heavy = ["numpy", "sqlalchemy", "ckpt_advisor.parsers", "ckpt_advisor.rules.policy"]
    out, imported = cli_imports(["--help"], heavy, tmp_path)
    assert "ingest" in out.stdout and imported == []
    for command in (["estimates", "--json"], ["status", "--json"]):
        out, imported = cli_imports([*command, "--db", str(db)], heavy, tmp_path)
        assert '"j"' in out.stdout, (command, out.stderr)
        assert imported == [], command


def test_the_daemon_on_a_sqlite_store_imports_neither_sqlalchemy_nor_alembic(
    tmp_path: Path,
) -> None:
    """``run`` with a new SQLite store (created with its directory, which it logs, a real log
    read and stored, an estimate made and decided, stopped) never imports SQLAlchemy or
    Alembic: the embedded store is sqlite3's."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(LOG, runs / "train.log")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[store]\npath = "{tmp_path / "state" / "s.db"}"\n\n'
        '[schedule]\nestimate_every = "1s"\npoll_every = "0.2s"\n\n'
        f'[[jobs]]\nname = "j"\nlogs = ["{runs}/*.log"]\ngpus = 8\n'
    )
    daemon = RunProcess(config, {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    try:
        daemon.wait_log("ckpt_advisor.agent.advisor: j:", timeout_s=60)
    finally:
        assert daemon.stop() == 0, daemon.stderr
    imported = [
        line.rsplit("|", 1)[-1].strip()
        for line in daemon.stderr.splitlines()
        if line.startswith("import time:")
    ]
    db = tmp_path / "state" / "s.db"
    assert f"new store {db}: created with its directory {db.parent}" in daemon.stderr
    assert "ckpt_advisor.agent.store.sqlite.writer" in imported  # the log shows every import
    assert [m for m in imported if m.split(".")[0] in ("sqlalchemy", "alembic")] == []


_THREADS_WITH_NUMPY = (
    "import os\n"
    "from ckpt_advisor.agent.cli import main\n"
    "import numpy\n"
    "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])\n"
)


def test_the_command_line_loads_numpy_with_one_blas_thread(tmp_path: Path) -> None:
    """Once the command line is imported, numpy loads OpenBLAS with no thread of its own (it
    would start one per core, each spinning for a while: CPU at every start-up); a thread count
    the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    run = [sys.executable, "-c", _THREADS_WITH_NUMPY]
    out = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[1] == "2"
