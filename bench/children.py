"""The bench's measured children: how a child is started (the install under test, outside any
checkout) and what it took (wall, CPU, peak RSS)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

Row = tuple[str, str, str, bool]
"""(figure, measured, target, met)."""


def agent_cmd(python: str, *args: str) -> list[str]:
    """The ``ckpt-advisor`` command line of the install that ``python`` imports."""
    return [python, "-c", "from ckpt_advisor.agent.cli import main; main()", *args]


_COMPILE = (
    "import compileall, importlib, sys\n"
    "dirs = [p for m in ('agent', 'parsers', 'rules')"
    " for p in importlib.import_module('ckpt_advisor.' + m).__path__]\n"
    "sys.exit(0 if all(compileall.compile_dir(d, quiet=1) for d in dirs) else 1)\n"
)


def compile_bytecode(python: str, env: dict[str, str]) -> None:
    """Compile the bytecode of the ``ckpt_advisor`` that ``python`` imports, as ``pip install``
    does: an editable install under ``PYTHONDONTWRITEBYTECODE=1`` (set on this machine) has
    none and would compile every module from source at each start (~0.12 s of CPU on
    ``ingest``), which no installed copy does.

    Raises:
        subprocess.CalledProcessError: a module could not be compiled.
    """
    subprocess.run([python, "-c", _COMPILE], env=env, cwd=CHILD_CWD, check=True)


def child_env() -> dict[str, str]:
    """Children find ``bench`` here and ``ckpt_advisor`` wherever their interpreter has it."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


CHILD_CWD = "/"
"""Children run outside any checkout, so no folder beside them shadows an installed package."""


_PEAK_RSS = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    try:\n"
    "        os.execvp(sys.argv[2], sys.argv[2:])\n"
    "    finally:\n"
    "        os._exit(127)\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "with open(sys.argv[1], 'w') as fh:\n"
    "    fh.write(f'{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)
"""Runs argv[2:] as its child and writes that child's peak RSS (KiB) and CPU seconds (user
and system, its own children's included) to argv[1].

Linux carries the RSS high-water mark of the memory a process had before ``exec`` into its
``ru_maxrss`` (fs/exec.c), and subprocess starts children with vfork, i.e. in this process's
memory: a child of the bench, after the bench generated its 400 MB input, reported ~320 MB
whatever it used. A child of this small launcher starts from the launcher's ~10 MB."""


@dataclass(frozen=True)
class Child:
    """What a measured child took: wall seconds, peak RSS in MB and CPU seconds (both NaN
    unless asked for), and its stdout."""

    wall_s: float
    rss_mb: float
    cpu_s: float
    out: bytes


def timed_child(
    cmd: list[str], env: dict[str, str], *, rss: bool = False, ok: tuple[int, ...] = (0,)
) -> Child:
    """Run ``cmd``; return what it took (:class:`Child`; peak RSS and CPU time only if ``rss``).
    An exit code outside ``ok`` is an error."""
    peak = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-peak-rss-{os.getpid()}"
    argv = [sys.executable, "-c", _PEAK_RSS, str(peak), *cmd] if rss else cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=CHILD_CWD, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise RuntimeError(f"{cmd[3:]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    rss_mb = cpu_s = float("nan")
    if rss:
        kib, cpu = peak.read_text().split()
        rss_mb, cpu_s = int(kib) / 1024, float(cpu)
        peak.unlink()
    return Child(wall, rss_mb, cpu_s, out)


def cpu_timed(
    cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)
) -> tuple[float, float]:
    """Wall and CPU seconds (user and system, from this process's children's usage) of
    ``cmd``: the CPU time is the figure that survives a loaded machine, and no launcher runs
    in between (as with ``rss``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall_s = timed_child(cmd, env, ok=ok).wall_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall_s, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
