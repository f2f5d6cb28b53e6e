"""The benchmark of issues 7 and 15: one command, a table of each figure beside its target.

    python -m bench                       # issue sizes: 400 MB log, 1,000 files, 1M events
    python -m bench --log-mb 100 --only backfill,cli
    python -m bench --python /other/checkout/.venv/bin/python   # another install (before/after)

Inputs are generated deterministically under ``--work`` (kept between runs: the 400 MB log is
written once). Every measured program runs as a child process of this one: ``ckpt-advisor
ingest`` beside ``grep -c -E`` with the same keywords over the same file, the daemon for the
live and many-file figures, and the CLI for start-up times. Timings are wall clock on whatever
else the machine is doing; the grep ratio is the figure that travels between machines. The
goodput figures (issue 16, bench/goodput.py) are accuracy, not speed: they run in this process.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import cores, fleet
from bench.goodput import bench_goodput
from bench.inputs import DENSE, SPARSE, LogShape, remove_store, training_log
from bench.store import bench_store

ROOT = Path(__file__).resolve().parents[1]
HEADER = "[INFO|trainer.py:4149] {t} >> Saving model checkpoint to /data/run/checkpoint-{step}\n"

Row = tuple[str, str, str, bool]
"""(figure, measured, target, met)."""


def _agent(python: str, *args: str) -> list[str]:
    """The ``ckpt-advisor`` command line of the install that ``python`` imports."""
    return [python, "-c", "from ckpt_advisor.agent.cli import main; main()", *args]


def _env() -> dict[str, str]:
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


def _timed_child(
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


GREP_PHRASES = "Saving model checkpoint|Resuming training|Loading model from|Traceback|Error"
"""The five event phrases of issue 15's ``grep -c -E``: the floor a backfill is measured
against (a scan that finds the lines with events, and no more)."""


def _grep_s(log: Path, env: dict[str, str]) -> float:
    """Wall seconds of ``grep -c -E`` of :data:`GREP_PHRASES` over ``log`` (the faster of two)."""
    return min(_timed_child(["grep", "-c", "-E", GREP_PHRASES, str(log)], env).wall_s for _ in "ab")


def _backfill(
    args: argparse.Namespace, env: dict[str, str], shape: LogShape, size_mb: int, fixed_s: float
) -> list[Row]:
    """Ingest a generated ``shape`` log of ``size_mb`` MB beside grep; the shape's rows."""
    work: Path = args.work
    log = work / ("train" if shape is SPARSE else f"train-{shape.name}") / f"{size_mb}mb.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    truth = training_log(log, size_mb << 20, shape)
    print(
        f"  {shape.name} input: {log} ({truth.size_bytes / 1e6:.0f} MB, {truth.lines:,} lines,"
        f" {truth.saves} saves, {truth.failures} failures; ready in"
        f" {time.perf_counter() - t0:.0f}s)"
    )
    db = work / f"backfill-{shape.name}.db"
    remove_store(db)
    grep_s = _grep_s(log, env)
    run = _timed_child(
        _agent(args.python, "ingest", str(log), "--job", "backfill", "--db", str(db)), env, rss=True
    )
    grep_s = min(grep_s, _grep_s(log, env))  # side by side: before and after the ingest
    with sqlite3.connect(db) as conn:
        counts = dict(conn.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall())
    n_events = sum(counts.values())
    mb = truth.size_bytes / 1e6
    print(
        f"  stored: {counts} ({n_events / mb:.0f} events per MB); reading after start-up and the"
        f" final estimate: {mb / (run.wall_s - fixed_s):.0f} MB/s; CPU {run.cpu_s:.2f} s"
    )
    ok_events = counts.get("checkpoint_start") == truth.saves
    ok_events = ok_events and counts.get("failure") == truth.failures
    rate = mb / run.wall_s
    ratio = run.wall_s / grep_s
    name = f"backfill {shape.name} {mb:.0f} MB"
    if shape is SPARSE:
        speed: list[Row] = [
            (
                f"{name}: throughput",
                f"{rate:.0f} MB/s ({run.wall_s:.2f} s)",
                ">= 300 MB/s",
                rate >= 300,
            ),
            (
                f"{name}: ingest / grep -c -E",
                f"{ratio:.1f}x (grep {grep_s:.2f} s)",
                "<= 3x",
                ratio <= 3,
            ),
        ]
    else:
        per_core = mb / run.cpu_s
        speed = [
            (
                f"{name}: ingest / grep -c -E",
                f"{ratio:.1f}x ({run.wall_s:.2f} s, grep {grep_s:.2f} s)",
                "<= 5x",
                ratio <= 5,
            ),
            (
                f"{name}: MB per CPU second",
                f"{per_core:.0f} MB/s (CPU {run.cpu_s:.2f} s)",
                ">= 200 MB/s",
                per_core >= 200,
            ),
        ]
    one = _agent(args.python, "ingest", str(log), "--job", "backfill", "--workers", "1")
    on_cores = cores.rows(
        name,
        truth.size_bytes,
        run,
        db,
        lambda db1: _timed_child([*one, "--db", str(db1)], env, rss=True),
    )
    return [
        *speed,
        *on_cores,
        (f"{name}: peak memory", f"{run.rss_mb:.0f} MB", "<= 300 MB", run.rss_mb <= 300),
        (
            f"{name}: saves/failures found",
            f"{counts.get('checkpoint_start')}/"
            f"{counts.get('failure')} of {truth.saves}/{truth.failures}",
            "all",
            ok_events,
        ),
    ]


