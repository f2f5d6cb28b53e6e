"""Each fresh torchrun launch is a run of its own (new-user trial): two real launches of a plain
print loop (torch 2.13 captures, tests/parsers/fixtures/torch/), each training steps 1-5 and
dying, 31 s apart, were one interruption (``#1 +5``) and left no running time to divide; moved
7, 17 or 37 minutes apart, still one up to the 30-min silent gap. Ingested and estimated with
the CLI, as the user did."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main

TORCH = Path(__file__).parents[1] / "parsers" / "fixtures" / "torch"
RAISE, SIGKILL = TORCH / "torchrun_raise.log", TORCH / "torchrun_sigkill.log"
GLOG = re.compile(r"^(?P<level>[IWE])(?P<stamp>\d{4} \d\d:\d\d:\d\d)", re.MULTILINE)
BANNER = re.compile(r"(?P<field>time\s+: )(?P<stamp>\S+)")


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _later(path: Path, out: Path, minutes: int) -> Path:
    """``path`` with every printed time (glog ``W1129 23:03:17``, the banner's ``time :``)
    ``minutes`` later."""
    shift = timedelta(minutes=minutes)

    def glog(m: re.Match[str]) -> str:
        moved = datetime.strptime(f"2026{m['stamp']}", "%Y%m%d %H:%M:%S") + shift
        return f"{m['level']}{moved:%m%d %H:%M:%S}"

    def banner(m: re.Match[str]) -> str:
        moved = datetime.strptime(m["stamp"], "%Y-%m-%d_%H:%M:%S") + shift
        return f"{m['field']}{moved:%Y-%m-%d_%H:%M:%S}"

    out.write_text(BANNER.sub(banner, GLOG.sub(glog, path.read_text())))
    return out


def _ingested(db: Path, *logs: Path) -> tuple[dict[str, Any], dict[str, set[int]]]:
    """The job's estimate, and per log file the interruptions its failure lines went to."""
    _run("ingest", *map(str, logs), "--job", "j", "--db", str(db))
    [estimate] = json.loads(_run("estimates", "--job", "j", "--db", str(db), "--json"))
    failures = _run("events", "--job", "j", "--kind", "failure", "--db", str(db), "--json")
    interruptions: dict[str, set[int]] = {}
    for row in map(json.loads, failures.splitlines()):
        interruptions.setdefault(Path(row["source"]).name, set()).add(row["interruption"])
    return estimate, interruptions


@pytest.mark.parametrize("minutes", [0, 7, 17, 37])
def test_two_launches_are_two_interruptions_and_m_is_their_running_time(
    tmp_path: Path, minutes: int
) -> None:
    """Each launch's banner (``Setting OMP_NUM_THREADS …``, 23:02:42 and 23:03:17) starts a run
    that its crash ends (23:02:56, 23:03:27): 2 interruptions, 14 + 10 s of running time, M 12 s
    (one interruption of no measured running time before, M unknown), however far apart."""
    second = _later(SIGKILL, tmp_path / "second.log", minutes)
    estimate, interruptions = _ingested(tmp_path / "s.db", RAISE, second)
    assert (estimate["n_failures"], estimate["exposure_s"]) == (2, 24.0)
    assert estimate["mtbf_s"] == pytest.approx(12.0)
    assert interruptions == {"torchrun_raise.log": {1}, "second.log": {2}}


def test_the_rank_echoes_of_one_launch_are_one_interruption(tmp_path: Path) -> None:
    """One launch: rank 1's RuntimeError, rank 0's gloo error, the launcher's exit code and its
    ChildFailedError banner are one interruption, 14 s after the launch."""
    estimate, interruptions = _ingested(tmp_path / "s.db", RAISE)
    assert (estimate["n_failures"], estimate["exposure_s"]) == (1, 14.0)
    assert estimate["failure_classes"] == {"python_exception": 1}
    assert interruptions == {"torchrun_raise.log": {1}}


@pytest.mark.parametrize(
    ("name", "cause"),
    [("torchrun_sigkill.log", "killed"), ("torchrun_abort.log", "abort"),
     ("torchrun_segfault.log", "segfault"), ("torchrun_raise.log", "python_exception")],
)  # fmt: skip
def test_a_rank_killed_by_a_signal_is_the_cause_not_its_peers_gloo_error(
    tmp_path: Path, name: str, cause: str
) -> None:
    """Rank 1 killed by a signal prints no traceback; rank 0's all_reduce then fails (gloo
    ``Connection reset by peer``) before torchrun reports the signal as the root cause. The
    interruption's class is the signal's (it was rank 0's ``python_exception``: a code bug
    where the trial had killed the process); when rank 1 raised, its exception stays the cause
    and rank 0's gloo error is no failure of its own."""
    estimate, interruptions = _ingested(tmp_path / "s.db", TORCH / name)
    assert estimate["n_failures"] == 1
    assert estimate["failure_classes"] == {cause: 1}
    assert interruptions == {name: {1}}
