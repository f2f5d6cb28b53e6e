"""Files read in the hour repeated when clocks fall back, placed from the job's own evidence
(rules/repeated_hour.py): the pure rule on small timelines; the trial's real logs are in
tests/agent/test_zone_placement.py."""

from __future__ import annotations

from ckpt_advisor.rules.model import ClockFinding, NoteCode, Observation
from ckpt_advisor.rules.repeated_hour import place_repeated_hours
from ckpt_advisor.rules.timeline import Timeline

FIRST_PASS_S = 1_793_509_200.0
"""2026-11-01 05:00 UTC: 01:00 EDT, where New York's repeated hour's first pass begins."""
HOUR_S = 3600.0


def _finding(source: str) -> ClockFinding:
    return ClockFinding("ambiguous_stamp", source, 15, HOUR_S, FIRST_PASS_S)


def _log(source: str, *at: tuple[str, float, int]) -> list[Observation]:
    return [Observation(kind, FIRST_PASS_S + s, step, source=source) for kind, s, step in at]


def test_a_file_that_crossed_into_the_second_pass_stands() -> None:
    """01:59 EDT then 01:00 EST (read by the file's own order): nothing is moved or named."""
    log = _log("a.log", ("step", 3590.0, 10), ("step", 3610.0, 20))
    placed = place_repeated_hours(Timeline.of(log), [_finding("a.log")])
    assert placed.notes() == ()
    assert placed.timeline.time_s.tolist() == [FIRST_PASS_S + 3590.0, FIRST_PASS_S + 3610.0]


def test_saves_an_hour_before_their_records_move_the_file_onto_the_second_pass() -> None:
    """Two saves read 1 h before the timing file's records of the same steps (the second pass
    read as the first) move the file's observations of the hour by 1 h; at the records, the
    first pass stands; 30 min off, neither: the file is named as undecided."""
    for off_s, moved_s, code in (
        (-HOUR_S, HOUR_S, NoteCode.AMBIGUOUS_STAMP_PLACED),
        (0.0, 0.0, None),
        (-1800.0, 0.0, NoteCode.AMBIGUOUS_STAMP),
    ):
        log = _log("a.log", ("checkpoint_start", 60.0, 20), ("checkpoint_start", 120.0, 40))
        records = [
            Observation("checkpoint_end", FIRST_PASS_S + s - off_s + 1.0, step, duration_s=1.0,
                        from_timing_file=True, source="t.jsonl")
            for s, step in ((60.0, 20), (120.0, 40))
        ]  # fmt: skip
        placed = place_repeated_hours(Timeline.of(log + records), [_finding("a.log")])
        assert [n.code for n in placed.notes()] == ([code] if code else [])
        logged = placed.timeline.time_s[~placed.timeline.from_timing_file]
        assert logged.tolist() == [FIRST_PASS_S + 60.0 + moved_s, FIRST_PASS_S + 120.0 + moved_s]
