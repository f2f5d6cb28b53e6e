"""The estimate's columnar read path (``Store.event_columns`` → ``Timeline.from_columns``) gives
the same timeline, estimate and stack as the object path (``Store.events`` → ``Observation``)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from ckpt_advisor.agent.estimate import ESTIMATE_KINDS, Estimator, clock_findings, timeline_from
from ckpt_advisor.agent.store import (
    FileState,
    Store,
    StoredEvent,
    StoreError,
    open_reader,
    open_store,
)
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.policy import JobFacts
from ckpt_advisor.rules.timeline import Timeline
from tests.agent.helpers import downgrade_to_version_3

NOW = datetime(2027, 1, 1, tzinfo=UTC)
FIXTURES = Path(__file__).parents[2] / "agent" / "fixtures" / "real"


def observations_from(
    events: list[StoredEvent], findings: list[StoredEvent] | None = None
) -> list[Observation]:
    """The object path, one Observation per timed stored event: the reference the columnar
    path must equal. With the job's ``no_timestamps`` ``findings``, an event of a file named
    there is host-dated when its time is estimated, at or after the finding's line and before
    the file's first event with a printed time."""
    first = {f.source: f.event.line for f in findings or []}
    stamped: dict[str, int] = {}
    for se in events:
        if se.event.time is not None and not se.event.time_estimated:
            stamped[se.source] = min(se.event.line, stamped.get(se.source, se.event.line))

    def host_dated(se: StoredEvent) -> bool:
        return (
            se.source in first
            and se.event.time_estimated
            and first[se.source] <= se.event.line < stamped.get(se.source, 1 << 62)
        )

    return [
        Observation(
            kind=str(se.event.kind),
            time_s=se.event.time.timestamp(),
            step=se.event.step,
            duration_s=se.event.duration_s,
            failure_class=se.event.failure_class,
            planned=se.event.planned,
            from_timing_file=se.from_timing_file,
            persist_s=se.event.persist_s,
            source=se.source,
            host_dated=host_dated(se),
        )
        for se in events
        if se.event.time is not None
    ]


def _assert_same_timeline(a: Timeline, b: Timeline) -> None:
    for name in ("time_s", "step", "duration_s", "persist_s"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in (
        "kind", "from_timing_file", "new_source", "failure_index", "failure_planned", "host_dated"
    ):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.failure_class == b.failure_class


def _assert_same_paths(store: Store, job: str) -> None:
    events = store.events(job=job, kinds=ESTIMATE_KINDS)
    findings = store.events(job=job, kinds=["no_timestamps"])
    reference = Timeline.of(observations_from(events, findings))
    columns = store.event_columns(job, ESTIMATE_KINDS)
    _assert_same_timeline(timeline_from(columns), reference)
    parsers = Counter(e.event.parser for e in events if not e.from_timing_file)
    assert list(columns.parser_counts.items()) == parsers.most_common()
    est = Estimator().estimate(store, job, NOW.timestamp())
    stack = parsers.most_common(1)[0][0] if parsers else None
    expected = estimate_job(
        job,
        observations_from(events, findings),
        now_s=NOW.timestamp(),
        facts=JobFacts(stack=stack),
        clock_findings=clock_findings(store, job),
    )
    assert est == expected


def _ingest(store: Store, job: str, *paths: Path) -> None:
    specs = [WatchSpec(job, (str(p),)) for p in paths]
    tailer = Tailer(store, specs, clock=lambda: NOW, tz=UTC, backfill=True)
    tailer.scan()
    tailer.close()


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_columns_match_objects_on_each_real_log(tmp_path: Path, name: str) -> None:
    """Each captured real log gives the same timeline and estimate through both read paths."""
    store = open_store(tmp_path / "s.db")
    _ingest(store, "j", FIXTURES / name)
    assert store.count_events("j") > 0
    _assert_same_paths(store, "j")


def test_columns_match_objects_on_all_real_logs_as_one_job(tmp_path: Path) -> None:
    """Several sources in one job: first-of-source marks and ties agree between the paths."""
    store = open_store(tmp_path / "s.db")
    _ingest(store, "j", *sorted(FIXTURES.glob("*.log")))
    columns = store.event_columns("j", ESTIMATE_KINDS)
    assert int(columns.first_of_source.sum()) == len(list(FIXTURES.glob("*.log")))
    _assert_same_paths(store, "j")


def test_columns_match_objects_on_a_simulated_job(tmp_path: Path) -> None:
    """A week of simulated HF Trainer training with failures estimates the same both ways."""
    job = simulate(mtbf_s=8 * 3600.0, cost_s=120.0, interval_steps=300, duration_s=5 * 86400.0)
    log = tmp_path / "train.log"
    log.write_text("".join(text for _, text in job.log))
    store = open_store(tmp_path / "s.db")
    _ingest(store, "sim", log)
    est = Estimator().estimate(store, "sim", NOW.timestamp())
    assert est.n_failures > 0 and est.n_checkpoints > 0
    assert est.recommended_setting == f"save_steps={est.recommended_interval_steps}"
    _assert_same_paths(store, "sim")


def _tied_store(target: Path | str, password: str | None = None) -> Store:
    """A store of job ``j``: two logs and a timing file, events without time, equal times
    across sources, planned ends and unknown steps."""
    store = open_store(target, password=password)
    t0 = datetime(2026, 5, 1, tzinfo=UTC)

    def at(s: float) -> datetime:
        return t0 + timedelta(seconds=s)

    log_a = [
        Event(EventKind.RUN_START, 1, "lightning", time=at(0)),
        Event(EventKind.STEP, 2, "lightning", time=at(10), step=10, duration_s=1.0),
        Event(EventKind.CHECKPOINT_START, 3, "lightning", time=at(600), step=600),
        Event(EventKind.CHECKPOINT_END, 4, "lightning", time=at(660), step=600),
        Event(EventKind.STEP, 5, "lightning", time=None, step=700),
        Event(EventKind.FAILURE, 6, "lightning", time=at(900), failure_class="cuda_error"),
        Event(EventKind.FAILURE, 7, "lightning", time=at(900), failure_class="killed"),
    ]
    log_b = [
        Event(EventKind.RESUME, 1, "hf_trainer", time=at(900), step=600),
        Event(EventKind.STEP, 2, "hf_trainer", time=at(1500), step=1200, duration_s=1.0),
        Event(EventKind.FAILURE, 3, "hf_trainer", time=at(2000), planned=True, failure_class="t"),
        Event(EventKind.STEP, 4, "hf_trainer", time=at(2000), step=None),
    ]
    timing = [
        Event(EventKind.CHECKPOINT_END, 1, "timing", time=at(660), step=600, duration_s=58.5),
        Event(EventKind.CHECKPOINT_END, 2, "timing", time=at(1600), persist_s=30.0, step=1300),
    ]
    for i, (path, events, timed) in enumerate(
        (("/a.log", log_a, False), ("/b.log", log_b, False), ("/t.jsonl", timing, True))
    ):
        state = FileState(0, "j", path, 1, i, "0" * 32, 1024, 0, 0, 0)
        store.commit_read(
            state, offset=1, lineno=1, events=events, now_s=0.0, from_timing_file=timed
        )
    return store


def test_columns_match_objects_with_timing_files_untimed_events_and_ties(tmp_path: Path) -> None:
    """Timing-file rows, events without time, equal times across sources, planned ends and
    unknown steps all come through the columns as through the objects."""
    store = _tied_store(tmp_path / "s.db")
    columns = store.event_columns("j", ESTIMATE_KINDS)
    assert columns.time_s.size == 12  # the untimed step is left out
    assert columns.failure_planned.tolist() == [False, False, True]
    _assert_same_paths(store, "j")


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 5])
def test_columns_read_in_small_chunks_are_those_of_one_read(
    store_target: Path | str,
    store_password: str | None,
    monkeypatch: pytest.MonkeyPatch,
    chunk_rows: int,
) -> None:
    """Read a few rows per chunk (ties at one time spanning chunks, kinds left out), on each
    backend, the columns equal those of one whole read, and the columns still match the
    objects."""
    store = _tied_store(store_target, store_password)
    kinds = ("checkpoint_end", "failure", "resume", "step")
    whole = [store.event_columns("j", k) for k in (ESTIMATE_KINDS, kinds)]
    monkeypatch.setattr(store, "chunk_rows", chunk_rows)
    for expected, k in zip(whole, (ESTIMATE_KINDS, kinds), strict=True):
        got = store.event_columns("j", k)
        for name in got.__slots__:
            a, b = getattr(got, name), getattr(expected, name)
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=name)
                assert a.dtype == b.dtype, name
            else:
                assert a == b, name
    assert [k[i] for i in whole[1].kind.tolist()] == [
        "step", "checkpoint_end", "checkpoint_end", "failure", "failure", "resume",
        "step", "checkpoint_end", "failure", "step",
    ]  # fmt: skip
    assert whole[1].first_of_source.tolist() == [True] + [False] * 4 + [True] + [False] * 4
    _assert_same_paths(store, "j")


