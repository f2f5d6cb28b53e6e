"""The shipped unit file passes systemd's own checks: `systemd-analyze verify` prints nothing
and `systemd-analyze security --offline=yes` scores 2.0 or lower. CI installs systemd
(scripts/check); the tests skip only where systemd-analyze cannot be installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).parents[2] / "systemd" / "ckpt-advisor.service"
EXEC = "/usr/local/bin/ckpt-advisor"
MAX_EXPOSURE = 2.0


@pytest.fixture
def analyze() -> str:
    """The systemd-analyze program. Missing: a failure in CI (scripts/check installs it there),
    a skip elsewhere, where it may not be installable."""
    path = shutil.which("systemd-analyze")
    if path is None:
        message = "systemd-analyze is not installed (scripts/check installs it as root via apt-get)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _unit_copy(tmp_path: Path) -> Path:
    """The unit with ExecStart= pointing at an executable that exists here: verify checks that
    the program exists, and /usr/local/bin/ckpt-advisor is where the install guide puts it."""
    program = tmp_path / "ckpt-advisor"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    text = UNIT.read_text()
    assert f"ExecStart={EXEC} " in text
    unit = tmp_path / "ckpt-advisor.service"
    unit.write_text(text.replace(f"ExecStart={EXEC} ", f"ExecStart={program} "))
    return unit


def test_systemd_analyze_verify_prints_nothing(tmp_path: Path, analyze: str) -> None:
    """`systemd-analyze verify` on the unit exits 0 and prints nothing at all."""
    out = subprocess.run(
        [analyze, "verify", str(_unit_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_systemd_analyze_security_exposure_at_most_2(tmp_path: Path, analyze: str) -> None:
    """`systemd-analyze security --offline=yes` rates the unit's exposure 2.0 or lower."""
    out = subprocess.run(
        [analyze, "security", "--offline=yes", str(_unit_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out.stdout)
    assert match, out.stdout + out.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE


def test_unit_declares_notify_watchdog_and_hardening() -> None:
    """The unit is Type=notify with a watchdog, restarts on failure, has state and config
    directories, a credential for the token, and the hardening the issue asks for."""
    settings = {
        line.split("=", 1)[0]
        for line in UNIT.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    text = UNIT.read_text()
    for line in (
        "Type=notify",
        "Restart=on-failure",
        "StateDirectory=ckpt-advisor",
        "ConfigurationDirectory=ckpt-advisor",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "SystemCallFilter=@system-service",
        "LoadCredential=SLACK_BOT_TOKEN:/etc/ckpt-advisor/slack-token",
    ):
        assert f"\n{line}\n" in text, line
    assert {"WatchdogSec", "TimeoutStopSec", "ExecReload"} <= settings
