"""``ckpt-advisor demo``: the daemon on a replayed week of real training output.

A week of an HF Trainer job is simulated from the captured real output (:mod:`agent.synth`) with
known C and MTBF, written into a watched directory at accelerated speed while the real daemon
(real store, real watcher, real scheduler; the recommendation goes to the log, no Slack account
needed) tails it. The demo then shows what the daemon recommended beside the truth.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.app import build_daemon
from ckpt_advisor.agent.config import parse_config
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.notify.message import unescape_slack
from ckpt_advisor.agent.synth import SynthJob, simulate
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.goodput import Goodput
from ckpt_advisor.rules.interval import daly_interval_s

JOB = "demo-llama-8b"
TRUE_MTBF_S = 6 * 3600.0
TRUE_COST_S = 240.0
STEP_TIME_S = 6.0
SAVE_STEPS = 1200  # a 2-hour interval: too rare for a 6-hour MTBF


def _config(workdir: Path) -> dict[str, object]:
    logs = workdir / "logs"
    return {
        "store": {"path": str(workdir / "state" / "ckpt-advisor.db")},
        "schedule": {"estimate_every": "2s", "after_failure": "1s", "poll_every": "0.5s"},
        "jobs": [
            {
                "name": JOB,
                "logs": [str(logs / "*.log")],
                "timings": [str(logs / "ckpt_timings.jsonl")],
                "gpus": 64,
            }
        ],
        "slack": {"token_env": "CKPT_ADVISOR_DEMO_HAS_NO_TOKEN"},
    }


def replay(job: SynthJob, logs: Path, replay_s: float, *, tick_s: float = 0.1) -> None:
    """Append the job's log and timing records to files in ``logs`` in time order, compressing
    the simulated span into about ``replay_s`` seconds of wall time."""
    logs.mkdir(parents=True, exist_ok=True)
    records = sorted(
        [(t, 0, i, text) for i, (t, text) in enumerate(job.log)]
        + [(t, 1, i, text) for i, (t, text) in enumerate(job.timings)]
    )
    if not records:
        return
    t0, t1 = records[0][0], records[-1][0]
    span_s = max((t1 - t0).total_seconds(), 1.0)
    ticks = max(int(replay_s / tick_s), 1)
    with (
        (logs / "train.log").open("a", encoding="utf-8") as log_fh,
        (logs / "ckpt_timings.jsonl").open("a", encoding="utf-8") as timing_fh,
    ):
        i = 0
        for tick in range(1, ticks + 1):
            until = t0 + timedelta(seconds=span_s * tick / ticks)
            while i < len(records) and records[i][0] <= until:
                (timing_fh if records[i][1] else log_fh).write(records[i][3])
                i += 1
            log_fh.flush()
            timing_fh.flush()
            time.sleep(tick_s)


def run_demo(
    *, days: float, replay_s: float, workdir: str | None, echo: Callable[[str], None]
) -> int:
    """Run the demo; returns 0 when the daemon made a recommendation, 1 otherwise."""
    root = (
        Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="ckpt-advisor-demo-"))
    )
    config = parse_config(_config(root), "<demo>")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)
    job = simulate(
        mtbf_s=TRUE_MTBF_S,
        cost_s=TRUE_COST_S,
        interval_steps=SAVE_STEPS,
        step_time_s=STEP_TIME_S,
        duration_s=days * 86400,
        start=start,
        seed=7,
    )
    echo(f"Replaying {days:g} days of an HF Trainer job (real captured output, re-timed) into")
    echo(f"  {root / 'logs'}  in ~{replay_s:g}s, with the daemon watching it.")
    echo(
        f"  The job saves every {SAVE_STEPS} steps (~{format_duration(job.interval_s)}); "
        f"{job.n_saves} saves and {job.n_failures} failures are coming.\n"
    )
    daemon = build_daemon(config)
    thread = threading.Thread(target=daemon.run, name="daemon", daemon=True)
    thread.start()
    try:
        replay(job, root / "logs", replay_s)
        deadline = time.monotonic() + 30
        messages: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            messages = [m for m in daemon.store.messages(JOB) if "thread_of" not in m["payload"]]
            latest = daemon.store.estimate_history(job=JOB, latest_only=True)
            caught_up = latest and latest[0]["n_failures"] >= job.n_failures
            if messages and caught_up:
                break
            time.sleep(0.5)
    finally:
        daemon.stop()
        thread.join(timeout=30)
    spans = Estimator().estimate(daemon.store, JOB, time.time()).goodput_spans
    goodput = None if spans is None or not len(spans) else spans.breakdown()
    return _report(
        root,
        job,
        daemon.store.estimate_history(job=JOB, latest_only=True),
        messages,
        echo,
        goodput,
    )


def _blocks_as_text(payload: dict[str, Any]) -> str:
    """A posted Block Kit message as terminal text: header, then each section's and context's
    lines, dates as their UTC fallback, without mrkdwn's ``*`` and backticks."""
    lines = []
    for block in payload.get("blocks", []):
        texts = [e.get("text", "") for e in block.get("elements", [])] or [
            block.get("text", {}).get("text", "")
        ]
        for text in texts:
            text = re.sub(r"<!date\^[^|>]*\|([^>]*)>", r"\1", text)
            lines.extend(unescape_slack(text.replace("*", "").replace("`", "")).splitlines())
    return "\n".join("  " + line for line in lines)


def _report(
    root: Path,
    job: SynthJob,
    latest: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    echo: Callable[[str], None],
    goodput: Goodput | None = None,
) -> int:
    if not messages or not latest:
        echo("The daemon made no recommendation (see the log above).")
        return 1
    est = latest[0]
    echo(
        f"While the week replayed the daemon posted {len(messages)} message(s): one when the "
        "evidence first sufficed, again only when the advice moved materially. The last:\n"
    )
    echo(_blocks_as_text(messages[-1]["payload"]))
    echo("  (its details, and with a Slack token the waste-curve plot, follow in its thread)\n")
    echo("The latest estimate, after the whole week, beside the truth the job was made with:\n")
    echo(f"{'':24}{'truth':>14}{'estimated':>14}")
    rows = [
        ("checkpoint cost C", TRUE_COST_S, est["checkpoint_cost_s"]),
        ("MTBF M", TRUE_MTBF_S, est["mtbf_s"]),
        ("current interval", job.interval_s, est["current_interval_s"]),
        ("Daly interval", daly_interval_s(TRUE_MTBF_S, TRUE_COST_S), est["daly_interval_s"]),
    ]
    for name, truth, got in rows:
        shown = format_duration(float(got)) if isinstance(got, int | float) else "-"
        echo(f"{name:24}{format_duration(truth):>14}{shown:>14}")
    if est.get("recommended_setting"):
        echo(f"{'recommended setting':24}{'':>14}{est['recommended_setting']:>14}")
    if goodput is not None and goodput.goodput is not None:
        since, until = (datetime.fromtimestamp(t, UTC) for t in (goodput.since_s, goodput.until_s))
        spent = job.truth_seconds(since, until)
        true_goodput = spent["productive"] / max(sum(spent.values()), 1.0)
        echo(f"{'goodput (kept / wall)':24}{true_goodput:>14.1%}{goodput.goodput:>14.1%}")
    echo(f"\nLogs and store: {root}")
    echo(f"Try: ckpt-advisor estimates --db {root / 'state' / 'ckpt-advisor.db'}")
    echo(f"     ckpt-advisor goodput --job {JOB} --db {root / 'state' / 'ckpt-advisor.db'}")
    return 0
