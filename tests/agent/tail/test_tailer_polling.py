"""What a poll costs and what it must still see: unchanged files are only stat()ed, the globs are
searched only when asked (or when a known name stops leading to its file), an overlong line is
read once, files drained on leaving their glob are flushed, and the timing-file flag follows the
parser. Real files in tmp dirs, a real store."""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.agent.tail.discovery import SETTLED_S
from ckpt_advisor.agent.tail.reader import MAX_LINE_BYTES
from tests.agent.tail.helpers import FIXTURES, Clock, failures, live_tailer, record, records
from tests.agent.tail.helpers import sorted_steps as _steps


class _Preads:
    """Bytes read with ``os.pread``, the tailer's one way of reading a file
    (``agent/tail/ranges.py``, ``identity.py``), counted by wrapping it. ``/proc/self/io``'s
    ``rchar`` counted every read of the process: an import's source read (no bytecode cache)
    or another thread's read during a poll made the bounds below fail now and then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        pread = os.pread

        def counted(fd: int, length: int, offset: int) -> bytes:
            data = pread(fd, length, offset)
            self.bytes += len(data)
            return data

        monkeypatch.setattr(os, "pread", counted)


def _age(*paths: Path) -> None:
    """Move the files' mtime an hour back: written long ago, settled."""
    old_s = time.time() - 3600
    for path in paths:
        os.utime(path, (old_s, old_s))


def _tailer(store: Store, pattern: str) -> Tailer:
    return live_tailer(store, pattern, Clock())


def test_idle_poll_reads_no_byte_of_unchanged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once read, files whose size and (settled) mtime are unchanged cost a stat per poll: not a
    byte is read from them, with or without a glob search."""
    paths = [tmp_path / f"rank{i}.jsonl" for i in range(8)]
    for i, path in enumerate(paths):
        path.write_text(records(range(10 * i + 1, 10 * i + 11)))  # > 1 KiB: a full head hash
    _age(*paths)
    store = open_store(tmp_path / "s.db")
    tailer = _tailer(store, str(tmp_path / "*.jsonl"))
    assert tailer.scan().lines == 80
    preads = _Preads(monkeypatch)
    polled = tailer.scan(discover=False)
    discovered = tailer.scan(discover=True)
    assert preads.bytes == 0  # one head hash would be 1024
    assert (polled.files, polled.discovered, polled.bytes_read) == (8, False, 0)
    assert (discovered.files, discovered.discovered, discovered.bytes_read) == (8, True, 0)


def test_poll_without_discovery_reads_appends_and_follows_rotation(tmp_path: Path) -> None:
    """A poll that does not search the globs still reads lines appended to known files and to
    files found empty, and a rename rotation (the known name now leads elsewhere) makes it
    search at once: the old file is drained, the new one read from 0. A file in a new place is
    found by the next search."""
    store = open_store(tmp_path / "s.db")
    log, empty = tmp_path / "t.jsonl", tmp_path / "u.jsonl"
    log.write_text(record(1))
    empty.write_text("")
    tailer = _tailer(store, str(tmp_path / "*.jsonl"))
    tailer.scan()
    with log.open("a") as fh:
        fh.write(record(2))
    empty.write_text(record(3))
    tailer.scan(discover=False)
    assert _steps(store) == [1, 2, 3]
    with log.open("a") as fh:
        fh.write(record(4))
    os.rename(log, tmp_path / "t.jsonl.1")
    log.write_text(record(5))
    assert tailer.scan(discover=False).discovered
    assert _steps(store) == [1, 2, 3, 4, 5]
    (tmp_path / "v.jsonl").write_text(record(6))
    assert not tailer.scan(discover=False).discovered
    assert _steps(store) == [1, 2, 3, 4, 5]
    tailer.scan()
    assert _steps(store) == [1, 2, 3, 4, 5, 6]


def test_same_size_rewrite_within_the_mtime_tick_is_still_seen(tmp_path: Path) -> None:
    """A truncation and a same-size rewrite that leave size and mtime as they were are seen:
    a file whose mtime is younger than SETTLED_S is not trusted to be unchanged."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    st = path.stat()
    tailer = _tailer(store, str(path))
    tailer.scan()
    path.write_text(record(2))  # same length as the first
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert time.time() - st.st_mtime_ns / 1e9 < SETTLED_S
    tailer.scan(discover=False)
    assert _steps(store) == [1, 2]


