"""The advice file and /advice/JOB: what the daemon writes is what the training side reads."""

from __future__ import annotations

import dataclasses
import json
import logging
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ckpt_advisor.agent.advice import AdviceBoard, advice_file_name, advice_json
from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.contracts import estimate_json
from ckpt_advisor.agent.daemon.metrics import Metrics
from ckpt_advisor.agent.notify.detail import detail_facts
from ckpt_advisor.agent.training import AdoptionPolicy, AdvisedInterval
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.adoption import parse_advice
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import (
    Action,
    AlertState,
    Decision,
    Observation,
    Reason,
    ReasonCode,
    Status,
)
from tests.agent.helpers import advice_of
from tests.rules.simulate import T0, two_tier_trace
from tests.samples import drifting_estimate

if TYPE_CHECKING:
    from ckpt_advisor.rules.model import JobEstimate

NOW_S = 1_700_000_000.0  # drifting_estimate's computed_at


def test_advice_file_round_trips_through_the_training_side(tmp_path: Path) -> None:
    """The file written for a drifting job parses with parse_advice to the estimate's values,
    is readable by other users (0644), leaves no temp file, and AdvisedInterval, 8 s a step
    at 1,800 steps, halves its interval towards the advised 450 steps."""
    board = AdviceBoard(tmp_path / "advice")
    est = drifting_estimate()
    board.publish([est])
    path = tmp_path / "advice" / "llama-70b.json"
    assert board.path("llama-70b") == path
    advice = parse_advice(json.loads(path.read_text()))
    assert (advice.job, advice.status) == ("llama-70b", "drift")
    assert advice.recommended_interval_s == 3600.0
    assert advice.recommended_interval_steps == 450
    assert advice.computed_at_s == NOW_S
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["llama-70b.json"]
    schedule = AdvisedInterval(
        path,
        interval_steps=1800,
        policy=AdoptionPolicy(min_interval_s=600.0, max_interval_s=20_000.0),
        clock=lambda: NOW_S + 60.0,
    )
    assert schedule.step_done(1) == 900  # at most halved per change (max_change_factor 2)


