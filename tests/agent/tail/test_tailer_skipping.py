"""The tailer's fast read loop: it parses only the lines a parser's LineFilter asks for, and
stores the same events as a parser fed every line (steps: a sample of them)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckpt_advisor import parsers
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.tail import Tailer, WatchSpec, reader
from ckpt_advisor.parsers import selection
from tests.agent.tail.helpers import FIXTURES

NOW = datetime(2027, 1, 1, tzinfo=UTC)


def _every_line(path: Path, fmt: str = "auto") -> list[parsers.Event]:
    """What a parser fed every line of ``path`` returns (the reference)."""
    parser = parsers.make_parser(fmt, tz=UTC)
    events: list[parsers.Event] = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            events.extend(parser.feed(raw.rstrip(b"\n").decode("utf-8", "replace"), lineno))
    return events + parser.finish()


def _ingest(tmp_path: Path, path: Path) -> list[parsers.Event]:
    store = open_store(tmp_path / "s.db")
    tailer = Tailer(store, [WatchSpec("j", (str(path),))], clock=lambda: NOW, tz=UTC, backfill=True)
    stats = tailer.scan()
    tailer.close()
    assert stats.lines == path.read_bytes().count(b"\n")
    return [stored.event for stored in store.events(job="j")]


def _key(event: parsers.Event) -> tuple[Any, ...]:
    time = None if event.time_estimated else event.time
    return (
        event.kind,
        event.line,
        time,
        event.step,
        event.duration_s,
        event.failure_class,
        event.detail,
        event.parser,
    )


def _assert_same_but_steps_sampled(stored: list[parsers.Event], every: list[parsers.Event]) -> None:
    def others(events: list[parsers.Event]) -> list[tuple[Any, ...]]:
        return sorted((_key(e) for e in events if e.kind != "step"), key=str)

    assert others(stored) == others(every)
    reference_steps = {(e.line, e.step, e.duration_s) for e in every if e.kind == "step"}
    stored_steps = {(e.line, e.step, e.duration_s) for e in stored if e.kind == "step"}
    assert stored_steps <= reference_steps


def test_synthetic_backfill_stores_every_event_and_a_sample_of_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multi-chunk HF log (bars on every line, saves, tracebacks): every checkpoint, failure,
    resume and run event is stored exactly as a parser fed every line gives it, with the same
    line numbers and the failures' last confirmed steps; steps are a sample, at least one per
    STEP_SAMPLE_BYTES of bar."""
    monkeypatch.setattr(selection, "STEP_SAMPLE_BYTES", 64 << 10)
    monkeypatch.setattr(reader, "READ_CHUNK_BYTES", 3 << 19)
    job = simulate(
        mtbf_s=3 * 3600.0,
        cost_s=60.0,
        interval_steps=600,
        step_time_s=1.0,
        duration_s=0.6 * 86400.0,
        seed=3,
        bar_every_steps=1,
        log_every_steps=20,
    )
    path = tmp_path / "train.log"
    path.write_text("".join(text for _, text in job.log))
    size = path.stat().st_size
    assert size > reader.READ_CHUNK_BYTES  # a buffer boundary is crossed
    every = _every_line(path)
    stored = _ingest(tmp_path, path)
    _assert_same_but_steps_sampled(stored, every)
    kinds = [e.kind for e in stored]
    assert kinds.count("checkpoint_start") == job.n_saves
    assert kinds.count("failure") == job.n_failures >= 2
    n_steps = kinds.count("step")
    assert size // (64 << 10) <= n_steps < len([e for e in every if e.kind == "step"]) // 10


@pytest.mark.parametrize(
    "name", ["hf_trainer_crash.log", "hf_trainer_resume.log", "lightning_crash.log"]
)
def test_real_logs_give_the_same_events_as_a_parser_fed_every_line(
    tmp_path: Path, name: str
) -> None:
    """On the captured real runs, the skipping read loop stores the same non-step events."""
    path = tmp_path / name
    path.write_bytes((FIXTURES / name).read_bytes())
    _assert_same_but_steps_sampled(_ingest(tmp_path, path), _every_line(path))


def test_failure_after_bar_lines_keeps_the_last_step_and_ansi_split_keyword(tmp_path: Path) -> None:
    """After a run of bar-only lines, a failure gets the step of the last bar line before it
    (that line is parsed though it holds no keyword), and an exception line whose keyword is
    split by a colour code (``RuntimeError\\x1b[0m: ``) is still a failure."""
    path = tmp_path / "train.log"
    header = "[INFO|trainer.py:1627] 2026-11-29 22:11:34,899 >>   Total optimization steps = 10\n"
    bars = "".join(f"\r 50%|█████     | {n}/10 [00:0{n}<00:05,  1.00it/s]\n" for n in range(1, 9))
    path.write_text(
        header
        + bars
        + "\x1b[31mRuntimeError\x1b[0m: CUDA error: an illegal memory access was encountered\n"
        + "after\n"
    )
    every = _every_line(path, "hf_trainer")
    store = open_store(tmp_path / "s.db")
    spec = WatchSpec("j", (str(path),), fmt="hf_trainer")
    Tailer(store, [spec], clock=lambda: NOW, tz=UTC, backfill=True).scan()
    stored = [se.event for se in store.events(job="j")]
    [failure] = [e for e in stored if e.kind == "failure"]
    assert (failure.failure_class, failure.line, failure.step) == (
        "cuda_illegal_memory_access",
        10,
        8,
    )
    _assert_same_but_steps_sampled(stored, every)
