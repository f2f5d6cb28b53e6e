"""Is this the file we knew? Identity, rotation, truncation and inode reuse.

A file is known by device + inode + a hash of its first bytes (:data:`HEAD_BYTES`), never by
name: a renamed, truncated or recreated file is recognised whatever it is called, a symlink and
its target are one file, and a new file that got a deleted file's inode does not inherit its
offset (docs/RELIABILITY.md scenarios 3-7 and 12).

A file that leaves its globs (renamed away by logrotate, deleted, left behind by a re-pointed
symlink) may still have a writer: logrotate's ``create`` mode and a rotated stdout leave the
trainer writing to its old descriptor. Such a file is an :class:`Orphan`: like ``tail -F``, it
is read through our open descriptor, whatever its new name, until it has been quiet for the
configured time (scenario 29).
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, replace

from ckpt_advisor.agent.store import FileState, Store
from ckpt_advisor.agent.tail.discovery import FileKey, WatchSpec

log = logging.getLogger(__name__)

HEAD_BYTES = 1024
"""How many leading bytes identify a file (with its device and inode)."""


def head_hash(fd: int, length: int) -> str:
    """The identifying hash of the file's first ``length`` bytes (BLAKE2b, 16 bytes, hex)."""
    return hashlib.blake2b(os.pread(fd, length, 0), digest_size=16).hexdigest()


def identify(store: Store, fd: int, st: os.stat_result, job: str, path: str) -> FileState:
    """The stored state of the open file ``fd`` (``st`` its ``fstat``), named ``path``, or a new
    one at offset 0. A stored row for its inode whose head differs, or whose offset lies past
    its end, belonged to another file (inode reuse, or the file rewritten while nobody read
    it): the file is read from 0 under that row, which keeps the old identity until this
    state's first commit replaces it. Were the row forgotten first, a kill before that commit
    would leave a file the store knows nothing of, lost for good if it is rotated away before
    the next start (docs/RELIABILITY.md scenarios 7 and 29). Other such rows are forgotten.

    Raises:
        OSError: the file cannot be read.
        StoreError: the store cannot be read or written.
    """
    stale: FileState | None = None
    for known in store.find_files(job, st.st_dev, st.st_ino):
        same = known.head_len <= st.st_size and head_hash(fd, known.head_len) == known.head_hash
        if same and known.offset <= st.st_size:
            return replace(known, path=path)
        if stale is None and known.shared_with is None:
            stale = known
        else:
            store.forget_file(known.id)
    if st.st_size >= HEAD_BYTES and (shared := _fleet_copy(store, fd, st, job, path)):
        if stale is not None:  # the file is another agent's row now
            store.forget_file(stale.id)
        return shared
    head_len = min(HEAD_BYTES, st.st_size)
    new = FileState(
        id=0,
        job=job,
        path=path,
        dev=st.st_dev,
        ino=st.st_ino,
        head_hash=head_hash(fd, head_len),
        head_len=head_len,
        offset=0,
        lineno=0,
        truncations=0,
    )
    if stale is None:
        return new
    log.info("%s: inode %d held another file before; reading from 0", path, st.st_ino)
    return replace(new, id=stale.id, truncations=stale.truncations)


def _fleet_copy(store: Store, fd: int, st: os.stat_result, job: str, path: str) -> FileState | None:
    """Fleet mode (scenario 32): the state of a file that another agent's file of the same job
    is, by its first :data:`HEAD_BYTES` (a shared filesystem both agents' globs reach): marked
    ``shared_with`` that agent while it is alive (this agent reads none of it), or adopted
    from an agent that is away, to read on from its offset; None when no other agent has it."""
    digest = head_hash(fd, HEAD_BYTES)
    owner = store.fingerprint_owner(job, HEAD_BYTES, digest)
    if owner is None:
        return None
    state = replace(owner.state, path=path, dev=st.st_dev, ino=st.st_ino)
    if owner.alive:
        return replace(state, id=0, shared_with=f"agent {owner.agent_name} ({owner.state.path})")
    if not store.adopt_file(owner.state.id, owner.agent_name, st.st_dev, st.st_ino, path):
        return replace(state, id=0, shared_with=f"an agent that took it from {owner.agent_name}")
    log.warning(
        "%s: read by agent %s, which is away, up to byte %d; reading on from there",
        path,
        owner.agent_name,
        owner.state.offset,
    )
    return state


def truncated(fd: int, state: FileState, pos: int, size: int) -> bool:
    """Whether the file was truncated (and maybe rewritten) under us: shorter than what was
    read (``pos``) or committed, or its first bytes changed (scenarios 5 and 6)."""
    if size < pos or size < state.offset:
        return True
    return head_hash(fd, state.head_len) != state.head_hash


def rewound(fd: int, state: FileState, size: int) -> FileState:
    """``state`` of a truncated file read again from 0: offset 0, the head of what it holds."""
    head_len = min(HEAD_BYTES, size)
    return replace(state, offset=0, lineno=0, head_len=head_len, head_hash=head_hash(fd, head_len))


def grown_head(fd: int, state: FileState, offset: int) -> FileState:
    """``state`` with its identifying head grown with the committed bytes, up to
    :data:`HEAD_BYTES` (a file is first seen with a short head)."""
    if state.head_len < HEAD_BYTES and offset > state.head_len:
        head_len = min(HEAD_BYTES, offset)
        return replace(state, head_len=head_len, head_hash=head_hash(fd, head_len))
    return state


@dataclass
class Orphan:
    """What is known of a followed file that has no name under its globs any more: since when
    (clock time, Unix seconds) its size has not changed, and that size."""

    quiet_since_s: float
    size_bytes: int

    def quiet_s(self, size_bytes: int, now_s: float) -> float:
        """Seconds the file has been quiet, given its size ``size_bytes`` at ``now_s``."""
        if size_bytes != self.size_bytes:
            self.size_bytes, self.quiet_since_s = size_bytes, now_s
        return now_s - self.quiet_since_s


def current_name(fd: int, fallback: str) -> str:
    """The open file's present name, where the platform tells it (Linux ``/proc/self/fd``:
    ``/x/train.log.1``, or ``/x/train.log (deleted)``); else ``fallback``."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return fallback


def is_deleted(fd: int) -> bool:
    """Whether the open file has no name left (unlinked while open)."""
    return os.fstat(fd).st_nlink == 0


def rotated_while_down(
    store: Store, specs: Iterable[WatchSpec], followed: Collection[FileKey]
) -> Iterator[tuple[WatchSpec, str, FileState]]:
    """Files rotated away while nothing watched them (scenario 4): each remembered file of the
    specs' jobs whose stored name matches its globs but that is not among ``followed``, found
    by its inode in its old directory, as ``(spec, present path, stored state)``. The caller
    opens it and checks that its head still matches (the inode may have been reused)."""
    by_dir: dict[str, dict[int, str]] = {}
    for spec in specs:
        for known in store.files(spec.job):
            if (known.dev, known.ino) in followed or not any(
                fnmatch.fnmatch(known.path, p) for p in spec.patterns
            ):
                continue
            folder = os.path.dirname(known.path)
            if folder not in by_dir:
                try:
                    by_dir[folder] = {e.inode(): e.path for e in os.scandir(folder)}
                except OSError:
                    by_dir[folder] = {}
            path = by_dir[folder].get(known.ino)
            if path is not None:
                yield spec, path, known
