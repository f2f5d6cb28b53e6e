"""parsers.buffers: the reader's buffer path gives the events of feeding every line, bar samples
apart.

The reference is the plain path: ``parser.feed`` of every line of a file, then ``finish()``.
The candidate is what the daemon's tail and ``ingest`` run (``agent/tail/reader.py`` calls
:func:`parse_buffer` on each buffer of complete lines): the file cut into buffers at every line
boundary, in one buffer, and at random points. Every event other than a ``step`` must be the
same, field for field and in order. ``step`` events are the bar's samples, checked by the rule
of :func:`parsers.buffers.thin_steps` (:func:`_check_steps`).
"""

from __future__ import annotations

import bisect
import random
from dataclasses import replace
from pathlib import Path

import pytest

from bench.inputs import DENSE, SPARSE, START, LogShape
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.parsers import STACKS, make_parser, selection
from ckpt_advisor.parsers.buffers import parse_buffer
from ckpt_advisor.parsers.events import CLOCK_KINDS, Event, EventKind

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(
    p
    for base in (ROOT / "agent" / "fixtures" / "real", ROOT / "tests" / "parsers" / "fixtures")
    for p in base.rglob("*")
    if p.is_file() and p.suffix in (".log", ".jsonl", ".txt")
)
_PROGRESS = (EventKind.STEP, EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END)


def _formats(path: Path) -> list[str]:
    """``auto``, and the stack the fixture's folder is named after, if any."""
    return ["auto", path.parent.name] if path.parent.name in STACKS else ["auto"]


def _every_line(data: bytes, fmt: str) -> list[Event]:
    parser = make_parser(fmt)
    events: list[Event] = []
    lines = data.split(b"\n")
    for n, line in enumerate(lines[:-1] if data.endswith(b"\n") else lines, 1):
        events += parser.feed(line.decode("utf-8", "replace"), n)
    return events + parser.finish()


def _buffered(data: bytes, fmt: str, cuts: list[int]) -> list[Event]:
    """Events of ``data`` read as the reader does, in buffers ending at the line boundaries
    ``cuts`` (and the end)."""
    parser = make_parser(fmt)
    if not data.endswith(b"\n"):
        data += b"\n"
    events: list[Event] = []
    at = lines = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        if cut <= at:
            continue
        chunk = data[at:cut]
        n, found = parse_buffer(
            parser, chunk, 0, len(chunk), lines, max_line_bytes=1 << 30, on_skipped=_never
        )
        events += [event for _, line_events in found for event in line_events]
        lines += n
        at = cut
    return events + parser.finish()


def _never(start: int, stop: int, lineno: int) -> None:
    raise AssertionError(f"line {lineno} skipped")


def _boundaries(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == 0x0A]


def _random_cuts(data: bytes, seed: int, mean_bytes: int) -> list[int]:
    rng = random.Random(seed)
    cuts, at = [], 0
    while True:
        at = data.find(b"\n", at + rng.randint(1, 2 * mean_bytes))
        if at < 0:
            return cuts
        cuts.append(at + 1)


def _check_steps(reference: list[Event], candidate: list[Event]) -> None:
    """The sampling rule (:func:`parsers.buffers.thin_steps`): every non-step event as in
    ``reference``, in order. Between two neighbouring non-step events (clock findings aside),
    where the reference has steps the candidate has some too: the first of them exactly the
    reference's first (the first step after a save bounds its cost, after a resume it ends the
    restart), and before an event other than a save the last at the reference's last step.
    Each step kept shows the step the bar showed on its line (the reference's last step at or
    before it); no two steps of the candidate on one line.

    A ``bar_clock_ignored`` finding (a bar whose clock freezes, parsers/clock.py) is found at a
    bar redraw fed, so it may come at a later redraw of the same bar than in ``reference``:
    its line, step and time are compared as not earlier."""
    others = [e for e in candidate if e.kind is not EventKind.STEP]
    expected = [e for e in reference if e.kind is not EventKind.STEP]
    assert [_unplaced(e) for e in others] == [_unplaced(e) for e in expected]
    for got, want in zip(others, expected, strict=True):
        if got.kind is EventKind.BAR_CLOCK_IGNORED:
            assert got.line >= want.line
            assert want.time is None or (got.time is not None and got.time >= want.time)
    shown = sorted((e.line, e.step) for e in reference if e.kind is EventKind.STEP)
    lines = [line for line, _ in shown]
    for event in candidate:
        if event.kind is EventKind.STEP:
            at = bisect.bisect_right(lines, event.line) - 1
            assert at >= 0 and shown[at][1] == event.step, event
    for (ref_steps, before), (cand_steps, _) in zip(
        _steps_between(reference), _steps_between(candidate), strict=True
    ):
        if ref_steps:
            assert cand_steps, ref_steps[:3]
            assert cand_steps[0] == ref_steps[0]
            if before is not None and before not in _PROGRESS:
                assert cand_steps[-1].step == ref_steps[-1].step
    step_lines = [e.line for e in candidate if e.kind is EventKind.STEP]
    assert len(step_lines) == len(set(step_lines))


