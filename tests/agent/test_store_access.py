"""A store this user may only read, and a damaged store: every command says why and what to do
(docs/RELIABILITY.md scenario 24). Real SQLite files; the read-only cases run the real CLI as an
unprivileged user (root ignores permission bits)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.store import open_store

FIXTURE = Path(__file__).parents[2] / "agent" / "fixtures" / "real" / "hf_trainer_crash.log"
NOBODY = 65534


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any user can enter (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="ckpt-ro-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    path.chmod(0o755)
    shutil.rmtree(path)


def _ingested(store_dir: Path) -> Path:
    """The HF crash log ingested into ``store_dir/s.db`` by the real CLI, which then exits (so
    its WAL is checkpointed into the file and removed, as when the daemon stops)."""
    db = store_dir / "s.db"
    subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", "ingest", str(FIXTURE), "--job", "hf",
         "--db", str(db)],
        check=True, capture_output=True,
    )  # fmt: skip
    return db


def _as_other_user(*args: str, warm: Path) -> tuple[int, str, str]:
    """The CLI run by a user who does not own the store: a child process that drops to
    ``nobody`` when we are root (which ignores permission bits). It runs in-process, after the
    same command on the writable copy ``warm`` has imported every module it needs (this
    interpreter may live where ``nobody`` cannot read)."""
    CliRunner().invoke(main, [*args, "--db", str(warm)])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(r)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            result = CliRunner().invoke(main, list(args))
            os.write(w, json.dumps([result.exit_code, result.stdout, result.stderr]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        answer = fh.read()
    os.waitpid(pid, 0)
    code, out, err = json.loads(answer)
    return code, out, err


def test_a_store_in_a_directory_this_user_cannot_write_is_read(shared_dir: Path) -> None:
    """With the daemon stopped (no WAL left), a store in a read-only directory is opened
    immutable: estimates, events and status answer instead of "unable to open database
    file"."""
    db = _ingested(shared_dir)
    warm = _ingested(Path(tempfile.mkdtemp(dir=shared_dir)))
    assert not (shared_dir / "s.db-wal").exists()
    db.chmod(0o444)
    shared_dir.chmod(0o555)
    code, out, err = _as_other_user("estimates", "--db", str(db), "--json", warm=warm)
    assert code == 0, err
    assert [e["job"] for e in json.loads(out)] == ["hf"]
    code, out, err = _as_other_user("events", "--db", str(db), "--kind", "failure", warm=warm)
    assert code == 0, err
    assert "cuda_illegal_memory_access" in out
    code, out, err = _as_other_user("status", "--db", str(db), warm=warm)
    assert "no heartbeat" in out and "Traceback" not in err
    assert not (shared_dir / "s.db-shm").exists()  # nothing written beside it


def test_a_wal_this_user_cannot_read_is_explained(shared_dir: Path) -> None:
    """While the daemon (here: a writer holding its connection) has changes in a WAL that is
    its own (umask 077), another user is told why the store cannot be read and what to do,
    naming the path, instead of "unable to open database file"."""
    db = _ingested(shared_dir)
    warm = _ingested(Path(tempfile.mkdtemp(dir=shared_dir)))
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("INSERT INTO silences (job, until_s) VALUES ('other', 0)")
    writer.commit()
    try:
        wal, shm = shared_dir / "s.db-wal", shared_dir / "s.db-shm"
        assert wal.stat().st_size > 0
        for own in (wal, shm):
            own.chmod(stat.S_IRUSR | stat.S_IWUSR)
        shared_dir.chmod(0o555)
        code, _, err = _as_other_user("estimates", "--db", str(db), warm=warm)
    finally:
        shared_dir.chmod(0o755)
        writer.close()
    assert code == 1
    assert err.startswith(f"ckpt-advisor: {db}: cannot be read by this user")
    assert "its latest changes are in s.db-wal" in err and "sudo -u" in err


def _damage_events_page(db: Path) -> None:
    """Overwrite the events table's root page whole (the schema, on page 1, stays readable): a
    partial overwrite may land in the page's free space, which depends on the paths stored."""
    conn = sqlite3.connect(db)
    page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with db.open("r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(b"\xff" * size)


def test_check_config_finds_a_damaged_store_and_says_how_to_recover(tmp_path: Path) -> None:
    """check-config runs SQLite's quick_check: a store damaged where opening it does not look
    fails (exit 1) with what is wrong and the recovery (move it aside, the daemon re-reads the
    logs); a sound one passes."""
    db = tmp_path / "s.db"
    open_store(db).close()
    config = tmp_path / "c.toml"
    config.write_text(f'[store]\npath = "{db}"\n')
    assert CliRunner().invoke(main, ["check-config", "--config", str(config)]).exit_code == 0
    _ingested(tmp_path)
    _damage_events_page(db)
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 1
    assert f"ckpt-advisor: store.path: {db}: damaged: " in result.stderr
    assert f"move the store aside (mv {db} {db}.corrupt" in result.stderr
    assert "reads every log still on disk from its start" in result.stderr


def test_a_damaged_page_met_by_a_query_gives_the_recovery_not_a_traceback(tmp_path: Path) -> None:
    """events on a store whose events table is damaged exits 1 with the message and the way to
    recover, as opening a damaged store does."""
    db = _ingested(tmp_path)
    _damage_events_page(db)
    result = CliRunner().invoke(main, ["events", "--db", str(db)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "damaged: database disk image is malformed; to recover" in result.stderr
