"""Odd input gets a clear answer, from every command alike: paths that are not files, overlong
lines, binary files, unknown jobs, silences, history, a dead daemon (issue 18). Real files,
FIFOs, stores and subprocesses in a tmp dir."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.contracts import estimate_json
from ckpt_advisor.agent.daemon.heartbeat import Heartbeat, heartbeat_path, write_heartbeat
from ckpt_advisor.agent.store import open_store
from tests.agent.helpers import make_odd_paths, unreadable_file
from tests.agent.processes import start_daemon, until
from tests.samples import drifting_estimate

FIXTURES = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
CLI = [sys.executable, "-m", "ckpt_advisor.agent"]


def _odd_logs(tmp_path: Path) -> Path:
    """``logs/`` holding a real log and every kind of path that is not a regular file."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_bytes((FIXTURES / "lightning_crash.log").read_bytes())
    make_odd_paths(logs, tmp_path / "nowhere")
    return logs


ODD = {
    "dangling.log": "a dangling symlink, not a regular file",
    "dir.log": "a directory, not a regular file",
    "fifo.log": "a FIFO (named pipe), not a regular file",
    "loop1.log": "a symlink loop, not a regular file",
}


def test_parse_skips_what_is_not_a_file_and_never_opens_a_fifo(tmp_path: Path) -> None:
    """`parse` of a FIFO, a directory, a dangling symlink and a symlink loop beside a log names
    each on stderr and skips it (a FIFO opened for reading would hang the command), prints the
    log's events, and exits 1."""
    logs = _odd_logs(tmp_path)
    paths = [str(logs / name) for name in ("a.log", *ODD)]
    done = subprocess.run([*CLI, "parse", "--json", *paths], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1
    assert [f"ckpt-advisor: {logs / n}: {why}: skipped" for n, why in ODD.items()] == (
        done.stderr.splitlines()[:4]
    )
    assert done.stderr.splitlines()[-1] == "ckpt-advisor: 4 of 5 file(s) skipped (named above)"
    kinds = [json.loads(line)["kind"] for line in done.stdout.splitlines()]
    assert kinds.count("checkpoint_start") == 3 and kinds.count("failure") == 1


def test_ingest_skips_what_is_not_a_file_naming_each(tmp_path: Path) -> None:
    """`ingest logs/*` stores the log, names each path that is not a file (never opening the
    FIFO), and exits 1 after its summary (on stdout)."""
    logs = _odd_logs(tmp_path)
    paths = sorted(str(p) for p in logs.iterdir())
    done = subprocess.run(
        [*CLI, "ingest", *paths, "--job", "lt", "--db", str(tmp_path / "s.db")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.startswith("lt: 98 line(s) read, 7 event(s) stored from 1 file(s)")
    for name, why in {**ODD, "loop2.log": "a symlink loop, not a regular file"}.items():
        assert f"ckpt-advisor: {logs / name}: {why}: skipped" in done.stderr


def test_check_config_lists_each_globs_matches_by_type(tmp_path: Path) -> None:
    """check-config counts a glob's matches by type, says the others are skipped, and warns
    once about each, naming it; a binary file matched is named too."""
    logs = _odd_logs(tmp_path)
    (logs / "model.log").write_bytes(gzip.compress(b"weights" * 1000))
    config = tmp_path / "c.toml"
    config.write_text(
        f'[store]\npath = "{tmp_path}/s.db"\n[[jobs]]\nname = "j"\nlogs = ["{logs}/*.log"]\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert (
        f"job j: logs {logs}/*.log: 2 file(s) now; also 1 FIFO, 1 dangling symlink, "
        "1 directory, 2 symlink loop, skipped"
    ) in result.stdout
    for name, why in ODD.items():
        assert f"warning: job j: {logs / name}: {why}: the daemon skips it" in result.stderr
    assert f"{logs / 'model.log'}: looks binary (NUL bytes" in result.stderr


def test_parse_skips_an_overlong_line_naming_it_with_bounded_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 64 MiB line is skipped by `parse` as by the daemon and `ingest` (the same 1 MiB limit,
    the same warning naming file and line; `ingest` counts it apart); the save after it is
    read; parse's Python memory stays a few MiB (it read the line whole: 2 GB for a 200 MB
    line)."""
    log = tmp_path / "big.log"
    real = (FIXTURES / "hf_trainer_crash.log").read_bytes().split(b"\n")[27]  # a save's start
    save = real[real.index(b"[INFO|") :].decode()
    log.write_bytes(b"x" * (64 << 20) + b"\n" + save.encode() + b"\n")
    tracemalloc.start()
    result = CliRunner().invoke(main, ["parse", "--json", str(log)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"ckpt-advisor: {log}:1: line of 67,108,864 bytes skipped (longer than 1 MiB: the "
        "limit everywhere logs are read)\n"
    )
    [row] = [json.loads(line) for line in result.stdout.splitlines()]
    assert (row["kind"], row["line"], row["step"]) == ("checkpoint_start", 2, 25)
    assert peak < 16 << 20
    db = str(tmp_path / "ckpt.db")
    ingested = CliRunner().invoke(main, ["ingest", str(log), "--job", "j", "--db", db])
    assert ingested.exit_code == 0, ingested.output
    assert result.stderr.removeprefix("ckpt-advisor: ").strip() in caplog.text  # the same words
    assert "j: 2 line(s) read (1 too long, skipped), 1 event(s) stored" in ingested.stdout


def test_a_binary_file_is_named_as_such(tmp_path: Path) -> None:
    """`parse` and `ingest` of a compressed file say it looks binary, naming it, instead of
    "0 events"."""
    blob = tmp_path / "train.log.gz"
    blob.write_bytes(gzip.compress((FIXTURES / "hf_trainer_crash.log").read_bytes()))
    parsed = CliRunner().invoke(main, ["parse", str(blob)])
    assert parsed.exit_code == 1
    assert f"ckpt-advisor: {blob}: looks binary (NUL bytes" in parsed.stderr
    ingested = CliRunner().invoke(main, ["ingest", str(blob), "--job", "j",
                                         "--db", str(tmp_path / "s.db")])  # fmt: skip
    assert ingested.exit_code == 1
    assert f"{blob}: looks binary" in ingested.stderr


def test_parse_of_nothing_readable_names_each_and_prints_no_table(tmp_path: Path) -> None:
    """`parse` of a missing file and of a regular file whose first read fails (EIO:
    /proc/self/mem) names each on stderr and exits 1, with no traceback and no empty table."""
    missing = tmp_path / "missing.log"
    result = CliRunner().invoke(main, ["parse", str(missing), "/proc/self/mem"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"ckpt-advisor: {missing}: No such file or directory: skipped",
        "ckpt-advisor: /proc/self/mem: Input/output error: skipped",
        "ckpt-advisor: 2 of 2 file(s) skipped (named above)",
    ]


@pytest.fixture
def store_db(tmp_path: Path) -> Path:
    """A store with job ``llama-70b``'s two estimates, a day apart (the last an hour ago)."""
    db = tmp_path / "s.db"
    store = open_store(db)
    now_s = datetime.now(UTC).timestamp()
    for at_s in (now_s - 86400 - 3600, now_s - 3600):
        est = drifting_estimate(computed_at_s=at_s)
        store.save_estimate(est.job, at_s, str(est.status), estimate_json(est))
    store.close()
    return db


@pytest.mark.parametrize(
    "args",
    [
        ("events", "--job", "nosuch"),
        ("estimates", "--job", "nosuch", "--json"),
        ("estimates", "--job", "nosuch"),
        ("simulate", "--job", "nosuch"),
        ("plot", "--job", "nosuch", "-o", "x.png"),
        ("silence", "--job", "nosuch", "--for", "1h"),
        ("goodput", "--job", "nosuch"),
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_an_unknown_job_is_named_with_the_known_ones(store_db: Path, args: tuple[str, ...]) -> None:
    """Every command given a job the store does not know exits 1 naming the known ones,
    never an empty table or `[]`."""
    result = CliRunner().invoke(main, [*args, "--db", str(store_db)])
    assert result.exit_code == 1
    assert result.stderr == "ckpt-advisor: no job 'nosuch' here; known: llama-70b\n"


def test_a_silence_shows_in_status_and_estimates_until_cleared(store_db: Path) -> None:
    """After `silence --for 24h`, `silence --list`, `status` (text and JSON) and `estimates`
    (table and JSON) show the silence with its end; `--clear` ends it and every view forgets
    it."""
    db = ["--db", str(store_db)]

    def run(*args: str) -> str:
        return CliRunner().invoke(main, [*args, *db]).stdout

    set_ = CliRunner().invoke(main, ["silence", "--job", "llama-70b", "--for", "24h", *db])
    assert set_.exit_code == 0, set_.output
    until = json.loads(run("estimates", "--json"))[0]["silenced_until"]
    until_s = datetime.fromisoformat(until).timestamp()
    assert abs(until_s - time.time() - 86400) < 60
    shown = datetime.fromtimestamp(until_s, UTC).strftime("%Y-%m-%d %H:%M")
    listed = run("silence", "--list")
    assert listed.startswith(f"llama-70b: silenced until {shown} UTC (in ")  # 23h 59m, or 1d 0h
    assert listed.endswith(")\n")
    assert f"silenced: llama-70b until {shown} UTC (in " in run("status")
    assert json.loads(run("status", "--json"))["silenced"] == {"llama-70b": until}
    assert f"{shown} UTC (in " in run("estimates")
    assert run("silence", "--job", "llama-70b", "--clear") == "llama-70b: silence ended\n"
    assert run("silence", "--list") == "no job is silenced\n"
    assert json.loads(run("estimates", "--json"))[0]["silenced_until"] is None
    assert "silenced:" not in run("status")


def test_estimates_history_has_a_time_column(store_db: Path) -> None:
    """`estimates --since 2d` prints one row per stored estimate, oldest first, each with the
    time it was computed; a window holding none says so (not "no estimates stored yet")."""
    out = CliRunner().invoke(main, ["estimates", "--since", "2d", "--db", str(store_db)]).stdout
    shown, rest = out.split("\nwhy:\n")
    why = rest.split("\nnotes:\n")[0]
    [header] = [line for line in shown.splitlines() if "computed" in line and "job" in line]
    rows = [line.split() for line in shown.splitlines() if "llama-70b" in line]
    now = datetime.now(UTC)
    stamps = [datetime.fromisoformat(f"{r[0]}T{r[1]}+00:00") for r in rows]
    assert [round((now - s).total_seconds() / 3600) for s in stamps] == [25, 1]
    assert header.split()[:3] == ["computed", "job", "status"]
    assert [line.split()[:2] for line in why.splitlines()] == [["llama-70b", r[0]] for r in rows]
    empty = CliRunner().invoke(main, ["estimates", "--since", "30m", "--db", str(store_db)])
    assert empty.exit_code == 1
    assert empty.stderr == "ckpt-advisor: no estimate computed in the last 30m 00s\n"


def test_parse_gives_each_step_once_and_a_failure_the_bars_last_step() -> None:
    """`parse` shows one step event per step of a run (the HF bar redrawn after a save's start
    gives none), and Lightning's failure at the step its bar last reached (130, not the last
    save's 120)."""
    out = CliRunner().invoke(main, ["parse", "--json", str(FIXTURES / "hf_trainer_crash.log")])
    steps = [json.loads(r)["step"] for r in out.stdout.splitlines() if '"kind": "step"' in r]
    assert steps == [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 59]
    out = CliRunner().invoke(main, ["parse", "--json", str(FIXTURES / "lightning_crash.log")])
    [failure] = [json.loads(r) for r in out.stdout.splitlines() if '"kind": "failure"' in r]
    assert failure["step"] == 130


def test_status_of_a_dead_daemon_does_not_say_up_since(tmp_path: Path) -> None:
    """A heartbeat whose process is gone reads "not running", with when it started and was
    last heard of, never "up since"; JSON says `running: false`."""
    db = tmp_path / "s.db"
    open_store(db).close()
    now_s = time.time()
    hb = Heartbeat(
        pid=2**22 + 1,  # above the kernel's pid_max: no such process
        started_s=now_s - 7200,
        updated_s=now_s - 3600,
        poll_every_s=2.0,
        estimate_every_s=300.0,
        jobs=["j"],
        last_scan_s=now_s - 3600,
    )
    write_heartbeat(heartbeat_path(db), hb)
    result = CliRunner().invoke(main, ["status", "--db", str(db)])
    assert result.exit_code == 1
    assert "up since" not in result.stdout
    assert (
        f"daemon pid {2**22 + 1} not running: started 2h 00m ago, last heard of 1h 00m ago; "
        "jobs then: j"
    ) in result.stdout
    status = json.loads(CliRunner().invoke(main, ["status", "--db", str(db), "--json"]).stdout)
    assert status["running"] is False


def test_status_names_the_jobs_whose_messages_wait_for_their_backlog(tmp_path: Path) -> None:
    """A running daemon's heartbeat with a job still reading its backlog: `status` says why its
    messages wait and how far behind it is; JSON has it under the daemon's `waiting`."""
    db = tmp_path / "s.db"
    open_store(db).close()
    now_s = time.time()
    waiting = {"llama-8b": {"files": 3, "bytes_behind": 12_400_000}}
    hb = Heartbeat(
        pid=os.getpid(),
        started_s=now_s - 60,
        updated_s=now_s,
        poll_every_s=2.0,
        estimate_every_s=300.0,
        jobs=["llama-8b"],
        last_scan_s=now_s,
        waiting=waiting,
    )
    write_heartbeat(heartbeat_path(db), hb)
    result = CliRunner().invoke(main, ["status", "--db", str(db)])
    assert "  llama-8b: messages wait: reading its backlog: 3 file(s), 12.4 MB behind\n" in (
        result.stdout
    )
    status = json.loads(CliRunner().invoke(main, ["status", "--db", str(db), "--json"]).stdout)
    assert status["daemon"]["waiting"] == waiting


def test_estimates_table_keeps_numbers_whole_on_a_narrow_screen(store_db: Path) -> None:
    """On a 60-column screen no cell of `estimates` is cut to "…": the columns keep their
    widest cell, the free-text reasons and notes go under the table as "job: text" lines
    (folded there), and the tiers and silence columns, empty for every job, are left out."""
    wide = json.loads(
        CliRunner().invoke(main, ["estimates", "--db", str(store_db), "--json"]).stdout
    )
    out = CliRunner(env={"COLUMNS": "60"}).invoke(main, ["estimates", "--db", str(store_db)]).stdout
    assert "…" not in out
    shown, rest = out.split("\nwhy:\n")
    why, notes = rest.split("\nnotes:\n")
    header = next(line for line in shown.splitlines() if "status" in line)
    assert "tiers" not in header and "silenced" not in header and "why" not in header
    assert " ".join(why.split()) == " ".join(f"{r['job']}: {r['decision_text']}" for r in wide)
    assert " ".join(notes.split()) == " ".join(f"{r['job']}: {n}" for r in wide for n in r["notes"])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ingest_names_a_last_line_with_no_newline(tmp_path: Path, workers: str) -> None:
    """A log cut mid-line, just written (its writer may still be there), is read up to its
    last newline, and `ingest` says how many bytes after it were left unread, read by one
    process or in a worker; once the line ends, a second ingest reads it and no longer
    warns."""
    text = (FIXTURES / "hf_trainer_crash.log").read_bytes()
    cut = text.index(b"\n", 3000) - 40  # 40 bytes into the line ending after byte 3000
    log = tmp_path / "train.log"
    log.write_bytes(text[:cut])
    args = ["ingest", str(log), "--job", "j", "--db", str(tmp_path / "s.db"), "--workers", workers]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.stderr
    unread = cut - (text.rindex(b"\n", 0, cut) + 1)
    assert first.stderr == (
        f"ckpt-advisor: new store {tmp_path / 's.db'}: created\n"
        f"ckpt-advisor: {log}: its last {unread:,} byte(s) end in no newline, so they were not "
        "read: a line still being written, or cut off when its writer died; they are read once "
        "a newline follows them or the file is 5 minutes old (ingest again, or let the daemon "
        "follow the file)\n"
    )
    log.write_bytes(text)
    second = CliRunner().invoke(main, args)
    assert (second.exit_code, second.stderr) == (0, "")
    lines = int(first.stdout.split()[1]) + int(second.stdout.split()[1])
    assert lines == text.count(b"\n")


def test_events_number_two_failures_at_one_line_of_a_rewritten_file_apart(tmp_path: Path) -> None:
    """A log rewritten in place (copytruncate) with a later run prints its failure at the same
    train.log:46: `events` numbers the two failures #1 and #2, each made of its own line (they
    were both #2, keyed on source:line alone)."""
    log, db = tmp_path / "train.log", str(tmp_path / "s.db")
    text = (FIXTURES / "hf_trainer_crash.log").read_bytes()
    for day in (text, text.replace(b"2026-11-29 22:", b"2026-11-30 10:")):
        log.write_bytes(day)
        assert (
            CliRunner().invoke(main, ["ingest", str(log), "--job", "j", "--db", db]).exit_code == 0
        )
    out = CliRunner().invoke(main, ["events", "--db", db, "--kind", "failure", "--json"]).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["time"][:10], r["interruption"], r["interruption_lines"]) for r in rows] == [
        ("2026-11-29", 1, [f"{log}:46"]),
        ("2026-11-30", 2, [f"{log}:46"]),
    ]


def test_a_file_this_user_cannot_read_is_named_and_skipped(tmp_path: Path) -> None:
    """`parse` and `ingest` of a log beside one this user may not read: the unreadable one is
    named and skipped like a FIFO, the log is read, and the exit is 1 at the end (click refused
    the whole command before: "Path '…' is not readable", exit 2, nothing read)."""
    good, bad = tmp_path / "a.log", tmp_path / "unreadable.log"
    good.write_bytes((FIXTURES / "lightning_crash.log").read_bytes())
    bad.write_bytes(good.read_bytes())
    prefix = unreadable_file(bad)
    parsed = subprocess.run([*prefix, *CLI, "parse", "--json", str(good), str(bad)],
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (parsed.returncode, parsed.stderr.splitlines()) == (
        1,
        [
            f"ckpt-advisor: {bad}: Permission denied: skipped",
            "ckpt-advisor: 1 of 2 file(s) skipped (named above)",
        ],
    )
    kinds = [json.loads(line)["kind"] for line in parsed.stdout.splitlines()]
    assert kinds.count("checkpoint_start") == 3 and kinds.count("failure") == 1
    db = str(tmp_path / "s.db")
    ingested = subprocess.run(
        [*prefix, *CLI, "ingest", str(good), str(bad), "--job", "lt", "--db", db],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ingested.returncode == 1
    assert ingested.stdout.startswith("lt: 98 line(s) read, 7 event(s) stored from 1 file(s)")
    assert ingested.stderr.splitlines()[0] == f"ckpt-advisor: {bad}: Permission denied: skipped"
    assert ingested.stderr.splitlines()[-1] == "ckpt-advisor: 1 of 2 file(s) skipped (named above)"


def _status(db: Path) -> tuple[str, dict[str, Any]]:
    text = subprocess.run([*CLI, "status", "--db", str(db)], capture_output=True, text=True)
    js = subprocess.run([*CLI, "status", "--db", str(db), "--json"], capture_output=True, text=True)
    return text.stdout, json.loads(js.stdout)


def test_status_names_a_binary_match_and_an_earlier_daemon_s_last_read(tmp_path: Path) -> None:
    """A glob matching a log (its last 28 bytes not a line yet) and a gzip of 923 bytes: the
    gzip is listed as looking binary, never as lagging ("1,009 bytes behind, last read never"
    before), the log's unfinished last line is no lag either (a live job's progress bar is
    such a line all the time: "28 bytes behind" before), and its last read is known in a second
    daemon that has read nothing new (the store's ``files.updated_s``; "never" before)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    log, gz = runs / "a.log", runs / "model.bin"
    log.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes() + b"x" * 28)
    gz.write_bytes(gzip.compress(bytes(range(256)) * 3, mtime=0))
    db = tmp_path / "s.db"
    config = tmp_path / "c.toml"
    config.write_text(
        f'[store]\npath = "{db}"\n[schedule]\npoll_every = "0.2s"\n'
        f'[[jobs]]\nname = "j"\nlogs = ["{runs}/*"]\n'
    )
    binary = f"NUL bytes in its first {gz.stat().st_size:,} bytes"
    lags: dict[str, Any] = {}
    for run in ("first", "second"):
        daemon = start_daemon(config)
        try:
            assert until(lambda: len(_status(db)[1]["daemon"]["files"]) == 2)
            text, report = _status(db)
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=20) == 0
        lags[run] = {Path(f["path"]).name: f for f in report["daemon"]["files"]}
        assert report["healthy"] is True and report["lagging"] == []
        assert report["binary"] == [{"job": "j", "path": str(gz), "why": binary}]
        assert (lags[run]["model.bin"]["lag_bytes"], lags[run]["a.log"]["lag_bytes"]) == (0, 0)
        assert "lagging" not in text
        assert lags[run]["a.log"]["last_read_s"] is not None
        assert (
            f"  looks binary: {gz} (j): {binary}; no events expected, no lag counted; narrow "
            "the glob\n"
        ) in text
    first, second = lags["first"]["a.log"]["last_read_s"], lags["second"]["a.log"]["last_read_s"]
    assert first <= second < first + 5  # the first daemon's commit, as the store keeps it
