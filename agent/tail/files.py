"""How long a file is followed, from its open to its release.

:class:`FollowedFiles` holds the open files by identity and decides what happens to each: it is
read (closed on a read error, to be opened again by name; kept and marked stale on a store
error, to be replayed through the same descriptor); once it left its globs it is followed
through its descriptor as an :class:`~ckpt_advisor.agent.tail.identity.Orphan`, like
``tail -F``, until it has been quiet for ``rotated_idle_s``, then *released*: read to its end,
its parser flushed, closed (docs/RELIABILITY.md scenario 29). At shutdown every such file is
released, quiet or not; at start, files rotated away while nothing watched them are taken up.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Iterable
from datetime import datetime

from ckpt_advisor.agent.store import Store
from ckpt_advisor.agent.tail import discovery, identity
from ckpt_advisor.agent.tail.discovery import FileKey, WatchSpec
from ckpt_advisor.agent.tail.followed import FilePosition, OpenFile
from ckpt_advisor.agent.tail.reader import Reader, ScanStats
from ckpt_advisor.agent.units import format_duration

log = logging.getLogger(__name__)


class FollowedFiles:
    """The open files of a tailer, by ``(st_dev, st_ino)``.

    Args:
        store: where a released deleted file's record is forgotten.
        reader: opens and reads the files.
        clock: the current aware UTC datetime (how long an orphan has been quiet).
        rotated_idle_s: how long a file that left its globs is followed after its size last
            changed; 0 releases it as soon as it is read to its end.
    """

    def __init__(
        self,
        store: Store,
        reader: Reader,
        *,
        clock: Callable[[], datetime],
        rotated_idle_s: float,
    ) -> None:
        self._store = store
        self._reader = reader
        self._clock = clock
        self._rotated_idle_s = rotated_idle_s
        self.by_key: dict[FileKey, OpenFile] = {}
        self.dropped = False
        """A file was closed on a read error since the caller last cleared this: the globs
        are to be searched (it is opened again by its name)."""

    def close_all(self) -> None:
        """Close every file, reading nothing more (what a crash leaves)."""
        for f in self.by_key.values():
            os.close(f.fd)
        self.by_key.clear()

    def close(self, key: FileKey) -> None:
        """Close one file, reading nothing more."""
        os.close(self.by_key.pop(key).fd)

    def positions(self) -> list[FilePosition]:
        """The read position and current size of every file, sorted by path, with when it was
        last read and why it looks binary."""
        out = []
        for f in sorted(self.by_key.values(), key=lambda f: f.path):
            try:
                size = os.fstat(f.fd).st_size
            except OSError:
                continue
            position = (f.spec.job, f.path, f.state.offset, size, f.last_read_s, f.binary)
            out.append(FilePosition(*position, f.unended_bytes))
        return out

    def read(self, key: FileKey, stats: ScanStats, st: os.stat_result | None = None) -> None:
        """Read one file's new lines (see :meth:`Reader.read`).

        If the file cannot be read, it is closed (and :attr:`dropped` set): one under its
        globs is opened again by name at the next discovery (a stale NFS handle heals so), one
        that left them is lost. If the store fails, the file stays open and is marked
        ``stale``: the parser has seen lines that were not committed, so the next read replays
        from the store.

        ``st``: the file's ``stat`` taken before the read; if its mtime is settled, the next
        scans skip the file while its size and mtime stay the same.

        Raises:
            OSError: the file could not be read (it is closed).
            StoreError: the store cannot be written (the file stays open, stale).
        """
        self._read(key, stats, st, final=False)

    def left_globs(self, key: FileKey, stats: ScanStats) -> None:
        """A discovery did not find the file under its globs (renamed away, deleted, a symlink
        re-pointed): follow it through its descriptor, read it if it changed, release it once
        quiet. Never raises for the file (it is logged and closed if it cannot be read)."""
        f = self.by_key[key]
        try:
            st = os.fstat(f.fd)
        except OSError as exc:
            log.warning("cannot follow %s: %s", f.path, exc.strerror or exc)
            self.close(key)
            return
        if f.orphan is None:
            self._orphan(f, st)
        stats.files += 1
        self.read_orphan(key, st, stats)

    def read_orphan(self, key: FileKey, st: os.stat_result, stats: ScanStats) -> None:
        """Read a file that left its globs (``st`` its ``fstat``) if it changed; release it
        once it has been quiet for ``rotated_idle_s``. Never raises for the file."""
        f = self.by_key[key]
        orphan = f.orphan
        if orphan is None:
            raise ValueError(f"{f.path} is under its globs")
        try:
            if self._reader.due(f, st):
                self.read(key, stats, st)
            if orphan.quiet_s(st.st_size, self._clock().timestamp()) >= self._rotated_idle_s:
                self._release(key, stats)
        except OSError as exc:
            log.warning("cannot read %s: %s; lines written to it from now on are lost", f.path, exc)

    def drain(self) -> None:
        """At shutdown: read every file that left its globs (noticed by a scan yet or not) to
        its end through its descriptor, flush its parser and release it; nothing could read a
        deleted one later. Never raises: a file that cannot be read to its end is logged, with
        where its stored lines stop."""
        stats = ScanStats()
        for key, f in list(self.by_key.items()):
            try:
                if f.orphan is None:
                    if _leads_to(f.path, key):
                        continue
                    self._orphan(f, os.fstat(f.fd))
                self._release(key, stats)
            except Exception as exc:
                log.error(
                    "cannot read %s to its end at shutdown (%s): lines after byte %d are not "
                    "stored",
                    f.path,
                    exc,
                    f.state.offset,
                )

    def recover_rotated(self, specs: Iterable[WatchSpec], found: Collection[FileKey]) -> None:
        """At start: files rotated away while nothing watched them (see
        :func:`identity.rotated_while_down`; ``found``: the files a discovery just found) are
        followed from their stored offset, as files that left their globs, quiet since their
        last write (their mtime). One whose first bytes changed meanwhile (truncated and
        rewritten, or a new file with the inode, in the same directory) is read from 0: none
        of it was stored. They are read by the next :meth:`left_globs`."""
        for spec, path, known in identity.rotated_while_down(self._store, specs, found):
            try:
                f = self._reader.open(spec, path, live=False, name=known.path)
            except OSError:
                continue
            key = (f.state.dev, f.state.ino)
            if key in found or key in self.by_key:
                os.close(f.fd)
                continue
            st = os.fstat(f.fd)  # an open descriptor: fstat does not fail
            age_s = max(0.0, time.time() - st.st_mtime)
            f.orphan = identity.Orphan(self._clock().timestamp() - age_s, st.st_size)
            self.by_key[key] = f
            log.info("following %s (was %s) from byte %d", path, known.path, f.state.offset)

    def _read(
        self, key: FileKey, stats: ScanStats, st: os.stat_result | None, *, final: bool
    ) -> None:
        f = self.by_key[key]
        try:
            self._reader.read(f, stats)
            if final:
                self._reader.flush_final(f, stats)
        except OSError:
            self.close(key)
            self.dropped = True
            raise
        except BaseException:
            f.stale = True
            raise
        f.settled = discovery.settled(st) if st is not None else None

    def _orphan(self, f: OpenFile, st: os.stat_result) -> None:
        """``f`` left its globs: follow it through its descriptor from now on."""
        f.orphan = identity.Orphan(self._clock().timestamp(), st.st_size)
        name = identity.current_name(f.fd, f.path)
        log.info(
            "%s left its globs (now %s): reading it through its open descriptor until it has "
            "been idle for %s",
            f.path,
            name,
            format_duration(self._rotated_idle_s),
        )
        f.path = name

    def _release(self, key: FileKey, stats: ScanStats) -> None:
        """Done with a file that left its globs: read it to its end through the descriptor,
        flush its parser (no line will follow: a pending failure is complete), close it; a
        deleted file's record is forgotten (its inode may be reused).

        Raises:
            OSError: the file could not be read to its end (it is closed).
            StoreError: the store cannot be written (the file stays open, to be read again).
        """
        f = self.by_key[key]
        self._read(key, stats, None, final=True)
        try:
            deleted = identity.is_deleted(f.fd)
        finally:
            self.close(key)
        log.info("released %s, read to byte %d", f.path, f.state.offset)
        if deleted and f.state.id:
            self._store.forget_file(f.state.id)


def _leads_to(path: str, key: FileKey) -> bool:
    """Whether ``path`` still names the file ``key``."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == key
