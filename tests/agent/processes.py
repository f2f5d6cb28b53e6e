"""Shared helpers for tests that run the daemon as a subprocess or wait on its threads."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def until(cond: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    """Poll ``cond`` every 50 ms until it holds (True) or ``timeout_s`` passed (its last value)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def wait_started(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    """Read the daemon's stderr until it logs that it is running (signal handlers installed)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    for line in proc.stderr:
        if "ckpt-advisor starting" in line:
            return
        assert time.monotonic() < deadline, "daemon did not start"
    raise AssertionError(f"daemon exited with {proc.wait()} before starting")


def start_daemon(config: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``ckpt-advisor run --config CONFIG`` as a subprocess, returned once it is running; the
    rest of its stderr is read (and dropped) by a thread, so it never blocks on a full pipe."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckpt_advisor.agent", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    wait_started(proc)
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
    return proc


_CLI_THEN_MODULES = (
    "import json, sys\n"
    "from ckpt_advisor.agent.cli import main\n"
    "try:\n"
    "    main(sys.argv[2:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(json.dumps(sorted(m for m in sys.argv[1].split(',') if m in sys.modules)))\n"
)


def cli_imports(
    args: list[str], modules: list[str], cwd: Path
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``ckpt-advisor ARGS`` in a fresh interpreter (in ``cwd``); return the finished
    process and which of ``modules`` it had imported by the end (sorted)."""
    out = subprocess.run(
        [sys.executable, "-c", _CLI_THEN_MODULES, ",".join(modules), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return out, list(json.loads(out.stdout.splitlines()[-1]))


class RunProcess:
    """A ``ckpt-advisor run --config CONFIG ARGS…`` subprocess whose stderr goes to the file
    ``stderr_name`` beside its config (appended to when it is started again)."""

    def __init__(
        self, config: Path, env: dict[str, str], *args: str, stderr_name: str = "daemon.stderr"
    ) -> None:
        self.config = config
        self.env = env
        self.args = args
        self.stderr_path = config.parent / stderr_name
        self.start()

    def start(self) -> None:
        """Start the process (again)."""
        self._stderr = self.stderr_path.open("a")
        cmd = [sys.executable, "-m", "ckpt_advisor.agent", "run", "--config", str(self.config)]
        self.proc = subprocess.Popen([*cmd, *self.args], env=self.env, stderr=self._stderr)

    @property
    def stderr(self) -> str:
        """Everything it logged so far."""
        return self.stderr_path.read_text()

    def wait_log(self, text: str, timeout_s: float = 30.0) -> None:
        """Wait until ``text`` is logged; AssertionError (with the log) when the process exits
        without it or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            exited = self.proc.poll() is not None  # before the read: an exit's last lines count
            if text in self.stderr:
                return
            assert not exited, f"exited {self.proc.returncode} without {text!r}:\n{self.stderr}"
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not logged:\n{self.stderr}")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._stderr.close()

    def stop(self) -> int:
        """SIGTERM (unless it already exited) and its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self._stderr.close()
        return code