def test_growing_overlong_line_is_read_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a line without a newline is longer than MAX_LINE_BYTES, each poll reads only the
    bytes appended since the last one, not the line's tail again; when the newline comes, the
    warning gives the line's true length."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    tailer = _tailer(store, str(path))
    tailer.scan()
    with path.open("a") as fh:
        fh.write("x" * (MAX_LINE_BYTES + 1))
    tailer.scan()
    preads, piece = _Preads(monkeypatch), 64 << 10
    for _ in range(10):
        with path.open("a") as fh:
            fh.write("x" * piece)
        tailer.scan()
    assert preads.bytes < 10 * piece + 10 * 2048  # the new bytes, and a head hash per poll
    with path.open("a") as fh:
        fh.write("\n" + record(2))
    with caplog.at_level(logging.WARNING, logger="ckpt_advisor.agent.tail.reader"):
        assert tailer.scan().skipped_lines == 1
    assert (
        f"line of {MAX_LINE_BYTES + 1 + 10 * piece:,} bytes skipped (longer than 1 MiB"
        in caplog.text
    )
    assert _steps(store) == [1, 2]


@pytest.mark.parametrize("then", ["idles", "shuts down"])
@pytest.mark.parametrize("how", ["renamed", "deleted"])
def test_traceback_ending_a_file_that_leaves_its_glob_is_stored(
    tmp_path: Path, how: str, then: str
) -> None:
    """A file renamed out of its glob or deleted is still followed: the traceback it ends with
    is stored (once) when the file idles, as for a watched file, or at shutdown (drain), when
    the file is read to its end and its parser flushed."""
    store, clock = open_store(tmp_path / "s.db"), Clock()
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "train.log"
    path.write_bytes(b"")
    tailer = live_tailer(store, str(tmp_path / "logs" / "*.log"), clock)
    tailer.scan()
    path.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    tailer.scan()
    assert failures(store) == 0  # held until the next line, or the file idles
    if how == "renamed":
        os.rename(path, tmp_path / "logs" / "train.log.1")
    else:
        path.unlink()
    tailer.scan()
    assert failures(store) == 0
    if then == "idles":
        clock.now += timedelta(seconds=3)
        tailer.scan()
        assert failures(store) == 1
        assert [p.path for p in tailer.positions()] == [
            str(tmp_path / "logs" / ("train.log.1" if how == "renamed" else "train.log (deleted)"))
        ]
    tailer.drain()
    assert failures(store) == 1
    assert tailer.positions() == []
    clock.now += timedelta(seconds=3)
    tailer.scan()
    assert failures(store) == 1


def test_timing_file_recognised_by_content_is_stored_as_exact(tmp_path: Path) -> None:
    """A timing file read as ``auto`` (its name gives no hint) is stored as from a timing file,
    event by event from the parser that read it; a training log beside it is not."""
    timings, log = tmp_path / "timings.src", tmp_path / "train.log"
    timings.write_text(records(range(1, 4)))
    log.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    store = open_store(tmp_path / "s.db")
    specs = [WatchSpec("j", (str(timings), str(log)))]
    Tailer(store, specs, clock=Clock(), tz=UTC).scan()
    by_source = {(e.source, e.event.parser, e.from_timing_file) for e in store.events(job="j")}
    assert (str(timings), "timing_jsonl", True) in by_source
    assert {timing for source, _, timing in by_source if source == str(log)} == {False}
    assert {timing for source, _, timing in by_source if source == str(timings)} == {True}


def test_configured_timing_glob_reads_each_file_by_its_content(tmp_path: Path) -> None:
    """A `timings` glob's files are read by what their lines are, not by their extension: JSON
    records in a `.csv` file and a CSV file named `.jsonl` both give their saves, no misses."""
    from ckpt_advisor.agent.app import watch_specs
    from ckpt_advisor.agent.config import Config

    (tmp_path / "a.csv").write_text(records([1, 2]))
    (tmp_path / "b.jsonl").write_text(
        "step,start,end\n3,2026-11-01T03:00:00+00:00,2026-11-01T03:00:30+00:00\n"
    )
    config = Config.model_validate(
        {"store": {"path": str(tmp_path / "s.db")},
         "jobs": [{"name": "j", "timings": [f"{tmp_path}/*.*"]}]}
    )  # fmt: skip
    store = open_store(tmp_path / "s.db")
    stats = Tailer(store, watch_specs(config), clock=Clock(), tz=UTC, backfill=True).scan()
    parsers = {(Path(e.source).name, e.event.parser, e.event.step) for e in store.events(job="j")}
    assert parsers == {("a.csv", "timing_jsonl", 1), ("a.csv", "timing_jsonl", 2),
                       ("b.jsonl", "timing_csv", 3)}  # fmt: skip
    assert stats.parse_misses == 0
