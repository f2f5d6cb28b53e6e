"""docs/RELIABILITY.md scenarios for the tailer and the store, on real files and real SQLite."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import tracemalloc
from contextlib import closing
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from ckpt_advisor.agent.store import FileState, Store, StoreError, open_reader, open_store
from ckpt_advisor.agent.store.sqlite.writer import SqliteStore
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.agent.tail.reader import MAX_LINE_BYTES
from ckpt_advisor.parsers.events import Event, EventKind
from tests.agent.tail.helpers import FIXTURES, NOW, Clock, failures, live_tailer, record, records
from tests.agent.tail.helpers import sorted_steps as _steps


def _tailer(store: Store, *patterns: str, tz: ZoneInfo | None = None) -> Tailer:
    return Tailer(store, [WatchSpec("j", patterns)], clock=lambda: NOW, tz=tz or UTC)


def _kinds(store: Store) -> list[tuple[str, int | None, int]]:
    return sorted((str(e.event.kind), e.event.step, e.event.line) for e in store.events(job="j"))


def test_rotation_while_down_finishes_old_file_from_its_offset(tmp_path: Path) -> None:
    """Scenario 4: lines appended and a rename rotation while the daemon is down: the old file
    (found by inode and head hash in its directory, not by name) is finished from its offset
    and the new file is read from 0."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(records(range(1, 3)))
    tailer = _tailer(store, str(path))
    tailer.scan()
    tailer.close()
    with path.open("a") as fh:
        fh.write(records(range(3, 5)))
    os.rename(path, tmp_path / "t.jsonl.1")
    path.write_text(records(range(5, 7)))
    _tailer(store, str(path)).scan()
    assert _steps(store) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("last_write_h", [0, 2])
def test_file_rotated_while_down_is_followed_while_its_writer_may_write(
    tmp_path: Path, last_write_h: int
) -> None:
    """Scenarios 4 and 29: a file renamed away while the daemon was down, its writer still
    holding it, is read from its stored offset and then followed through its descriptor while
    it grows, until quiet for rotated_idle_s; one last written to longer ago than that (its
    mtime) is read to its end and released at once."""
    store, clock = open_store(tmp_path / "s.db"), Clock()
    path, rotated = tmp_path / "t.jsonl", tmp_path / "t.jsonl.1"
    spec = WatchSpec("j", (str(path),))
    path.write_text(records(range(1, 3)))

    def tailer() -> Tailer:
        return Tailer(store, [spec], clock=clock, tz=UTC, rotated_idle_s=3600.0)

    first = tailer()
    first.scan()
    first.close()
    with path.open("a", buffering=1) as writer:
        writer.write(records(range(3, 5)))
        os.rename(path, rotated)
        if last_write_h:
            old_s = time.time() - last_write_h * 3600
            os.utime(rotated, (old_s, old_s))
        path.write_text(records(range(5, 7)))
        restarted = tailer()
        restarted.scan()
        assert _steps(store) == [1, 2, 3, 4, 5, 6]
        followed = [p.path for p in restarted.positions()]
        assert followed == ([str(path)] if last_write_h else [str(path), str(rotated)])
        assert restarted.n_followed == len(followed)  # the daemon's status line counts so
        writer.write(records(range(7, 9)))
    restarted.scan(discover=False)
    assert _steps(store) == [1, 2, 3, 4, 5, 6] + ([] if last_write_h else [7, 8])
    clock.now += timedelta(hours=1)
    restarted.scan(discover=False)
    assert [p.path for p in restarted.positions()] == [str(path)]
    assert restarted.n_followed == 1


def test_empty_file_renamed_away_before_its_first_line_is_followed(tmp_path: Path) -> None:
    """Scenario 29 from the first byte: a trainer's log created empty, rotated away before it
    printed anything (import time), then written through the trainer's descriptor: its lines
    are stored, and at shutdown the file is released."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    with path.open("a", buffering=1) as writer:
        tailer = _tailer(store, str(path))
        tailer.scan()
        os.rename(path, tmp_path / "t.jsonl.1")
        tailer.scan()
        writer.write(records(range(1, 4)))
        tailer.scan()
        assert _steps(store) == [1, 2, 3]
        writer.write(record(4))
        tailer.drain()
    assert _steps(store) == [1, 2, 3, 4]
    assert tailer.positions() == []


def test_truncate_and_rewrite_larger_between_polls_is_a_new_file(tmp_path: Path) -> None:
    """Scenario 6: a file truncated and rewritten larger than the old offset before the next
    poll has different first bytes: it is read from 0 (not from the old offset) and counted."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(records(range(1, 3)))
    tailer = _tailer(store, str(path))
    tailer.scan()
    with path.open("r+") as fh:
        fh.truncate(0)
        fh.write(records(range(10, 15)))
    stats = tailer.scan()
    assert stats.truncations == 1
    assert _steps(store) == [1, 2, 10, 11, 12, 13, 14]


