"""A real PostgreSQL server for the tests: one per test session, a fresh database per test.

Debian's ``postgresql`` package gives ``initdb`` and ``pg_ctl`` under
``/usr/lib/postgresql/<version>/bin``; the server refuses to run as root, so under root it runs
as the package's ``postgres`` account (``runuser``), with its data in a temporary directory that
account owns, on a free loopback port, with password (SCRAM) authentication over TCP so that a
wrong password is refused as in production. Where no server can be started the PostgreSQL
tests skip, with one line saying why (:func:`unavailable`).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SUPERUSER_PASSWORD = "pg-test-superuser"
ROLE = "ckpt"
"""The role the tests' agents connect as (owner of each test database)."""
ROLE_PASSWORD = "ckpt-test-secret"
PASSWORD_ENV = "CKPT_ADVISOR_DB_PASSWORD"


def bindir() -> Path | None:
    """The newest installed server's binaries, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running test server; :meth:`database` makes a fresh database owned by :data:`ROLE`."""

    bin: Path
    root: Path
    port: int = field(default_factory=_free_port)
    _count: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(a) for a in args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        """initdb (password auth over TCP) and start."""
        pwfile = self.root / "pw"
        pwfile.write_text(SUPERUSER_PASSWORD + "\n")
        if os.geteuid() == 0:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run(
            self.bin / "initdb", "-D", str(self.data), "-U", "postgres", "--pwfile", str(pwfile),
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        self.start()
        self.sql(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{ROLE_PASSWORD}'")

    def start(self) -> None:
        """Start the server (again) on its port."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(self.bin / "pg_ctl", "-D", str(self.data), "-o", options, "-l",
                  str(self.root / "log"), "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as if it crashed)."""
        self._run(self.bin / "pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        """Stop the server as if it crashed and delete its directory (data, socket, log)."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run ``statement`` as the superuser; its output."""
        out = self._run(
            self.bin / "psql", "-h", str(self.root), "-p", str(self.port), "-U", "postgres",
            "-d", database, "-v", "ON_ERROR_STOP=1", "-Atc", statement,
        )  # fmt: skip
        return out.stdout.strip()

    def database(self) -> str:
        """A new empty database owned by :data:`ROLE`; its URL (no password in it)."""
        name = f"t{os.getpid()}_{next(self._count)}"
        self.sql(f"CREATE DATABASE {name} OWNER {ROLE}")
        return self.url(name)

    def url(self, database: str, role: str = ROLE) -> str:
        """``postgresql://role@127.0.0.1:PORT/database``."""
        return f"postgresql://{role}@127.0.0.1:{self.port}/{database}"


def unavailable() -> str | None:
    """Why no test server can run here, or None."""
    if bindir() is None:
        return "PostgreSQL is not installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres account to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as postgres"
    return None


_REAPER = """
import os, select, shutil, subprocess, sys
pid, pg_ctl, data, root, *runuser = sys.argv[1:]
select.select([os.pidfd_open(int(pid))], [], [])
if os.path.isdir(data):
    subprocess.run([*runuser, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], check=False)
shutil.rmtree(root, ignore_errors=True)
"""
"""Waits for the test process to end, then stops its server and deletes its directory: what
:meth:`PgServer.remove` does at the end of a session that was killed before it got there
(``pg_ctl`` detaches the server, so nothing else would stop it)."""


def start_server() -> PgServer:
    """A new server in a temporary directory (the caller stops it; a reaper in its own session
    does, should this process be killed first)."""
    found = bindir()
    assert found is not None
    root = Path(tempfile.mkdtemp(prefix="ckpt-pg-"))
    if os.geteuid() == 0:
        os.chown(root, pwd.getpwnam("postgres").pw_uid, -1)
    server = PgServer(found, root)
    runuser = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    pid, pg_ctl = str(os.getpid()), str(found / "pg_ctl")
    reaper = [sys.executable, "-c", _REAPER, pid, pg_ctl, str(server.data), str(root), *runuser]
    # not Popen: the reaper outlives this process by design
    os.posix_spawn(sys.executable, reaper, os.environ, setsid=True, file_actions=devnull)
    server.init()
    return server
