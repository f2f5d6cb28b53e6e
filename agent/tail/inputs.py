"""What a path under a glob (or named on the command line) is, before any of it is read.

Every command that reads logs asks the same three questions, answered here once:

* **what kind of path is it** (:func:`path_kind`): only regular files are read. A FIFO would
  block its reader until a writer came (and a reader would steal its lines), a directory or a
  socket has no lines, a dangling symlink or a symlink loop leads nowhere; each is skipped with
  one warning naming it (``check-config`` lists them per glob). :func:`open_regular` opens
  without ever blocking on a FIFO, even one swapped in after the check;
* **does it look binary** (:func:`binary_reason`): a checkpoint or a core dump matched by a
  broad glob gives no events, and says so instead of "0 events";
* **which of its lines may be read** (:data:`MAX_LINE_BYTES`, :func:`bounded_lines`): one limit
  for the daemon, ``ingest`` and ``parse`` (docs/RELIABILITY.md scenario 9): a longer line is
  skipped and counted, memory stays bounded whatever a file holds.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

MAX_LINE_BYTES = 1 << 20
"""Longer lines (without their newline) are skipped and counted, everywhere a log is read."""


def skipped_line(path: str, lineno: int, length: int) -> str:
    """The warning for line ``lineno`` of ``path``, ``length`` bytes long, skipped as longer than
    :data:`MAX_LINE_BYTES` (the daemon's log, ``ingest`` and ``parse`` say it alike)."""
    limit = f"longer than {MAX_LINE_BYTES >> 20} MiB: the limit everywhere logs are read"
    return f"{path}:{lineno}: line of {length:,} bytes skipped ({limit})"


SKIP_CHUNK_BYTES = 1 << 20
"""An overlong line is read past in pieces of this size."""

BINARY_SNIFF_BYTES = 8192
"""How much of a file's start :func:`binary_reason` looks at (git's heuristic reads as much)."""

REGULAR = "file"
"""The :func:`path_kind` of a regular file (or a symlink to one): the only kind that is read."""

_TEXT_BYTES = bytes([7, 8, 9, 10, 12, 13, 27, *range(0x20, 0x100)])
"""Bytes text may hold (the rest are control bytes: ``file(1)``'s notion of text)."""


class NotRegularFile(OSError):
    """The path is not a regular file; ``kind`` is its :func:`path_kind`."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, describe(kind), path)
        self.kind = kind


class Line(NamedTuple):
    """One line of :func:`bounded_lines`: its 1-based number and its bytes without the newline,
    or ``data`` None for a line longer than :data:`MAX_LINE_BYTES` (``length`` bytes)."""

    lineno: int
    data: bytes | None
    length: int


def path_kind(path: str) -> str:
    """What ``path`` is: :data:`REGULAR` (``"file"``), or ``"FIFO"``, ``"directory"``,
    ``"socket"``, ``"device"``, ``"dangling symlink"``, ``"symlink loop"``, ``"missing"``
    (nothing there) or ``"unreadable"`` (its directory cannot be searched). Symlinks are
    followed; nothing is opened."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        if exc.errno == errno.ENOENT:
            return "dangling symlink" if os.path.islink(path) else "missing"
        return "unreadable"
    return _kind_of_mode(st.st_mode)


def _kind_of_mode(mode: int) -> str:
    if stat.S_ISREG(mode):
        return REGULAR
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def describe(kind: str) -> str:
    """A :func:`path_kind` as words for a message: ``a FIFO (named pipe), not a regular file``."""
    words = {
        "FIFO": "a FIFO (named pipe)",
        "missing": "no such file",
        "unreadable": "cannot be reached (permission denied on a directory)",
        "symlink loop": "a symlink loop",
    }
    what = words.get(kind, f"a {kind}")
    return what if kind in ("missing", "unreadable") else f"{what}, not a regular file"


def open_regular(path: str) -> int:
    """Open ``path`` read-only and return the descriptor, if it is a regular file.

    Opened with ``O_NONBLOCK`` (no effect on a regular file's reads): a FIFO that replaced the
    file after a check would otherwise block the open until a writer came.

    Raises:
        NotRegularFile: it is a FIFO, a directory, a device, a dangling symlink or a loop.
        OSError: it cannot be opened.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if (kind := path_kind(path)) in ("dangling symlink", "symlink loop"):
            raise NotRegularFile(path, kind) from None
        raise
    try:
        kind = _kind_of_mode(os.fstat(fd).st_mode)
        if kind != REGULAR:
            raise NotRegularFile(path, kind)
    except BaseException:
        os.close(fd)
        raise
    return fd


def binary_reason(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` (up to :data:`BINARY_SNIFF_BYTES`) looks
    binary, or None when it may be text.

    A file looks binary when its head holds NUL bytes *and* other control bytes or bytes that
    are not UTF-8 (a checkpoint, a core dump, a compressed log). NUL bytes alone do not make a
    log binary: a file copied while its writer kept its offset (logrotate ``copytruncate``) or
    a crash before the data reached the disk leaves runs of NUL inside real text.
    """
    if b"\0" not in head:
        return None
    rest = head.replace(b"\0", b"")
    control = len(rest.translate(None, _TEXT_BYTES))
    undecodable = rest.decode("utf-8", "replace").count("\ufffd") > 1  # one: a cut last char
    if not control and not undecodable:
        return None
    newline = "" if b"\n" in head else ", no newline"
    return f"NUL bytes{newline} in its first {len(head):,} bytes"


def bounded_lines(fh: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """The lines of ``fh`` (a binary file), each without its ``\\n``; a line longer than
    ``limit`` bytes is read past in pieces and given as ``data=None`` with its length, so
    memory stays about ``limit`` whatever the file holds. A last line without a newline is a
    line."""
    lineno = 0
    while True:
        data = fh.readline(limit + 1)
        if not data:
            return
        lineno += 1
        if data.endswith(b"\n"):
            yield Line(lineno, data[:-1], len(data) - 1)
        elif len(data) <= limit:
            yield Line(lineno, data, len(data))  # the last line, without its newline
        else:
            length = len(data)
            while data and not data.endswith(b"\n"):
                data = fh.readline(SKIP_CHUNK_BYTES)
                length += len(data)
            yield Line(lineno, None, length - data.endswith(b"\n"))