def test_inode_reuse_reads_the_new_file_from_zero(tmp_path: Path) -> None:
    """Scenario 7: a file deleted while the daemon is down and recreated with the same inode is
    read from 0, not from the old file's offset."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(records(range(1, 4)))
    _tailer(store, str(path)).scan()
    path.unlink()
    path.write_text(records(range(100, 110)))  # larger than the old offset
    # Give the stored record the new file's inode, as a filesystem reusing it would (ext4 does
    # so at its own pace, which a test cannot wait for).
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("UPDATE files SET ino = ?", (path.stat().st_ino,))
    _tailer(store, str(path)).scan()
    assert _steps(store) == [1, 2, 3, *range(100, 110)]


class _Killed(BaseException):
    """The process died (SIGKILL) at this point."""


class _DyingStore(SqliteStore):
    """A real store whose next commit dies before its transaction, while ``dying``."""

    dying = False

    def commit_read(self, file: FileState, **kwargs: Any) -> FileState:
        if self.dying:
            raise _Killed
        return super().commit_read(file, **kwargs)


def test_file_rewritten_while_down_survives_a_kill_and_a_rotation(tmp_path: Path) -> None:
    """Scenarios 6, 7 and 29 at once: a file rewritten in place while the daemon is down (the
    same length, other first bytes), the restarted daemon killed before it commits the file,
    and the file renamed away before the next start: its new line is stored all the same (its
    row is replaced by the new state's commit, not forgotten before it)."""
    store = _DyingStore(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    _tailer(store, str(path)).scan()
    with path.open("r+") as fh:
        fh.truncate(0)
        fh.write(record(2))
    assert path.stat().st_size == len(record(1))
    store.dying = True
    with pytest.raises(_Killed):
        _tailer(store, str(path)).scan()
    store.dying = False
    os.rename(path, tmp_path / "t.jsonl.1")
    _tailer(store, str(path)).scan()
    assert _steps(store) == [1, 2]


def test_deleted_while_open_is_read_until_idle_then_forgotten(tmp_path: Path) -> None:
    """A file deleted after lines were appended is read to its end through the open descriptor,
    and on while it grows; once it has been idle for rotated_idle_s it is released and its
    record dropped, so a later file with its inode cannot inherit its offset."""
    store, clock = open_store(tmp_path / "s.db"), Clock()
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    spec = WatchSpec("j", (str(path),))
    tailer = Tailer(store, [spec], clock=clock, tz=UTC, rotated_idle_s=60.0)
    tailer.scan()
    with path.open("a", buffering=1) as fh:  # the writer keeps its descriptor
        fh.write(record(2))
        path.unlink()
        tailer.scan()
        assert _steps(store) == [1, 2]
        clock.now += timedelta(seconds=59)
        fh.write(record(3))
        tailer.scan(discover=False)
        assert _steps(store) == [1, 2, 3]
    clock.now += timedelta(seconds=59)
    tailer.scan(discover=False)
    assert [f.offset for f in store.files("j")] == [len(records(range(1, 4)))]
    clock.now += timedelta(seconds=2)
    tailer.scan(discover=False)
    assert store.files("j") == []
    assert tailer.positions() == []


def test_restart_in_the_middle_of_a_traceback_loses_nothing(tmp_path: Path) -> None:
    """Scenario 8 with parser state: the daemon stopping after every line of a real crash log
    (mid-traceback, mid-save, a last line without newline) stores exactly the events of the
    same pieces read without stopping, and the non-step events of one read of the whole file
    (step events are a sample of the bar that depends on how much each read finds)."""
    raw = b"".join(
        (FIXTURES / n).read_bytes() for n in ("hf_trainer_crash.log", "hf_trainer_resume.log")
    )
    one_pass = open_store(tmp_path / "one.db")
    whole = tmp_path / "whole" / "train.log"
    whole.parent.mkdir()
    whole.write_bytes(raw)
    _tailer(one_pass, str(whole)).scan()
    assert any(e.event.kind == "failure" for e in one_pass.events(job="j"))

    def read_in_pieces(name: str, *, restart: bool) -> Store:
        store = open_store(tmp_path / f"{name}.db")
        path = tmp_path / name / "train.log"
        path.parent.mkdir()
        path.write_bytes(b"")
        tailer = _tailer(store, str(path))
        tailer.scan()
        for piece in raw.splitlines(keepends=True):
            for part in (piece[:7], piece[7:]):  # a partial line, then its rest
                with path.open("ab") as fh:
                    fh.write(part)
                tailer.scan()
                if restart:
                    tailer.close()
                    tailer = _tailer(store, str(path))
        tailer.scan()
        return store

    store = read_in_pieces("restarted", restart=True)
    assert _kinds(store) == _kinds(read_in_pieces("steady", restart=False))

    def not_steps(store: Store) -> list[tuple[str, int | None, int]]:
        return [k for k in _kinds(store) if k[0] != "step"]

    assert not_steps(store) == not_steps(one_pass)


def test_csv_timing_rows_after_a_restart_keep_their_header(tmp_path: Path) -> None:
    """A restart after a CSV timing file's header re-derives the header from the file, so the
    rows that follow are still read (a fresh parser would take the first row as a header)."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "ckpt_timings.csv"
    path.write_text("step,start,end\n100,2026-11-01T00:00:00,2026-11-01T00:00:30\n")
    tailer = _tailer(store, str(path))
    tailer.scan()
    tailer.close()
    with path.open("a") as fh:
        fh.write("200,2026-11-01T01:00:00,2026-11-01T01:00:40\n")
    _tailer(store, str(path)).scan()
    assert [(e.event.step, e.event.duration_s) for e in store.events(job="j")] == [
        (100, 30.0),
        (200, 40.0),
    ]


def test_ten_mib_line_is_skipped_with_bounded_memory(tmp_path: Path) -> None:
    """Scenario 9: a 10 MiB line, arriving over several scans, is skipped and counted once while
    memory stays within a few read chunks; the lines after it are parsed."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    tailer = _tailer(store, str(path))
    tailer.scan()
    skipped = 0
    tracemalloc.start()
    try:
        for _ in range(10):
            with path.open("a") as fh:
                fh.write("x" * (1 << 20))
            skipped += tailer.scan().skipped_lines
        with path.open("a") as fh:
            fh.write("\n" + record(2))
        skipped += tailer.scan().skipped_lines
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert skipped == 1
    assert peak < 6 * MAX_LINE_BYTES  # a few read chunks, not the 10 MiB line
    assert _steps(store) == [1, 2]


def test_invalid_bytes_and_terminal_noise_do_not_stop_the_tailer(tmp_path: Path) -> None:
    """Scenario 10: invalid UTF-8, NUL bytes, CRLF, ANSI colours and tqdm carriage returns are
    decoded with replacement; the real log lines among them give the same saves and failure."""
    clean = (FIXTURES / "hf_trainer_crash.log").read_bytes()
    noisy = b"\xff\xfe\x00garbage\x1b[31mred\x1b[0m\r 10%|#  | 1/10\r 20%|## | 2/10\n"
    noisy += b"\x00" * 64 + b"\n" + clean.replace(b"\n", b"\r\n") + b"\xc3\x28\xa0\xa1\n"
    ref, store = open_store(tmp_path / "ref.db"), open_store(tmp_path / "s.db")
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "a.log").write_bytes(clean)
    (tmp_path / "a.log").write_bytes(noisy)
    _tailer(ref, str(tmp_path / "ref" / "a.log")).scan()
    stats = _tailer(store, str(tmp_path / "a.log")).scan()
    assert stats.lines == clean.count(b"\n") + 3
    saves = [(k, s) for k, s, _ in _kinds(store) if k.startswith("checkpoint")]
    assert saves and saves == [(k, s) for k, s, _ in _kinds(ref) if k.startswith("checkpoint")]
    assert "failure" in {k for k, _, _ in _kinds(store)}


def test_files_and_run_dirs_appearing_later_are_found_by_the_next_scan(tmp_path: Path) -> None:
    """Scenario 11: a run directory and file created after start under a ``**`` glob are read
    by the next scan."""
    store = open_store(tmp_path / "s.db")
    tailer = _tailer(store, str(tmp_path / "runs" / "**" / "*.jsonl"))
    assert tailer.scan().files == 0
    run = tmp_path / "runs" / "job-7" / "rank0"
    run.mkdir(parents=True)
    (run / "ckpt_timings.jsonl").write_text(record(7))
    assert tailer.scan().events == 1
    assert _steps(store) == [7]


def test_repointed_symlink_finishes_old_target_and_follows_new(tmp_path: Path) -> None:
    """Scenario 12: a symlink re-pointed to a new file: the old target is finished, the new one
    read from 0; a target reached by the link and by its own name is read once."""
    store = open_store(tmp_path / "s.db")
    runs, cur = tmp_path / "runs", tmp_path / "cur"
    runs.mkdir()
    cur.mkdir()
    (runs / "r1.jsonl").write_text(record(1))
    (cur / "latest.jsonl").symlink_to(runs / "r1.jsonl")
    tailer = _tailer(store, str(cur / "*.jsonl"), str(runs / "r1.jsonl"))
    tailer.scan()
    with (runs / "r1.jsonl").open("a") as fh:
        fh.write(record(2))
    (runs / "r2.jsonl").write_text(record(3))
    (cur / "latest.jsonl").unlink()
    (cur / "latest.jsonl").symlink_to(runs / "r2.jsonl")
    tailer.scan()
    with (runs / "r2.jsonl").open("a") as fh:
        fh.write(record(4))
    tailer.scan()
    assert _steps(store) == [1, 2, 3, 4]


def test_naive_log_times_are_taken_in_the_configured_zone(tmp_path: Path) -> None:
    """Scenario 27: naive timestamps in logs are read in the configured zone (default UTC)."""
    path = tmp_path / "train.log"
    path.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    utc, ny = open_store(tmp_path / "utc.db"), open_store(tmp_path / "ny.db")
    _tailer(utc, str(path)).scan()
    _tailer(ny, str(path), tz=ZoneInfo("America/New_York")).scan()
    t_utc = [e.event.time for e in utc.events(job="j") if not e.event.time_estimated]
    t_ny = [e.event.time for e in ny.events(job="j") if not e.event.time_estimated]
    assert t_utc and len(t_utc) == len(t_ny)
    assert {(b - a) for a, b in zip(t_utc, t_ny, strict=True) if a and b} == {timedelta(hours=5)}


# -- the store ----------------------------------------------------------------------------


def _mounts(tmp_path: Path, fstype: str) -> str:
    table = tmp_path / "mounts"
    table.write_text(f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path} {fstype} rw 0 0\n")
    return str(table)


def test_store_on_a_network_filesystem_is_refused_naming_the_path(tmp_path: Path) -> None:
    """Scenario 24: a database on NFS (from the mount table) is refused with the path and type."""
    db = tmp_path / "state" / "s.db"
    with pytest.raises(StoreError, match=rf"{db}: on a nfs4 network filesystem"):
        SqliteStore(db, mount_table=_mounts(tmp_path, "nfs4"))
    assert not db.exists()


def test_store_in_a_read_only_place_names_the_path() -> None:
    """Scenario 24: a database that cannot be created (read-only filesystem) names its path."""
    with pytest.raises(StoreError, match=r"/proc/ckpt-advisor/s\.db: cannot create directory"):
        open_store("/proc/ckpt-advisor/s.db")


def test_full_disk_loses_nothing_and_names_the_path(tmp_path: Path) -> None:
    """Scenario 24: when SQLite reports a full disk, the scan fails naming the path, the offset
    stays, and once there is room every line is stored exactly once."""
    db = tmp_path / "s.db"
    store = SqliteStore(db)  # its write connection: to make SQLite's disk full
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    tailer = _tailer(store, str(path))
    tailer.scan()
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    with path.open("a") as fh:
        fh.write("".join(record(s) + " " * 2000 + "\n" for s in range(2, 40)))
    with pytest.raises(StoreError, match=rf"{db}: write failed: database or disk is full"):
        tailer.scan()
    store._conn.execute("PRAGMA max_page_count = 4294967294")
    tailer.scan()
    assert _steps(store) == list(range(1, 40))


def test_corrupt_page_gives_an_error_naming_the_path(tmp_path: Path) -> None:
    """Scenario 24: a database whose pages were damaged gives a StoreError naming it when
    written, never a silent drop."""
    db = tmp_path / "s.db"
    store = open_store(db)
    state = FileState(
        0, "j", "/l", dev=1, ino=2, head_hash="h", head_len=1, offset=0, lineno=0, truncations=0
    )
    ev = Event(EventKind.STEP, 1, "x", time=NOW, step=1)
    for i in range(300):
        state = store.commit_read(state, offset=i + 1, lineno=i + 1, events=[ev] * 20, now_s=1.0)
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    data[8192:16384] = b"\xa5" * 8192
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=str(db)):
        again = open_store(db)
        again.commit_read(state, offset=999, lineno=999, events=[ev] * 50, now_s=2.0)
        again.count_events()