def test_from_columns_refuses_unsorted_times() -> None:
    """Columns out of time order are an error, not a silently wrong timeline."""
    nan = np.full(2, np.nan)
    with pytest.raises(ValueError, match="ascending"):
        Timeline.from_columns(
            time_s=np.array([2.0, 1.0]),
            kind=np.zeros(2, np.int8),
            step=nan,
            duration_s=nan,
            persist_s=nan,
            from_timing_file=np.zeros(2, np.bool_),
            first_of_source=np.zeros(2, np.bool_),
            failure_class=(),
            failure_planned=np.zeros(0, np.bool_),
        )


def test_version_3_store_is_upgraded_and_estimates_the_same(tmp_path: Path) -> None:
    """A store written by schema version 3 (no ``events.numbers``) is refused by the read-only
    estimate with a message saying how to upgrade, then upgraded in place on a read-write open
    to the same estimate."""
    job = simulate(mtbf_s=8 * 3600.0, cost_s=120.0, interval_steps=300, duration_s=2 * 86400.0)
    log = tmp_path / "train.log"
    log.write_text("".join(text for _, text in job.log))
    db = tmp_path / "s.db"
    store = open_store(db)
    _ingest(store, "sim", log)
    before = Estimator().estimate(store, "sim", NOW.timestamp())
    store.close()
    downgrade_to_version_3(db)
    with pytest.raises(StoreError, match=r"schema version 3, from an older .* read-write"):
        open_reader(db).event_columns("sim", ESTIMATE_KINDS)
    store = open_store(db)
    after = Estimator().estimate(store, "sim", NOW.timestamp())
    assert after == before and after.n_failures > 0
    _assert_same_paths(store, "sim")
    conn = sqlite3.connect(db)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "ix_events_job_time" not in indexes and "ix_events_job_time_numbers" in indexes


def test_columns_of_a_job_without_events_are_empty(tmp_path: Path) -> None:
    """A job with no stored events reads as empty columns and no parsers."""
    store = open_store(tmp_path / "s.db")
    columns = store.event_columns("none", ESTIMATE_KINDS)
    assert columns.time_s.size == 0 and columns.kind.size == 0
    assert columns.parser_counts == {} and columns.failure_class == ()
