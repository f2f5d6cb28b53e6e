"""Secrets from the environment or systemd credentials, never from the config file.

systemd's ``LoadCredential=NAME:/etc/ckpt-advisor/NAME`` hands a service the file
``$CREDENTIALS_DIRECTORY/NAME``: readable by the service alone, in no ``ps`` output, no
``/proc/*/environ`` and no unit file. A variable of the same name is looked at first (a shell,
a container).
"""

from __future__ import annotations

import os
from pathlib import Path


def secret(name: str) -> tuple[str | None, str]:
    """The secret called ``name`` and where it was found: ``$NAME``, else the credential file
    ``$CREDENTIALS_DIRECTORY/NAME`` (surrounding whitespace stripped); ``(None, "$NAME")`` when
    neither holds one."""
    value = os.environ.get(name, "").strip() or None
    where = f"${name}"
    if value is None and (creds := os.environ.get("CREDENTIALS_DIRECTORY")):
        path = Path(creds) / name
        if path.is_file():
            value = path.read_text(encoding="utf-8").strip() or None
            where = str(path)
    return value, where
