"""The daemon started on logs already written: its first Slack message rests on all of them.

The real daemon as a subprocess, real files, real SQLite, the real slack-sdk client against the
loopback fake Slack. Five runs of a job, each in its own file: four stop with no failure line,
the fifth ends in a CUDA OOM traceback whose failure the parser holds until the idle flush.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.tail.reader import WRITER_GONE_S
from tests.agent.fake_slack import FakeSlack

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.20 GiB is free.\n"
)


def _write_runs(runs: Path) -> None:
    """Five runs that fail and a sixth that runs on; the fifth file ends in its traceback."""
    job = simulate(
        mtbf_s=6 * 3600.0,
        cost_s=600.0,
        interval_steps=300,
        step_time_s=6.0,
        seed=3,
        lives_s=[20000.0] * 5,
        duration_s=5 * 86400.0,
    )
    lines = "".join(text for _, text in job.log).splitlines(keepends=True)
    tracebacks = [i for i, line in enumerate(lines) if "Traceback" in line]
    begin = 0
    for k, at in enumerate(tracebacks):
        exc = next(j for j in range(at, len(lines)) if lines[j].startswith("RuntimeError"))
        if k < len(tracebacks) - 1:  # killed: the bar's last state, no traceback
            end = lines[at][: lines[at].index("Traceback")] + "\n"
        else:
            end = "".join(lines[at:exc]) + OOM
        (runs / f"run{k + 1}.log").write_text("".join(lines[begin:at]) + end)
        begin = exc + 1
    (runs / f"run{len(tracebacks) + 1}.log").write_text("".join(lines[begin:]))


def _config(tmp: Path, slack: FakeSlack) -> Path:
    config = tmp / "config.toml"
    config.write_text(
        f'[store]\npath = "{tmp / "state" / "ckpt.db"}"\n\n'
        '[schedule]\nestimate_every = "1h"\nafter_failure = "1s"\npoll_every = "2s"\n\n'
        f'[[jobs]]\nname = "llama-8b"\nlogs = ["{tmp / "runs"}/*.log"]\ngpus = 64\n\n'
        f'[slack]\nchannel = "#training-alerts"\ntoken_env = "CKPT_ADVISOR_TEST_TOKEN"\n'
        f'base_url = "{slack.base_url}"\ntimeout = "5s"\n'
    )
    return config


@pytest.mark.parametrize("age_s", [0.0, WRITER_GONE_S + 600])
def test_the_first_message_names_the_oom_that_ends_the_backlog(
    tmp_path: Path, fake_slack: FakeSlack, age_s: float
) -> None:
    """Files just written: the first estimate, at start, holds its message ("reading its
    backlog", logged once) until the traceback is flushed 2 s later; files whose writer is
    long gone (mtime older than WRITER_GONE_S) are flushed as they are read, and the first
    estimate posts. Either way one message is posted, and its detail counts the OOM."""
    runs = tmp_path / "runs"
    runs.mkdir()
    _write_runs(runs)
    if age_s:
        then = time.time() - age_s
        for path in runs.iterdir():
            os.utime(path, (then, then))
    env = dict(os.environ, CKPT_ADVISOR_TEST_TOKEN=fake_slack.token)
    log = tmp_path / "daemon.log"
    with log.open("w") as stderr:
        run = ["run", "--config", str(_config(tmp_path, fake_slack))]
        proc = subprocess.Popen(
            [sys.executable, "-m", "ckpt_advisor.agent", *run], env=env, stderr=stderr
        )
    try:
        fake_slack.wait_for(2, timeout_s=30)  # the message and its detail
        time.sleep(3.0)  # the estimates the flush and the failure ask for: nothing more posted
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    top = [m for m in fake_slack.posted if "thread_ts" not in m]
    assert len(top) == 1
    details = [m["text"] for m in fake_slack.posted if "Failures by class" in (m["text"] or "")]
    assert len(details) == 1
    assert "cuda_oom ×1" in details[0]
    assert "unknown ×4" in details[0]

    history = open_store(tmp_path / "state" / "ckpt.db").estimate_history(job="llama-8b")
    codes = [e["decision"]["code"] for e in history]
    waits = log.read_text().count("no message: messages wait: reading its backlog: 6 file(s)")
    if age_s:
        assert (codes[0], waits) == ("drift", 0)
    else:  # held at start, the stored failures as yet without the OOM
        assert codes[0] == "reading_backlog"
        assert history[0]["decision"]["held"] == "notify"
        assert history[0]["failure_classes"] == {"unknown": 5}
        assert waits == 1
        assert codes[1] == "drift"
