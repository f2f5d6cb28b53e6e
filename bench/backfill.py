"""Issue 15's backfill figures: ``ingest`` start-up, and a sparse and an event-dense log ingested
beside ``grep -c -E`` of the event phrases, with the cores used and the events found."""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from bench import cores
from bench.children import ROOT, Row, agent_cmd, cpu_timed, timed_child
from bench.inputs import DENSE, SPARSE, LogShape, remove_store, training_log

GREP_PHRASES = "Saving model checkpoint|Resuming training|Loading model from|Traceback|Error"
"""The five event phrases of issue 15's ``grep -c -E``: the floor a backfill is measured
against (a scan that finds the lines with events, and no more)."""


def _grep_s(log: Path, env: dict[str, str]) -> float:
    """Wall seconds of ``grep -c -E`` of :data:`GREP_PHRASES` over ``log`` (the faster of two)."""
    return min(timed_child(["grep", "-c", "-E", GREP_PHRASES, str(log)], env).wall_s for _ in "ab")


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
    run = timed_child(
        agent_cmd(args.python, "ingest", str(log), "--job", "backfill", "--db", str(db)),
        env,
        rss=True,
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
    ingest = agent_cmd(args.python, "ingest", str(log), "--job", "backfill")
    on_cores = cores.rows(
        name,
        truth.size_bytes,
        run,
        db,
        lambda db1, n: timed_child([*ingest, "--workers", str(n), "--db", str(db1)], env, rss=True),
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
        cmd = agent_cmd(args.python, "ingest", str(small), "--job", "fixed", "--db", str(db))
        runs.append(cpu_timed(cmd, env))
    return min(wall for wall, _ in runs), min(cpu for _, cpu in runs)
