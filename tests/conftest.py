"""Suite-wide options: ``@pytest.mark.slow`` tests run only when asked (``pytest -m slow``).

This hook is the one mechanism: the default run shows them as skipped with the reason (no
``-m`` in ``addopts``), and any ``-m`` expression decides for itself (``-m slow`` runs only them,
``-m "slow or not slow"`` everything)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.pg import PgServer


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip slow tests unless a ``-m`` expression selects tests by marker."""
    if config.option.markexpr:
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# -- a real PostgreSQL server, once per session (tests/pg.py) ------------------------------


def pytest_report_header(config: pytest.Config) -> str:
    """One line on whether the PostgreSQL tests can run here."""
    from tests import pg

    why = pg.unavailable()
    return f"postgresql: {why}; the PostgreSQL tests skip" if why else f"postgresql: {pg.bindir()}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (skips the test where none can run)."""
    from tests import pg

    why = pg.unavailable()
    if why:
        pytest.skip(f"PostgreSQL tests skip: {why}")
    server = pg.start_server()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh database on the session's server, owned by the test role: its URL (password in
    ``tests.pg.ROLE_PASSWORD``; the server is started again if a test stopped it)."""
    if subprocess.run(
        [str(pg_server.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(pg_server.port)],
        capture_output=True,
    ).returncode:
        pg_server.start()
    return pg_server.database()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each store test runs on both backends."""
    return str(request.param)


@pytest.fixture
def store_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str | Path:
    """Where a test's store lives: a SQLite file in ``tmp_path``, or a fresh PostgreSQL
    database (``open_store(store_target, password=store_password)``)."""
    if backend == "sqlite":
        return tmp_path / "s.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store_password(backend: str) -> str | None:
    """The password the test role connects with (None for SQLite)."""
    from tests import pg

    return pg.ROLE_PASSWORD if backend == "postgresql" else None
