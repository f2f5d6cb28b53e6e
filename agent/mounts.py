"""Which filesystem a path is on, from the kernel's mount table (``/proc/self/mounts``).

Shared filesystems (NFS, Lustre, GPFS, CIFS, …) deliver no inotify events for writes made on
other hosts, and SQLite's locking is unsafe on them; the daemon polls files there and refuses to
keep its store there. Format of the table: proc(5), fields ``device mountpoint fstype options``
with spaces and tabs in names escaped as octal (``\\040``, ``\\011``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MOUNT_TABLE = "/proc/self/mounts"
SHARED_FSTYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "cifs",
        "smb3",
        "smbfs",
        "beegfs",
        "ceph",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.sshfs",
        "9p",
        "afs",
        "panfs",
        "wekafs",
        "fuse.juicefs",
    }
)
"""Filesystems where other hosts write (no inotify for their writes) and locks are unreliable."""


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: str | os.PathLike[str], mount_table: str = MOUNT_TABLE) -> str | None:
    """The type of the filesystem holding ``path``, from the
    longest mount point that contains it; None when the table cannot be read."""
    try:
        lines = Path(mount_table).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    target = Path(os.path.abspath(path))
    best: tuple[int, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = Path(_unescape(fields[1]))
        if (target == mount or mount in target.parents) and (
            best is None or len(mount.parts) >= best[0]
        ):
            best = (len(mount.parts), fields[2])
    return None if best is None else best[1]


def is_shared(fstype: str) -> bool:
    """True for network/cluster filesystems (see :data:`SHARED_FSTYPES`)."""
    return fstype in SHARED_FSTYPES or fstype.startswith("nfs")
