"""Fleet mode's benchmark (issue 14): ``python -m bench fleet``.

``--fleet-agents`` real ``ckpt-advisor run`` processes (10), each tailing ``--fleet-jobs`` jobs
(50, one HF Trainer log each) into one PostgreSQL database, while this process appends
checkpoint lines (one event each) to all the logs at ``--fleet-rate`` lines/s for
``--fleet-s`` seconds (300). Figures: the events/s the store took in over that window against
what was offered, the p99 time from a line's append to its row in the store (a sampled line
every 0.2 s, looked for by its job and step), the estimate over one job's 1M and 10M events
in PostgreSQL (written as the tailer writes them: ``bench/inputs.event_store``), and the size
of the events table with its indexes per million events.

The server is ``--pg-url`` (password in ``$CKPT_ADVISOR_DB_PASSWORD``; the role must be able
to create databases), else a throwaway one started like the tests' (``tests/pg.py``: Debian's
``postgresql`` package, run as its ``postgres`` account under root).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Row = tuple[str, str, str, bool]
LINE = "[INFO|trainer.py:4149] {t} >> Saving model checkpoint to /data/{job}/checkpoint-{step}\n"
PASSWORD_ENV = "CKPT_ADVISOR_DB_PASSWORD"


@contextmanager
def pg_server(args: argparse.Namespace) -> Iterator[tuple[Any, str, str]]:
    """A server for a benchmark, ``--pg-url`` or a throwaway one (removed after): yields (a
    function making a database and returning its URL, the password, the server's name).
    Raises RuntimeError where no throwaway server can run (``tests.pg.unavailable``)."""
    import psycopg

    if args.pg_url:
        password = os.environ.get(PASSWORD_ENV, "")

        def make(name: str) -> str:
            base = args.pg_url.rsplit("/", 1)[0]
            with psycopg.connect(args.pg_url, password=password, autocommit=True) as conn:
                if not conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
                ).fetchone():
                    conn.execute(f'CREATE DATABASE "{name}"')
            return f"{base}/{name}"

        yield make, password, args.pg_url.rsplit("/", 1)[0]
        return
    from tests import pg

    if why := pg.unavailable():
        raise RuntimeError(why)
    server = pg.start_server()
    try:

        def make_local(name: str) -> str:
            exists = server.sql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
            if not exists:
                server.sql(f"CREATE DATABASE {name} OWNER {pg.ROLE}")
            return server.url(name)

        yield make_local, pg.ROLE_PASSWORD, f"PostgreSQL {server.bin.parent.name} (throwaway)"
    finally:
        server.remove()


def _config(work: Path, agent: str, url: str, jobs: list[str]) -> Path:
    home = work / agent
    home.mkdir(parents=True, exist_ok=True)
    text = (
        f'[store]\nurl = "{url}"\npath = "{home}/state.db"\n\n[agent]\nname = "{agent}"\n\n'
        '[schedule]\nestimate_every = "1h"\npoll_every = "2s"\n'
    )
    for job in jobs:
        text += f'\n[[jobs]]\nname = "{job}"\nlogs = ["{work}/logs/{job}.log"]\n'
    config = home / "config.toml"
    config.write_text(text)
    return config


def _count(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


def _stored(conn: Any, job: str, step: int) -> bool:
    sql = "SELECT 1 FROM events WHERE job = %s AND step = %s AND kind = 'checkpoint_start'"
    return conn.execute(sql, (job, step)).fetchone() is not None


def _append_load(
    args: argparse.Namespace, work: Path, jobs: list[str], conn: Any
) -> tuple[int, list[float]]:
    """Append at ``--fleet-rate`` lines/s to every job's log for ``--fleet-s`` seconds; the
    lines appended and the append→stored latencies of the sampled ones."""
    files = {job: (work / "logs" / f"{job}.log").open("a", buffering=1) for job in jobs}
    steps = dict.fromkeys(jobs, 0)
    samples: list[tuple[str, int, float]] = []
    latencies: list[float] = []
    done = threading.Event()

    def check() -> None:  # each sample looked for every 20 ms, in order
        with_conn = conn
        i = 0
        while not done.is_set() or i < len(samples):
            if i >= len(samples):
                time.sleep(0.02)
                continue
            job, step, t0 = samples[i]
            if _stored(with_conn, job, step):
                latencies.append(time.monotonic() - t0)
                i += 1
            elif time.monotonic() - t0 > 120:
                latencies.append(float("inf"))
                i += 1
            else:
                time.sleep(0.02)

    checker = threading.Thread(target=check, daemon=True)
    checker.start()
    rng = random.Random(14)
    appended, start = 0, time.monotonic()
    next_sample = start
    while (now := time.monotonic()) - start < args.fleet_s:
        due = int((now - start) * args.fleet_rate) - appended
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S,000")
        for _ in range(due):
            job = jobs[appended % len(jobs)]
            steps[job] += 1
            files[job].write(LINE.format(t=stamp, job=job, step=steps[job]))
            appended += 1
        if now >= next_sample:
            job = rng.choice(jobs)
            steps[job] += 1
            files[job].write(LINE.format(t=stamp, job=job, step=steps[job]))
            samples.append((job, steps[job], time.monotonic()))
            appended += 1
            next_sample = now + 0.2
        time.sleep(0.01)
    done.set()
    checker.join(timeout=180)
    for fh in files.values():
        fh.close()
    return appended, latencies


def _estimate(
    args: argparse.Namespace, url: str, password: str, n_events: int
) -> tuple[float, int]:
    """Seconds of one estimate over ``n_events`` of one job in PostgreSQL (the faster of two
    after a warm-up), and the events table's size with its indexes, in bytes."""
    code = (
        "import sys, time\n"
        "from bench.inputs import event_store\n"
        "from ckpt_advisor.agent.estimate import Estimator\n"
        "store = event_store(sys.argv[1], int(sys.argv[2]), password=sys.argv[3])\n"
        "Estimator().estimate(store, 'big', 1.9e9)\n"
        "best = float('inf')\n"
        "for _ in range(2):\n"
        "    t0 = time.perf_counter()\n"
        "    Estimator().estimate(store, 'big', 1.9e9)\n"
        "    best = min(best, time.perf_counter() - t0)\n"
        "print(best)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run(
        [args.python, "-c", code, url, str(n_events), password],
        env=env, cwd="/", capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    import psycopg

    with psycopg.connect(url, password=password) as c:
        size = int(c.execute("SELECT pg_total_relation_size('events')").fetchone()[0])
    return float(out.stdout.split()[-1]), size


def bench_fleet(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    """The figures above, each beside its target (events/s: at least 95% of what was offered;
    p99 append→stored: poll interval + 1 s, as for one agent)."""
    import psycopg

    from bench.children import agent_cmd
    from bench.daemon import stop_daemon  # the daemon launcher of the other benchmarks

    work = args.work / "fleet"
    rows: list[Row] = []
    with pg_server(args) as (make, password, where):
        url = make(f"fleet_{int(time.time())}")
        names = [f"agent{i:02d}" for i in range(args.fleet_agents)]
        jobs = {a: [f"{a}-job{j:02d}" for j in range(args.fleet_jobs)] for a in names}
        (work / "logs").mkdir(parents=True, exist_ok=True)
        for log in (work / "logs").glob("*.log"):
            log.unlink()
        for job_list in jobs.values():
            for job in job_list:
                (work / "logs" / f"{job}.log").write_text("")
        child_env = {**env, PASSWORD_ENV: password}
        first = _config(work, names[0], url, jobs[names[0]])
        subprocess.run(agent_cmd(args.python, "migrate", "--config", str(first)), env=child_env,
                       cwd="/", check=True, capture_output=True)  # fmt: skip
        procs = [
            subprocess.Popen(
                agent_cmd(args.python, "run", "--config", str(_config(work, a, url, jobs[a]))),
                env=child_env,
                cwd="/",
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for a in names
        ]
        try:
            with psycopg.connect(url, password=password, autocommit=True) as conn:
                time.sleep(5.0)  # every agent's first scan of its empty logs
                before = _count(conn)
                t0 = time.monotonic()
                appended, lat = _append_load(
                    args, work, [j for js in jobs.values() for j in js], conn
                )
                window_s = time.monotonic() - t0
                stored = _count(conn) - before
        finally:
            for proc in procs:
                stop_daemon(proc)
        offered = appended / window_s
        taken = stored / window_s
        finite = [x for x in lat if x != float("inf")]
        p99 = (
            statistics.quantiles(finite, n=100, method="inclusive")[98]
            if len(finite) > 1
            else float("nan")
        )
        rows += [
            (
                f"fleet: {args.fleet_agents} agents x {args.fleet_jobs} jobs, {window_s:.0f} s: "
                "events/s stored",
                f"{taken:,.0f}/s of {offered:,.0f}/s offered",
                ">= 95%",
                taken >= 0.95 * offered,
            ),
            (
                "fleet: append -> stored in PostgreSQL (p99)",
                f"{p99:.2f} s (p50 {statistics.median(finite):.2f}, n={len(finite)}, "
                f"{len(lat) - len(finite)} lost)",
                "<= 3 s",
                p99 <= 3.0 and len(finite) == len(lat),
            ),
        ]
        for n in args.fleet_estimate_events:
            est_url = make(f"events_{n}")
            secs, size = _estimate(args, est_url, password, n)
            rows += [
                (f"fleet: estimate over {n:,} events (PostgreSQL)", f"{secs:.2f} s", "-", True),
                (
                    f"fleet: events table + indexes per million events ({n:,} stored)",
                    f"{size / (n / 1e6) / 2**20:,.0f} MiB",
                    "-",
                    True,
                ),
            ]
    rows.append(("fleet: server", where, "-", True))
    return rows


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The fleet benchmark's options."""
    ap.add_argument("--fleet-agents", type=int, default=10, help="agents (10)")
    ap.add_argument("--fleet-jobs", type=int, default=50, help="jobs per agent (50)")
    ap.add_argument("--fleet-s", type=float, default=300.0, help="append window (300 s)")
    ap.add_argument("--fleet-rate", type=float, default=1000.0, help="lines/s offered (1000)")
    ap.add_argument(
        "--fleet-estimate-events", type=lambda s: [int(x) for x in s.split(",")],
        default=[1_000_000, 10_000_000], help="stores to estimate over (1000000,10000000)",
    )  # fmt: skip
    ap.add_argument("--pg-url", help="a server to use instead of a throwaway one")
