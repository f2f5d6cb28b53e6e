"""A stand-in for systemd's notification socket: a real AF_UNIX datagram socket that records
every ``KEY=VALUE`` datagram a process sends to ``$NOTIFY_SOCKET`` (sd_notify(3))."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from types import TracebackType


class NotifyListener:
    """Binds an abstract-namespace socket; ``address`` is the ``NOTIFY_SOCKET`` value."""

    def __init__(self) -> None:
        name = f"ckpt-advisor-test-{uuid.uuid4().hex}"
        self.address = "@" + name
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind("\0" + name)
        self._sock.settimeout(0.1)
        self._lock = threading.Lock()
        self._messages: list[dict[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> NotifyListener:
        self._thread.start()
        return self

    def __exit__(
        self,
        _t: type[BaseException] | None,
        _e: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                continue
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
            with self._lock:
                self._messages.append(fields)

    @property
    def messages(self) -> list[dict[str, str]]:
        """Every datagram received so far, as a dict of its fields, in order."""
        with self._lock:
            return list(self._messages)

    def count(self, key: str) -> int:
        """How many datagrams carried ``key``."""
        return sum(key in m for m in self.messages)

    def wait_for(
        self, key: str, *, n: int = 1, timeout_s: float = 30.0, contains: str = ""
    ) -> dict[str, str]:
        """Wait until the ``n``-th datagram with ``key`` (whose value contains ``contains``)
        arrives; return it. Raises AssertionError on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            hits = [m for m in self.messages if key in m and contains in m[key]]
            if len(hits) >= n:
                return hits[n - 1]
            time.sleep(0.02)
        raise AssertionError(f"no {n}× {key} containing {contains!r} in {self.messages}")