def test_long_reader_transaction_does_not_block_daemon_writes(tmp_path: Path) -> None:
    """Scenario 25: a CLI reader holding a read transaction open (WAL snapshot) while the
    daemon commits 300 times: every commit lands, the reader's snapshot stays consistent."""
    db = tmp_path / "s.db"
    store = open_store(db)
    state = store.commit_read(
        FileState(0, "j", "/l", 1, 2, "h", 1, 0, 0, 0), offset=0, lineno=0, events=[], now_s=0
    )
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)) as conn:
        conn.execute("BEGIN")  # what the CLI's sqlite3 reader sees: one snapshot
        before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        done = threading.Event()

        def write() -> None:
            nonlocal state
            for i in range(300):
                ev = Event(EventKind.STEP, i + 1, "x", time=NOW, step=i)
                state = store.commit_read(state, offset=i + 1, lineno=i + 1, events=[ev], now_s=1)
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=60)
        assert done.is_set()
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == before == 0
        conn.execute("COMMIT")
    assert open_reader(db).count_events() == 300
    assert store.find_files("j", 1, 2)[0].offset == 300


def test_retention_prunes_old_events_in_batches(tmp_path: Path) -> None:
    """Retention deletes only events older than the cutoff, a batch per transaction."""
    store = open_store(tmp_path / "s.db")
    state = FileState(0, "j", "/l", 1, 2, "h", 1, 0, 0, 0)
    old = [Event(EventKind.STEP, i, "x", time=NOW - timedelta(days=400), step=i) for i in range(25)]
    new = [Event(EventKind.STEP, 99, "x", time=NOW, step=99)]
    store.commit_read(state, offset=1, lineno=1, events=old + new, now_s=1)
    assert store.prune_events((NOW - timedelta(days=365)).timestamp(), batch_rows=10) == 25
    assert [e.event.step for e in store.events()] == [99]


