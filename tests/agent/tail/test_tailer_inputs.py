"""What the tailer does with matches that are not logs: FIFOs, directories, dangling symlinks and
symlink loops are skipped with one warning each and never opened for reading; a binary file is
named; the one line-length limit. Real files, FIFOs and symlinks in a tmp dir, a real store."""

from __future__ import annotations

import io
import logging
import os
import threading
from datetime import UTC
from pathlib import Path

import pytest

from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec, inputs
from ckpt_advisor.agent.tail.reader import Reader
from tests.agent.helpers import make_odd_paths
from tests.agent.tail.helpers import FIXTURES, Clock, failures, record, sorted_steps


def _odd_dir(tmp_path: Path) -> Path:
    """``logs/`` with one real timing file and every kind of match that is not a file."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "good.log").write_text(record(1))
    make_odd_paths(logs, tmp_path / "nowhere")
    return logs


def test_non_files_under_a_glob_are_skipped_with_one_warning_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO (never opened: the scan would block on it), a directory, a dangling symlink and a
    symlink loop matched by a glob are each named in one warning, however many scans find them;
    the regular file beside them is read."""
    logs = _odd_dir(tmp_path)
    store = open_store(tmp_path / "s.db")
    tailer = Tailer(store, [WatchSpec("j", (f"{logs}/*.log",))], clock=Clock(), tz=UTC)
    with caplog.at_level(logging.WARNING):
        scans = threading.Thread(target=lambda: [tailer.scan() for _ in range(3)], daemon=True)
        scans.start()
        scans.join(timeout=30)
    assert not scans.is_alive(), "a scan blocked (a FIFO opened for reading?)"
    assert sorted_steps(store) == [1]
    warned = sorted(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())
    assert warned == [
        f"job j: {logs}/dangling.log is a dangling symlink, not a regular file: skipped",
        f"job j: {logs}/dir.log is a directory, not a regular file: skipped",
        f"job j: {logs}/fifo.log is a FIFO (named pipe), not a regular file: skipped",
        f"job j: {logs}/loop1.log is a symlink loop, not a regular file: skipped",
        f"job j: {logs}/loop2.log is a symlink loop, not a regular file: skipped",
    ]


def test_a_fifo_swapped_in_after_discovery_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opening a path that became a FIFO after the glob search fails at once naming it (the
    open never waits for a writer)."""
    fifo = tmp_path / "t.log"
    os.mkfifo(fifo)
    reader = Reader(
        open_store(tmp_path / "s.db"),
        clock=Clock(),
        tz=UTC,
        backfill=False,
        on_progress=None,
        idle_flush_s=2.0,
    )
    with pytest.raises(inputs.NotRegularFile, match="a FIFO"):
        reader.open(WatchSpec("j", (str(fifo),)), str(fifo), live=False)


def test_a_binary_file_read_by_the_daemon_is_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint file matched by a broad glob is read (nothing is lost), with a warning that
    it looks binary and why; a log with a run of NUL bytes (a copytruncate hole) is not
    called binary."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.pt").write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)))
    (run / "holed.log").write_bytes(
        b"\0" * 4096 + b"\n" + (FIXTURES / "lightning_crash.log").read_bytes()
    )
    store = open_store(tmp_path / "s.db")
    with caplog.at_level(logging.WARNING):
        spec = WatchSpec("j", (f"{run}/*.*",))
        Tailer(store, [spec], clock=Clock(), tz=UTC, backfill=True).scan()
    binary = [r.getMessage() for r in caplog.records if "binary" in r.getMessage()]
    assert binary == [
        f"{run}/model.pt looks binary (NUL bytes in its first 266 bytes): no events "
        "expected; narrow the glob"
    ]
    assert failures(store) == 1  # the holed log is read as the log it is


@pytest.mark.parametrize(
    ("head", "binary"),
    [
        (b"plain text\n", False),
        (b"\0" * 100 + "text after a hole, é\n".encode(), False),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", True),  # gzip
        (b"text\0\xff\xfe\x00\x01", True),
    ],
)
def test_binary_reason_needs_nul_bytes_and_something_else_not_text(
    head: bytes, binary: bool
) -> None:
    """NUL bytes alone (a hole in a log) are not binary; with control bytes or bytes that are
    not UTF-8 they are."""
    assert (inputs.binary_reason(head) is not None) is binary


def test_bounded_lines_skip_an_overlong_line_in_bounded_pieces() -> None:
    """A line over the limit is given as its length only, the lines around it whole, and a last
    line without its newline is a line (the limit is the tailer's MAX_LINE_BYTES)."""
    data = b"a\n" + b"x" * 50 + b"\nb\nlast"
    lines = list(inputs.bounded_lines(io.BufferedReader(io.BytesIO(data), 8), limit=10))
    assert lines == [
        inputs.Line(1, b"a", 1),
        inputs.Line(2, None, 50),
        inputs.Line(3, b"b", 1),
        inputs.Line(4, b"last", 4),
    ]
    assert inputs.MAX_LINE_BYTES == 1 << 20
