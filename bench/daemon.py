"""Issue 7's daemon figures: append-to-store latency with inotify and with polling, and the RSS
and idle CPU of a daemon watching many files."""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.children import CHILD_CWD, ROOT, Row, agent_cmd
from bench.inputs import remove_store

HEADER = "[INFO|trainer.py:4149] {t} >> Saving model checkpoint to /data/run/checkpoint-{step}\n"


def _config(work: Path, jobs: dict[str, str], db: Path, *, poll_s: float, events: bool) -> Path:
    lines = [
        f'[store]\npath = "{db}"\n',
        "[schedule]",
        'estimate_every = "1h"',
        f'poll_every = "{poll_s}s"',
    ]
    if not events:
        lines.append("file_events = false")
    for name, glob in jobs.items():
        lines += ["", "[[jobs]]", f'name = "{name}"', f'logs = ["{glob}"]']
    path = work / f"config-{len(jobs)}-{int(events)}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _daemon(python: str, config: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        agent_cmd(python, "run", "--config", str(config)),
        env=env,
        cwd=CHILD_CWD,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _query(db: Path, sql: str, *params: object) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute(sql, params).fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _latencies(args: argparse.Namespace, env: dict[str, str], *, events: bool) -> list[float]:
    work = args.work / f"live-{int(events)}"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "train.log"
    log.write_text(HEADER.format(t="2026-01-01 00:00:00,000", step=0))
    db = work / "live.db"
    remove_store(db)
    poll_s = args.poll_s
    proc = _daemon(
        args.python, _config(work, {"live": str(log)}, db, poll_s=poll_s, events=events), env
    )
    sql = "SELECT count(*) FROM events WHERE kind = 'checkpoint_start' AND step = ?"
    out = []
    try:
        wait_for("the daemon's first scan", lambda: _query(db, sql, 0) > 0, 60)
        n = args.live_samples if events else max(5, args.live_samples // 5)
        for i in range(1, n + 1):
            with log.open("a") as fh:
                fh.write(
                    HEADER.format(t=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S,000"), step=i)
                )
            t0 = time.perf_counter()
            wait_for(f"line {i}", lambda i=i: _query(db, sql, i) > 0, poll_s + 30)
            out.append(time.perf_counter() - t0)
            time.sleep(0.05 if events else 0.3)
    finally:
        stop_daemon(proc)
    return out


def _p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98] if len(xs) > 1 else xs[0]


def bench_live(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    notified = _latencies(args, env, events=True)
    polled = _latencies(args, env, events=False)
    return [
        (
            "live: append -> store, inotify (p99)",
            f"{_p99(notified):.2f} s (p50 {statistics.median(notified):.2f}, n={len(notified)})",
            "<= 1 s",
            _p99(notified) <= 1.0,
        ),
        (
            f"live: append -> store, polling {args.poll_s:g} s (p99)",
            f"{_p99(polled):.2f} s (p50 {statistics.median(polled):.2f}, n={len(polled)})",
            f"<= {args.poll_s + 1:g} s",
            _p99(polled) <= args.poll_s + 1.0,
        ),
    ]


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_many(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    work = args.work / f"many-{args.files}"
    sample = (ROOT / "agent" / "fixtures" / "real" / "hf_trainer_crash.log").read_bytes()
    per_job = max(1, args.files // args.jobs)
    jobs = {}
    for j in range(args.jobs):
        d = work / f"job{j:03d}"
        d.mkdir(parents=True, exist_ok=True)
        for k in range(per_job):
            (d / f"rank{k:02d}.log").write_bytes(sample)
        jobs[f"job{j:03d}"] = str(d / "*.log")
    db = work / "many.db"
    remove_store(db)
    proc = _daemon(args.python, _config(work, jobs, db, poll_s=2.0, events=True), env)
    try:
        total = per_job * args.jobs
        wait_for("all files read", lambda: _query(db, "SELECT count(*) FROM files") >= total, 300)
        time.sleep(5)  # let the first estimates and scans settle
        cpu0, t0 = _proc_cpu_s(proc.pid), time.perf_counter()
        time.sleep(args.idle_s)
        cpu = (_proc_cpu_s(proc.pid) - cpu0) / (time.perf_counter() - t0) * 100
        rss = _proc_rss_mb(proc.pid)
    finally:
        stop_daemon(proc)
    return [
        (
            f"many files: RSS, {total} files / {args.jobs} jobs",
            f"{rss:.0f} MB",
            "<= 150 MB",
            rss <= 150,
        ),
        (
            f"many files: idle CPU over {args.idle_s:g} s",
            f"{cpu:.2f}% of a core",
            "<= 1%",
            cpu <= 1.0,
        ),
    ]
