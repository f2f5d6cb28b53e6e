"""The PostgreSQL test server does not outlive a killed test run (tests/pg.py's reaper)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import pg

ROOT = Path(__file__).parents[1]

_KILLED_RUN = """
import os, sys
sys.path.insert(0, sys.argv[1])
from tests import pg
server = pg.start_server()
print(server.root, server.port, flush=True)
os.kill(os.getpid(), 9)
"""


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(pg.unavailable() is not None, reason=str(pg.unavailable()))
def test_server_of_a_killed_test_process_is_stopped_and_removed() -> None:
    """A process that started a test server and was SIGKILLed leaves no server running and no
    directory behind, within seconds."""
    run = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, str(ROOT)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    root_text, port_text = run.stdout.split()
    root, port = Path(root_text), int(port_text)
    deadline = time.monotonic() + 30
    while (root.exists() or _listening(port)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _listening(port)
    assert not root.exists()