def _cpu_timed(
    cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)
) -> tuple[float, float]:
    """Wall and CPU seconds (user and system, from this process's children's usage) of
    ``cmd``: the CPU time is the figure that survives a loaded machine, and no launcher runs
    in between (as with ``rss``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall_s = _timed_child(cmd, env, ok=ok).wall_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall_s, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def bench_backfill(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    """Start-up of ``ingest``, then a sparse and an event-dense log ingested beside grep."""
    fixed_s, fixed_cpu_s = _fixed_ingest_s(args, env)
    rows: list[Row] = [
        (
            "ingest start-up: a 10 kB log",
            f"{fixed_s:.2f} s (CPU {fixed_cpu_s:.2f} s)",
            "<= 0.3 s",
            fixed_s <= 0.3,
        )
    ]
    rows += _backfill(args, env, SPARSE, args.log_mb, fixed_s)
    return rows + _backfill(args, env, DENSE, args.dense_mb, fixed_s)


def _fixed_ingest_s(args: argparse.Namespace, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of an ingest of a 10 kB real log with saves and a failure into a
    new store (the fastest of three of each): interpreter start, imports, store, the final
    estimate, exit."""
    small = ROOT / "agent" / "fixtures" / "real" / "hf_trainer_crash.log"
    runs = []
    for i in range(3):
        db = args.work / f"fixed-{i}.db"
        remove_store(db)
        cmd = _agent(args.python, "ingest", str(small), "--job", "fixed", "--db", str(db))
        runs.append(_cpu_timed(cmd, env))
    return min(wall for wall, _ in runs), min(cpu for _, cpu in runs)


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
        _agent(python, "run", "--config", str(config)),
        env=env,
        cwd=CHILD_CWD,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait(what: str, ready: Callable[[], bool], timeout_s: float) -> None:
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
        _wait("the daemon's first scan", lambda: _query(db, sql, 0) > 0, 60)
        n = args.live_samples if events else max(5, args.live_samples // 5)
        for i in range(1, n + 1):
            with log.open("a") as fh:
                fh.write(
                    HEADER.format(t=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S,000"), step=i)
                )
            t0 = time.perf_counter()
            _wait(f"line {i}", lambda i=i: _query(db, sql, i) > 0, poll_s + 30)
            out.append(time.perf_counter() - t0)
            time.sleep(0.05 if events else 0.3)
    finally:
        _stop(proc)
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
        _wait("all files read", lambda: _query(db, "SELECT count(*) FROM files") >= total, 300)
        time.sleep(5)  # let the first estimates and scans settle
        cpu0, t0 = _proc_cpu_s(proc.pid), time.perf_counter()
        time.sleep(args.idle_s)
        cpu = (_proc_cpu_s(proc.pid) - cpu0) / (time.perf_counter() - t0) * 100
        rss = _proc_rss_mb(proc.pid)
    finally:
        _stop(proc)
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


def _estimate_s(args: argparse.Namespace, env: dict[str, str], n_events: int) -> tuple[float, str]:
    """Seconds of one estimate over a store of ``n_events`` events (the faster of two, after a
    warm-up that does the lazy imports) and what it found."""
    db = args.work / f"events-{n_events}.db"
    code = (
        "import sys, time\n"
        "from bench.inputs import event_store\n"
        "from ckpt_advisor.agent.estimate import Estimator\n"
        "store = event_store(sys.argv[1], int(sys.argv[2]))\n"
        "Estimator().estimate(store, 'big', 1.9e9)  # warm: lazy imports\n"
        "best = float('inf')\n"
        "for _ in range(2):\n"
        "    t0 = time.perf_counter()\n"
        "    est = Estimator().estimate(store, 'big', 1.9e9)\n"
        "    best = min(best, time.perf_counter() - t0)\n"
        "print(best, est.n_failures, est.status)\n"
    )
    out = subprocess.run(
        [args.python, "-c", code, str(db), str(n_events)],
        env=env,
        cwd=CHILD_CWD,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    secs, n_failures, status = out.stdout.split()
    return float(secs), f"{n_failures} failures, {status}"


def bench_estimate(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    """The estimate over ``--events`` stored events and over ten times as many (the stores are
    written once under ``--work``; ten million events take a few minutes)."""
    small_s, small = _estimate_s(args, env, args.events)
    big_s, big = _estimate_s(args, env, 10 * args.events)
    growth = big_s / small_s
    return [
        (
            f"estimate over {args.events:,} events",
            f"{small_s:.2f} s ({small})",
            "<= 0.5 s",
            small_s <= 0.5,
        ),
        (f"estimate over {10 * args.events:,} events", f"{big_s:.2f} s ({big})", "-", True),
        (
            "estimate: 10x the events costs",
            f"{growth:.1f}x the time",
            "<= 12x",
            growth <= 12,
        ),
    ]


def bench_cli(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    """Start-up of ``--help`` and of the read-only commands, which open the store with sqlite3
    alone (``status`` exits 1 here: no daemon has run on this store)."""
    db = args.work / f"events-{args.events}.db"
    if not db.exists():  # made by the estimate benchmark; made here when it is not run
        code = (
            "import sys\n"
            "from bench.inputs import event_store\n"
            "event_store(sys.argv[1], int(sys.argv[2]))\n"
        )
        subprocess.run(
            [args.python, "-c", code, str(db), str(args.events)], env=env, cwd=CHILD_CWD, check=True
        )
    rows: list[Row] = []
    commands = (
        ("--help", ["--help"]),
        ("estimates", ["estimates", "--db", str(db), "--json"]),
        ("events", ["events", "--db", str(db), "--limit", "1000", "--json"]),
        ("status", ["status", "--db", str(db), "--json"]),
    )
    for name, cmd in commands:
        runs = [_cpu_timed(_agent(args.python, *cmd), env, ok=(0, 1)) for _ in range(5)]
        med = statistics.median(wall for wall, _ in runs)
        cpu = statistics.median(cpu for _, cpu in runs)
        rows.append(
            (
                f"cli: ckpt-advisor {name} (median of 5)",
                f"{med:.2f} s (CPU {cpu:.2f} s)",
                "<= 0.5 s",
                med <= 0.5,
            )
        )
    return rows


BENCHES = {
    "backfill": bench_backfill,
    "live": bench_live,
    "many": bench_many,
    "estimate": bench_estimate,
    "cli": bench_cli,
    "goodput": bench_goodput,
    "store": bench_store,
    "fleet": fleet.bench_fleet,
}
DEFAULT = [name for name in BENCHES if name != "fleet"]
"""What runs without --only: fleet mode's benchmark (a PostgreSQL server, ten agents, five
minutes) runs when named (``python -m bench fleet``)."""


def main(argv: list[str] | None = None) -> None:
    """Parse options, run the chosen benchmarks, print the table; exit 1 if a target is missed."""
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--log-mb", type=int, default=400, help="sparse backfill log size (400)")
    ap.add_argument("--dense-mb", type=int, default=400, help="event-dense log size (400)")
    ap.add_argument("--files", type=int, default=1000, help="watched files (1000)")
    ap.add_argument("--jobs", type=int, default=100, help="jobs the files belong to (100)")
    ap.add_argument("--events", type=int, default=1_000_000, help="stored events (1,000,000)")
    ap.add_argument("--live-samples", type=int, default=50, help="appends timed with inotify")
    ap.add_argument("--poll-s", type=float, default=2.0, help="poll interval when polling")
    ap.add_argument("--store-runs", type=int, default=3, help="replays of the store bench (3)")
    ap.add_argument("--idle-s", type=float, default=20.0, help="idle CPU window (20 s)")
    ap.add_argument("benches", nargs="*", help=f"benchmarks to run, of {', '.join(BENCHES)}")
    ap.add_argument("--only", default=",".join(DEFAULT), help="comma-separated subset")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ckpt-advisor-bench"))
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter whose installed ckpt_advisor is measured (default: this one)",
    )
    fleet.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.benches:
        args.only = ",".join(args.benches)
    args.work.mkdir(parents=True, exist_ok=True)
    env = _env()
    rows: list[Row] = []
    for name in args.only.split(","):
        print(f"[{name}]", flush=True)
        t0 = time.perf_counter()
        try:
            rows += BENCHES[name](args, env)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            rows.append((name, f"error: {exc}"[:60], "-", False))
        print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    width = max(len(r[0]) for r in rows)
    mwidth = max(len(r[1]) for r in rows)
    print(f"\n{'figure':<{width}}  {'measured':<{mwidth}}  {'target':<12}  met")
    for figure, measured, target, met in rows:
        print(f"{figure:<{width}}  {measured:<{mwidth}}  {target:<12}  {'yes' if met else 'NO'}")
    load = os.getloadavg()[0]
    print(f"\nload average {load:.1f} on {os.cpu_count()} cores; python {args.python}")
    sys.exit(0 if all(r[3] for r in rows) else 1)
