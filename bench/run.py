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
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import fleet
from bench.backfill import bench_backfill
from bench.children import CHILD_CWD, Row, agent_cmd, child_env, compile_bytecode, cpu_timed
from bench.daemon import bench_live, bench_many
from bench.goodput import bench_goodput
from bench.store import bench_store


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
        # every failure numbered by its interruption: the job's whole timeline is read
        ("events --kind failure", ["events", "--db", str(db), "--kind", "failure", "--json"]),
        ("status", ["status", "--db", str(db), "--json"]),
    )
    for name, cmd in commands:
        runs = [cpu_timed(agent_cmd(args.python, *cmd), env, ok=(0, 1)) for _ in range(5)]
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
    env = child_env()
    compile_bytecode(args.python, env)
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
