"""What the tailer holds for each file it follows (shared by the modules of ``agent.tail``)."""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_advisor import parsers
from ckpt_advisor.agent.store import FileState
from ckpt_advisor.agent.tail.dating import FileClock
from ckpt_advisor.agent.tail.discovery import WatchSpec
from ckpt_advisor.agent.tail.identity import Orphan


@dataclass
class OpenFile:
    """One followed file, open for reading.

    ``pos``/``lineno``: how far the parser has read (in memory); ``state``: how far events are
    committed. Bytes before ``replay_to`` were committed by an earlier run: they are fed again
    to rebuild the parser's state, and their events dropped (see ``reader``).
    """

    spec: WatchSpec
    path: str
    """The name the file was last found under (once it left its globs: its name then, where
    the platform tells it)."""
    fd: int
    state: FileState
    fmt: str
    parser: parsers.StreamParser
    clock: FileClock
    live_from: int
    """Bytes from here on were written while we watched (dated by the read time if untimed)."""
    replay_to: int
    replay_flush: bool = False
    """The earlier run flushed the parser at ``replay_to``: the replay flushes it there too."""
    pos: int = 0
    lineno: int = 0
    skip_pos: int | None = None
    """Inside an overlong line: where to go on reading it."""
    last_read_s: float | None = None
    """Clock time new bytes were last read: by this process, else (from the open) as the
    store remembers it, an earlier process's last commit (``FileState.updated_s``)."""
    flushed: bool = False
    """The parser's pending state was flushed at ``pos`` (nothing is pending)."""
    idle_since_s: float = 0.0
    """Clock time of the last new complete line (or of the open)."""
    settled: tuple[int, int] | None = None
    """``(size, mtime_ns)`` when last read, if settled (see ``discovery.settled``); None: read
    it on the next scan."""
    backlog_end: int = 0
    """The file's size when it was opened: the bytes written before it was followed (see
    ``backlog``)."""
    backlog_read_s: float | None = None
    """Clock time a read first reached ``backlog_end``; None before."""
    orphan: Orphan | None = None
    """Set once the file left its globs: it is followed through ``fd`` until quiet."""
    stale: bool = False
    """A read failed after the parser saw lines that were not committed: the in-memory state
    is to be rebuilt from the store (a replay through ``fd``) before the next read."""
    unended_bytes: int = 0
    """Bytes after the last newline when the last read reached the file's end: a line still
    being written (a tqdm bar redraws on one line until a record ends it: a Lightning epoch's
    bar can be megabytes), not counted as lag (:attr:`FilePosition.lag_bytes`)."""
    binary: str | None = None
    """Why the file looks binary (:func:`inputs.binary_reason` of its first bytes: a
    checkpoint or a ``.gz`` under a broad glob), or None. It is read all the same (a real log
    with garbage at its start loses nothing, docs/RELIABILITY.md scenario 10), but what
    follows its last newline is no line to wait for."""

    @property
    def left_globs(self) -> bool:
        """Whether the file is followed through its descriptor only (renamed away, deleted)."""
        return self.orphan is not None


@dataclass(frozen=True, slots=True)
class FilePosition:
    """How far one followed file has been read, for metrics and ``ckpt-advisor status``.

    ``size_bytes - offset_bytes`` less ``unended_bytes`` is the lag: bytes written but not yet
    read. ``unended_bytes``: the last line, without its newline yet, as the last read found it
    (it stays unread until its newline arrives or its writer is gone, and is no lag: a live
    job's progress bar is such a line all the time). ``last_read_s`` is the Unix time new
    bytes were last read from the file: by this process, else as the store remembers it (an
    earlier process's last commit); None if it was never read. ``binary``: why the file looks
    binary, or None.
    """

    job: str
    path: str
    offset_bytes: int
    size_bytes: int
    last_read_s: float | None
    binary: str | None = None
    unended_bytes: int = 0

    @property
    def lag_bytes(self) -> int:
        """Bytes behind the end of the file but the last line still being written (never
        negative; 0 for a file that looks binary: its bytes after its last newline are no line
        that is being written)."""
        behind = self.size_bytes - self.offset_bytes - self.unended_bytes
        return 0 if self.binary else max(0, behind)