def _unplaced(event: Event) -> Event:
    """``event`` without its place in the file if it is a bar clock finding."""
    if event.kind is EventKind.BAR_CLOCK_IGNORED:
        return replace(event, line=0, step=None, time=None)
    return event


def _steps_between(events: list[Event]) -> list[tuple[list[Event], EventKind | None]]:
    """The step events of each stretch between two non-step events other than clock findings
    (which the rules do not read as the job's history), with the kind of the event that ends
    the stretch (None for the last)."""
    stretches: list[tuple[list[Event], EventKind | None]] = []
    steps: list[Event] = []
    for event in events:
        if event.kind is EventKind.STEP:
            steps.append(event)
        elif event.kind not in CLOCK_KINDS:
            stretches.append((steps, event.kind))
            steps = []
    return [*stretches, (steps, None)]


@pytest.mark.parametrize(
    ("path", "fmt"),
    [(p, fmt) for p in FIXTURES for fmt in _formats(p)],
    ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else v,
)
def test_every_fixture_gives_the_events_of_every_line_fed(path: Path, fmt: str) -> None:
    """Each fixture (ours, the captured real runs, the public corpus), cut into a buffer per
    line, read as one buffer and cut at random points, gives the events of feeding every line
    (steps by the sampling rule)."""
    data = path.read_bytes()
    reference = _every_line(data, fmt)
    for cuts in (_boundaries(data), [], _random_cuts(data, 1, 400)):
        _check_steps(reference, _buffered(data, fmt, cuts))


def _synth_log(shape: LogShape, days: float, seed: int, **kw: float) -> bytes:
    job = simulate(
        mtbf_s=shape.mtbf_s,
        cost_s=shape.cost_s,
        interval_steps=shape.interval_steps,
        step_time_s=1.0,
        restart_s=shape.restart_s,
        duration_s=days * 86400.0,
        start=START,
        seed=seed,
        bar_every_steps=shape.bar_every_steps,
        log_every_steps=shape.log_every_steps,
        **kw,
    )
    return "".join(text for _, text in job.log).encode()


@pytest.mark.parametrize(
    ("shape", "days", "kw"),
    [
        (DENSE, 0.3, {}),
        (SPARSE, 2.0, {}),
        (replace(DENSE, name="dense-frozen"), 0.2, {"frozen_bar_s": 40_000.0}),
    ],
    ids=lambda v: v.name if isinstance(v, LogShape) else None,
)
def test_the_bench_logs_give_the_events_of_every_line_fed(
    shape: LogShape, days: float, kw: dict[str, float]
) -> None:
    """A few MB of the bench's generated event-dense and sparse HF logs (and a dense one whose
    bar clock freezes), cut into random buffers of ~64 kB and ~4 MB, give the events of feeding
    every line, with a step kept after each save, around each other event, and at most two
    more per STEP_SAMPLE_BYTES and per buffer."""
    data = _synth_log(shape, days, seed=3, **kw)
    assert len(data) > 2 << 20
    reference = _every_line(data, "auto")
    for seed, mean in ((1, 64 << 10), (2, 4 << 20)):
        cuts = _random_cuts(data, seed, mean)
        candidate = _buffered(data, "auto", cuts)
        _check_steps(reference, candidate)
        steps = sum(e.kind is EventKind.STEP for e in candidate)
        saves = sum(e.kind is EventKind.CHECKPOINT_END for e in candidate)
        others = sum(e.kind not in _PROGRESS for e in candidate)
        samples = len(data) / selection.STEP_SAMPLE_BYTES
        assert steps <= saves + 2 * others + 2 * samples + 2 * (len(cuts) + 1)
        assert steps < sum(e.kind is EventKind.STEP for e in reference) / 5


def test_an_auto_parser_hands_its_lines_to_the_parser_it_chose() -> None:
    """An auto parser is its own target until its first line decides, then the log parser
    it chose is; feeding that target the rest of a real HF log gives the events (and the
    misses) of feeding the auto parser itself."""
    lines = (ROOT / "agent" / "fixtures" / "real" / "hf_trainer_crash.log").read_text().split("\n")
    via_auto, via_target = make_parser("auto"), make_parser("auto")
    assert via_target.target is via_target
    first = via_auto.feed(lines[0], 1) + via_target.feed(lines[0], 1)
    target = via_target.target
    assert target is not via_target and type(target).__name__ == "LogParser"
    assert target.target is target
    events = [via_auto.feed(line, n) for n, line in enumerate(lines[1:], 2)]
    assert [target.feed(line, n) for n, line in enumerate(lines[1:], 2)] == events
    assert via_target.finish() == via_auto.finish()
    assert sum(map(len, events)) > 10 and not first
    assert via_target.misses == via_auto.misses
    assert via_target.name == target.name == "hf_trainer"
