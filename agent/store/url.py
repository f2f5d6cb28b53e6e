"""A PostgreSQL store's URL: checked, shown without its password, completed with one.

The config holds ``postgresql://user@host:5432/db?sslmode=verify-full`` and never a password
(it would end up in backups of /etc, in ``ps`` of an editor, in support tickets); the password
comes from the environment or a systemd credential (``[store] password_env``) and is added here,
for the driver only. Every message shows :func:`redact`'s form. Standard library only: the
config validates a URL without loading a database driver.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")
"""What a ``[store] url`` may start with (``postgresql+psycopg`` too: SQLAlchemy's spelling)."""


def is_url(target: object) -> bool:
    """Whether ``target`` (a ``[store]`` target) names a database server rather than a file."""
    return isinstance(target, str) and target.split(":", 1)[0].split("+")[0] in SCHEMES


def parse_url(url: str) -> str:
    """``url`` checked: a PostgreSQL scheme, a database name, no password.

    Returns:
        ``url`` unchanged.

    Raises:
        ValueError: another scheme, no database name, or a password in the URL (the message
            shows the URL without it).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme not in SCHEMES:
        raise ValueError(
            f"url {redact(url)!r}: must start with postgresql:// (a SQLite store is [store] path)"
        )
    if parts.password is not None:
        raise ValueError(
            f"url {redact(url)!r}: holds a password; put it in the variable or systemd "
            "credential named by [store] password_env instead"
        )
    if not parts.path.strip("/"):
        raise ValueError(f"url {redact(url)!r}: names no database (…:5432/DBNAME)")
    return url


def redact(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``), for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def driver_url(url: str, password: str | None) -> str:
    """The SQLAlchemy URL for psycopg 3 (``postgresql+psycopg://``) with ``password`` added."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':')[0]}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(scheme="postgresql+psycopg", netloc=netloc))
