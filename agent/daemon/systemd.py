"""systemd's readiness and watchdog protocol (sd_notify), spoken over its datagram socket.

The protocol (sd_notify(3), "Notes"): send newline-separated ``KEY=VALUE`` lines as one datagram
to the ``AF_UNIX`` socket named by ``$NOTIFY_SOCKET`` (a leading ``@`` means the abstract
namespace). ``$WATCHDOG_USEC`` (with ``$WATCHDOG_PID`` naming this process, when set) asks for a
``WATCHDOG=1`` at least that often; systemd recommends every half of it. Outside systemd the
variables are unset and every call does nothing. It is implemented here rather than taken from
PyPI because ``systemd-python`` needs libsystemd headers and a C compiler to install, and
``sdnotify`` has had no release since 2017; the protocol is a dozen lines.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)


def _socket_address(value: str) -> str | None:
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None  # vsock addresses (vsock:CID:PORT) are for VMs; not used on a head node


class SystemdNotifier:
    """Sends ``READY=1``, ``STATUS=…``, ``WATCHDOG=1``, ``STOPPING=1`` to the service manager.

    Args:
        environ: where ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` are read
            (``os.environ`` by default).
        clock: monotonic seconds, for pacing watchdog pings.

    Sending never raises: a lost datagram is logged once at WARNING and the daemon goes on.
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        env = os.environ if environ is None else environ
        self._address = _socket_address(env.get("NOTIFY_SOCKET", ""))
        self._monotonic = clock
        self._last_ping_s = float("-inf")
        self._warned = False
        self.watchdog_interval_s: float | None = None
        """Seconds between ``WATCHDOG=1`` pings (half of ``WatchdogSec=``), or None if off."""
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval_s = int(usec) / 2e6

    @property
    def enabled(self) -> bool:
        """True when running under a service manager that listens (``$NOTIFY_SOCKET`` set)."""
        return self._address is not None

    def notify(self, **fields: str | int) -> bool:
        """Send one datagram of ``KEY=VALUE`` lines; returns True if it was sent.

        Values are made single-line (a newline would start a new, forged field).
        """
        if self._address is None or not fields:
            return False
        text = "\n".join(f"{k}={' '.join(str(v).split())}" for k, v in fields.items())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(self._address)
                sock.sendall(text.encode("utf-8"))
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot notify systemd at $NOTIFY_SOCKET: %s", exc)
            return False
        return True

    def ready(self, status: str) -> bool:
        """``READY=1`` with a ``STATUS=`` line: start-up is complete."""
        return self.notify(READY=1, STATUS=status)

    def status(self, status: str) -> bool:
        """``STATUS=``: one line shown by ``systemctl status``."""
        return self.notify(STATUS=status)

    def stopping(self, status: str = "stopping") -> bool:
        """``STOPPING=1``: shutdown has begun."""
        return self.notify(STOPPING=1, STATUS=status)

    def extend_timeout(self, seconds: float) -> bool:
        """``EXTEND_TIMEOUT_USEC=``: a slow start (or stop) is still progressing."""
        return self.notify(EXTEND_TIMEOUT_USEC=int(seconds * 1e6))

    def watchdog(self) -> bool:
        """``WATCHDOG=1`` if the watchdog is on and half its period has passed since the last
        ping; returns True when a ping was sent. Call it only while the daemon is healthy."""
        if self.watchdog_interval_s is None:
            return False
        now_s = self._monotonic()
        if now_s - self._last_ping_s < self.watchdog_interval_s:
            return False
        self._last_ping_s = now_s
        return self.notify(WATCHDOG=1)