def test_traceback_ending_a_live_file_is_stored_once_the_file_idles(tmp_path: Path) -> None:
    """A crash log copied into a watched directory, its traceback the last thing the parser
    holds, is stored after one idle poll, and stored once across a restart and more lines."""
    store, clock = open_store(tmp_path / "s.db"), Clock()
    (tmp_path / "logs").mkdir()
    pattern = str(tmp_path / "logs" / "*.log")
    tailer = live_tailer(store, pattern, clock)
    tailer.scan()
    path = tmp_path / "logs" / "train.log"
    path.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    tailer.scan()
    assert failures(store) == 0  # held until the next line, or the file idles
    clock.now += timedelta(seconds=3)
    tailer.scan()
    assert failures(store) == 1
    tailer.close()
    tailer = live_tailer(store, pattern, clock)
    tailer.scan()
    with path.open("a") as fh:
        fh.write("[INFO] restarting\n")
    tailer.scan()
    clock.now += timedelta(seconds=3)
    tailer.scan()
    assert failures(store) == 1


def test_ingest_then_daemon_on_a_file_ending_mid_traceback_stores_one_failure(
    tmp_path: Path,
) -> None:
    """``ingest`` flushes the traceback at the end of the file; the daemon's replay flushes at
    the same byte, so the line that arrives later does not store the failure a second time."""
    store, clock = open_store(tmp_path / "s.db"), Clock()
    path = tmp_path / "train.log"
    path.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    live_tailer(store, str(path), clock, backfill=True).scan()
    assert failures(store) == 1
    tailer = live_tailer(store, str(path), clock)
    tailer.scan()
    with path.open("a") as fh:
        fh.write("[INFO] restarting\n")
    tailer.scan()
    clock.now += timedelta(seconds=3)
    tailer.scan()
    assert failures(store) == 1


def test_traceback_held_when_the_daemon_was_killed_is_stored_after_restart(
    tmp_path: Path,
) -> None:
    """A daemon killed before the file idled never flushed: the restarted one rebuilds the
    pending traceback by replay and stores it once the file idles."""
    store, clock = open_store(tmp_path / "s.db"), Clock()
    path = tmp_path / "train.log"
    path.write_bytes(b"")
    tailer = live_tailer(store, str(path), clock)
    tailer.scan()
    path.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    tailer.scan()
    tailer.close()  # killed: no idle poll happened
    assert failures(store) == 0
    tailer = live_tailer(store, str(path), clock)
    tailer.scan()
    clock.now += timedelta(seconds=3)
    tailer.scan()
    assert failures(store) == 1