def test_a_new_estimate_replaces_the_file_and_names_are_encoded(tmp_path: Path) -> None:
    """A second estimate replaces the first one's advice (status ok, no interval); a job name
    with a slash is one file in the directory, percent-encoded."""
    board = AdviceBoard(tmp_path)
    board.publish([drifting_estimate(job="team/a")])
    board.publish([drifting_estimate(job="team/a", status=Status.OK, recommended_interval_s=None)])
    assert advice_file_name("team/a") == "team%2Fa.json"
    record = json.loads((tmp_path / "team%2Fa.json").read_text())
    assert record["status"] == "ok"
    assert record["recommended_interval_s"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team%2Fa.json"]


def test_unwritable_directory_warns_once_keeps_the_advice_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A directory path that is a file: one warning over two estimates, the advice still served
    from memory; once it is a directory the file is written and that is logged."""
    blocked = tmp_path / "advice"
    blocked.write_text("not a directory")
    board = AdviceBoard(blocked, endpoint=True)
    with caplog.at_level(logging.INFO, logger="ckpt_advisor.agent.advice"):
        board.publish([drifting_estimate()])
        board.publish([drifting_estimate()])
        assert sum("cannot write advice file" in r.getMessage() for r in caplog.records) == 1
        got = board.get("llama-70b")
        assert got is not None and got["status"] == "drift"
        blocked.unlink()
        board.publish([drifting_estimate()])
    assert (blocked / "llama-70b.json").is_file()
    assert any("written again" in r.getMessage() for r in caplog.records)


@pytest.fixture
def listener() -> Iterator[tuple[AdviceBoard, int]]:
    """A real metrics listener on a free loopback port serving a board's advice."""
    board = AdviceBoard(endpoint=True)
    server = Metrics().serve("127.0.0.1", 0, advice=board)
    yield board, server.server_port
    server.shutdown()
    server.server_close()


def _get(port: int, path: str) -> tuple[int, str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], json.loads(exc.read())


def test_endpoint_serves_advice_404s_unknown_jobs_and_keeps_metrics(
    listener: tuple[AdviceBoard, int],
) -> None:
    """/advice/JOB answers the job's advice as JSON (name percent-decoded); an unknown job, or
    the endpoint switched off, is a 404 with a JSON error; /metrics is still the metrics."""
    board, port = listener
    board.publish([drifting_estimate(job="team/a")])
    code, kind, body = _get(port, "/advice/team%2Fa")
    assert (code, kind) == (200, "application/json")
    assert parse_advice(json.loads(body)).recommended_interval_steps == 450
    assert _get(port, "/advice/nope") == (
        404,
        "application/json",
        {"error": "no advice for job 'nope'"},
    )
    code, kind, body = _get(port, "/metrics")
    assert code == 200 and kind.startswith("text/plain") and "ckpt_advisor_lines" in body
    board.configure(None, endpoint=False)
    assert _get(port, "/advice/team%2Fa")[2] == {"error": "[advice] endpoint is off"}


CAPTURE = Path(__file__).parents[1] / "parsers" / "fixtures" / "adoption"


def _estimate_prefix(tmp: Path, log_text: str, *, until_step: int) -> dict[str, Any]:
    """Ingest the capture's log and timing records up to ``until_step``'s save and estimate."""
    tmp.mkdir()
    (tmp / "train.log").write_text(log_text)
    records = (CAPTURE / "ckpt_timings.jsonl").read_text().splitlines(keepends=True)
    timings = [r for r in records if json.loads(r)["step"] <= until_step]
    (tmp / "ckpt_timings.jsonl").write_text("".join(timings))
    db = str(tmp / "s.db")
    paths = [str(tmp / "train.log"), str(tmp / "ckpt_timings.jsonl")]
    assert CliRunner().invoke(main, ["ingest", *paths, "--job", "demo", "--db", db]).exit_code == 0
    out = CliRunner().invoke(main, ["estimates", "--json", "--db", db]).stdout
    found: dict[str, Any] = json.loads(out)[0]
    return found


def test_current_interval_is_measured_after_the_last_interval_change(tmp_path: Path) -> None:
    """The real HF run up to its save at step 126: saves at 50, 75, 84, 94, 104, 115, 126 while
    the callback moved the interval 50 -> 25 -> 13 -> 9 -> 10 -> 11 steps (last change at step
    109). The current interval is the one save gap since (115 -> 126: 11 steps), not the median
    of every gap (10 steps, 1.7 s) that the same log without its change lines gives."""
    text = (CAPTURE / "hf_adoption.log").read_text()
    cut = text[: text.index("checkpoint-137")]
    cut = cut[: cut.rindex("\n") + 1]
    est = _estimate_prefix(tmp_path / "adopted", cut, until_step=126)
    timings = [json.loads(r) for r in (CAPTURE / "ckpt_timings.jsonl").read_text().splitlines()]
    end_s = {r["step"]: datetime.fromisoformat(r["end"]).timestamp() for r in timings}
    assert est["current_interval_steps"] == 11
    assert est["current_interval_s"] == pytest.approx(
        end_s[126] - end_s[115] - est["checkpoint_cost_s"], rel=1e-6
    )
    unmarked = cut.replace("checkpoint interval changed", "checkpoint interval noted")
    mixed = _estimate_prefix(tmp_path / "unmarked", unmarked, until_step=126)
    assert mixed["current_interval_steps"] == 10
    assert mixed["current_interval_s"] > 1.5 > est["current_interval_s"]


def _two_tier_estimate() -> JobEstimate:
    """The estimate of a generated two-tier job: memory every 50 min, every 2nd save
    persistent, 30 days of NCCL timeouts every 8 h and node losses every 24 h."""
    trace = two_tier_trace(
        fast_cost_s=5.0,
        persistent_cost_s=300.0,
        fast_interval_s=3000.0,
        saves_per_persistent=2,
        class_mtbf_s={"nccl_timeout": 8 * 3600.0, "node_failure": 24 * 3600.0},
        restart_s=300.0,
        days=30.0,
    )
    return estimate_job("two", trace.observations, now_s=T0 + 31 * 86400.0)


def test_a_two_tier_jobs_pair_is_in_the_advice_the_json_and_the_metrics() -> None:
    """A generated two-tier job (memory every 50 min, every 2nd save persistent): the advice
    file's tiers hold the pair (memory T1, persistent k·T1, in seconds and steps) that
    parse_advice reads per tier, estimates --json has the per-tier C and M, and the tier
    gauges carry each tier's C, M and intervals."""
    est = _two_tier_estimate()
    tiers = est.tiers
    assert tiers is not None and tiers.fast_interval_s is not None
    advice = parse_advice(json.loads(json.dumps(advice_json(est))))
    assert advice.status == "drift"
    assert advice.interval_s("memory") == tiers.fast_interval_s
    assert advice.interval_s("persistent") == pytest.approx(
        tiers.fast_interval_s * tiers.saves_per_persistent
    )
    assert advice.interval_steps("persistent") == tiers.persistent_interval_steps
    assert advice.recommended_interval_s == advice.interval_s("persistent")
    shown = json.loads(json.dumps(estimate_json(est)))["tiers"]
    assert shown["fast_cost_s"] == pytest.approx(5.0, rel=0.03)
    assert shown["mtbf_persistent_s"] == tiers.mtbf_persistent_s
    assert shown["persistent_interval_s"] == advice.interval_s("persistent")
    metrics = Metrics()
    metrics.set_estimates([advice_of(est)])
    text = generate_latest(metrics.registry).decode()
    samples = {
        (s.name, s.labels.get("tier")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name.startswith("ckpt_advisor_tier_")
    }
    assert samples[("ckpt_advisor_tier_checkpoint_cost_seconds", "persistent")] == pytest.approx(
        300.0, rel=0.03
    )
    assert samples[("ckpt_advisor_tier_mtbf_seconds", "memory")] == tiers.mtbf_recoverable_s
    assert samples[("ckpt_advisor_tier_recommended_interval_seconds", "memory")] == (
        tiers.fast_interval_s
    )
    assert samples[("ckpt_advisor_tier_current_interval_seconds", "persistent")] == (
        pytest.approx(6000.0, rel=0.03)
    )


def test_a_two_tier_jobs_detail_gives_each_tiers_c_and_m_and_the_pair() -> None:
    """The message's detail of a generated two-tier job (memory every 50 min, every 2nd save
    persistent) says each tier's C and M with their counts and the advised pair in seconds and
    steps beside the current one; without an advised pair it says none is advised yet."""
    est = _two_tier_estimate()
    t = est.tiers
    assert t is not None and t.fast_interval_s is not None and t.persistent_interval_s is not None
    drift = Decision(
        Action.NOTIFY,
        Reason(ReasonCode.DRIFT, {"ratio": 2.0, "drift_ratio": 1.5}),
        AlertState(True),
    )
    facts = {f.label: f.text for group in detail_facts(est, drift) for f in group}
    assert facts["Two tiers"] == (
        f"memory: C {format_duration(t.fast_cost_s)}, M "
        f"{format_duration(t.mtbf_recoverable_s)} ({t.n_recoverable} interruptions it survives); "
        f"persistent: C {format_duration(t.persistent_cost_s)}, M "
        f"{format_duration(t.mtbf_persistent_s)} ({t.n_unrecoverable} others)"
    )
    assert facts["Tier pair"].startswith(
        f"memory every {format_duration(t.fast_interval_s)} ({t.fast_interval_s:,.0f} s, "
        f"{t.fast_interval_steps:,} steps of {format_duration(est.step_time_s)}); persistent every "
        f"{format_duration(t.persistent_interval_s)} ({t.persistent_interval_s:,.0f} s, "
        f"{t.persistent_interval_steps:,} steps), one save in {t.saves_per_persistent}; "
    )
    assert facts["Tier pair"].endswith("; now every 50m 00s, one in 2")
    unpaired = dataclasses.replace(est, tiers=dataclasses.replace(t, fast_interval_s=None))
    facts = {f.label: f.text for group in detail_facts(unpaired, drift) for f in group}
    assert facts["Tier pair"] == "none advised yet; now every 50m 00s, one in 2"


def test_the_advice_says_whether_c_is_a_bound_and_how_old_its_data_is(tmp_path: Path) -> None:
    """The advice file carries C, whether it is a lower bound (with its plausible range) and
    the newest event's time and age: a job timed by its timing file alone (a save of 240 s
    every 2 h 04 m), estimated an hour after its last save, has a measured C and data 3,600 s
    old, within one save spacing, and the training side does not take its advice for stale;
    C read from log lines is given as the lower bound it is."""
    spacing_s = 7440.0
    saves = [
        Observation("checkpoint_end", NOW_S + k * spacing_s, 1200 * k, 240.0,
                    from_timing_file=True, source="ckpt_timings.jsonl")
        for k in range(1, 13)
    ]  # fmt: skip
    est = estimate_job("timed", saves, now_s=saves[-1].time_s + 3600.0)
    board = AdviceBoard(tmp_path)
    board.publish([est])
    record = json.loads((tmp_path / "timed.json").read_text())
    assert record["checkpoint_cost_s"] == pytest.approx(240.0)
    assert record["checkpoint_cost_is_lower_bound"] is False
    assert record["checkpoint_cost_range_s"] == [pytest.approx(240.0), pytest.approx(240.0)]
    assert record["newest_event"] == datetime.fromtimestamp(saves[-1].time_s, UTC).isoformat()
    assert record["newest_event_age_s"] == pytest.approx(3600.0)
    assert record["newest_event_age_s"] < record["current_interval_s"] + 240.0
    policy = AdoptionPolicy(min_interval_s=600.0, max_interval_s=20_000.0)
    decision = policy(
        parse_advice(record),
        current_interval_s=record["current_interval_s"],
        now_s=est.computed_at_s + 60.0,
        last_change_s=None,
    )
    assert not decision.stale
    logged = advice_json(
        drifting_estimate(
            checkpoint_cost_source="log",
            checkpoint_cost_is_lower_bound=True,
            checkpoint_cost_range_s=(300.0, None),
            newest_event_s=NOW_S - 90.0,
        )
    )
    assert logged["checkpoint_cost_is_lower_bound"] is True
    assert logged["checkpoint_cost_range_s"] == [300.0, None]
    assert logged["newest_event_age_s"] == 90.0
