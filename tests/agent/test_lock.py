"""One log reader per store: a second `run`, or an `ingest` beside a daemon or another
`ingest`, refuses to read into a store that another process reads logs into."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.store import open_reader, open_store
from ckpt_advisor.agent.store.lock import LockedError, lock_store

FIXTURE = Path(__file__).parents[2] / "agent" / "fixtures" / "real" / "hf_trainer_crash.log"


def test_second_lock_on_one_store_names_the_holder(tmp_path: Path) -> None:
    """While one process holds the lock, another gets LockedError naming the store and pid."""
    db = tmp_path / "s.db"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "from ckpt_advisor.agent.store.lock import lock_store; from pathlib import Path; "
         "import time; "
         f"lock_store(Path({str(db)!r})); print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        try:
            lock_store(db)
        except LockedError as exc:
            assert f"{db}: another ckpt-advisor daemon (pid {holder.pid})" in str(exc)
        else:
            raise AssertionError("a second lock on the same store was granted")
    finally:
        holder.kill()
        holder.wait()
    lock_store(db)  # the kernel released the dead holder's lock: no stale lock file


def test_second_daemon_on_the_same_store_exits_1(tmp_path: Path) -> None:
    """`run` twice on one config: the second exits 1 at once saying the store is in use."""
    config = tmp_path / "c.toml"
    config.write_text(f'[store]\npath = "{tmp_path / "s.db"}"\n[schedule]\npoll_every = "0.2s"\n')
    cmd = [sys.executable, "-m", "ckpt_advisor.agent", "run", "--config", str(config)]
    first = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while (
            not (tmp_path / "s.db.lock").read_text().strip()
            if (tmp_path / "s.db.lock").exists()
            else True
        ):
            assert time.monotonic() < deadline, "first daemon never took the lock"
            time.sleep(0.1)
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert "another ckpt-advisor daemon" in second.stderr
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)


def test_a_symlinked_store_path_is_the_same_store(tmp_path: Path) -> None:
    """The lock follows the store file, not the path string: a symlink to a locked store is
    refused too."""
    db = tmp_path / "s.db"
    db.touch()
    link = tmp_path / "link.db"
    link.symlink_to(db)
    fd = lock_store(db)
    try:
        lock_store(link)
    except LockedError as exc:
        assert "another ckpt-advisor daemon" in str(exc)
    else:
        raise AssertionError("the symlinked path got its own lock")
    finally:
        os.close(fd)


@pytest.mark.parametrize(("holder", "named"), [("run", "daemon"), ("ingest", "`ingest`")])
def test_ingest_beside_another_reader_of_the_store_stores_nothing(
    tmp_path: Path, holder: str, named: str
) -> None:
    """An ``ingest`` into a store that a daemon (or another ``ingest``) is reading logs into
    exits 1 naming the holder and its pid, and stores no event: both would read a shared file
    from the same offset and store its events twice. Once the holder is gone, it ingests."""
    db = tmp_path / "s.db"
    open_store(db).close()  # an existing store, left as it was
    holding = subprocess.Popen(
        [sys.executable, "-c",
         "from ckpt_advisor.agent.store.lock import lock_store; from pathlib import Path; "
         "import time; "
         f"lock_store(Path({str(db)!r}), {holder!r}); print('locked', flush=True); "
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    args = ["ingest", str(FIXTURE), "--job", "hf", "--db", str(db)]
    try:
        assert holding.stdout is not None and holding.stdout.readline().strip() == "locked"
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 1
        assert f"another ckpt-advisor {named} (pid {holding.pid})" in refused.stderr
        assert open_reader(db).events(job="hf") == []
    finally:
        holding.kill()
        holding.wait()
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.stderr
    # the run start, 2 saves, the failure and 4 bar samples (after the start and each save,
    # before the failure: parsers.buffers.thin_steps)
    assert len(open_reader(db).events(job="hf")) == 10
