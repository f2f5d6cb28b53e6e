"""The parsers against every labelled real log: public pastes (fixtures/public/) and the older
real fixtures (fixtures/labels/), scored per kind and per stack (tests/parsers/corpus.py).

Floors (issue 12): recall >= 0.98 and precision >= 0.99 over save starts, save ends, resumes,
restarts and failures, matched on kind and line (a failure anywhere in its record; the echoes
of one incident once). The per-file interruption count is what the rules layer makes of the
file's events as a backfill dates them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache

import pytest

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.vocabulary import is_known_class
from tests.parsers._helpers import read_lines
from tests.parsers.corpus import (
    PUBLIC,
    SCORED,
    Expected,
    FileScore,
    Labels,
    all_labels,
    parse_file,
    report,
    score_file,
    totals,
)

RECALL_FLOOR = 0.98
PRECISION_FLOOR = 0.99
INTERRUPTIONS_FLOOR = 0.95
"""Share of files whose interruptions (all, planned) the rules layer counts as labelled."""
ATTRIBUTE_FLOOR = 0.95
"""Share of matched events whose labelled time, step, duration, class and parser all agree."""


@cache
def _scores() -> tuple[FileScore, ...]:
    return tuple(score_file(labels, parse_file(labels)[0]) for labels in all_labels())


def test_recall_and_precision_reach_the_floors() -> None:
    """Over every labelled log, kind + line: recall >= 0.98, precision >= 0.99."""
    scores = _scores()
    table = report(scores)
    print(table)
    overall = totals(scores)
    assert overall.expected >= 150, table
    assert overall.recall >= RECALL_FLOOR, table
    assert overall.precision >= PRECISION_FLOOR, table


def test_interruptions_per_file_match_the_labels() -> None:
    """The rules layer counts each file's labelled interruptions (planned ones apart)."""
    scores = _scores()
    right = sum(s.interruptions_right for s in scores)
    assert right >= INTERRUPTIONS_FLOOR * len(scores), report(scores)


def test_matched_events_carry_the_labelled_time_step_duration_and_class() -> None:
    """Found events agree with the labels' time, step, duration, class and parser."""
    scores = _scores()
    matched = sum(sum(s.found[k] for k in SCORED) for s in scores)
    off = sum(len(s.mismatches) for s in scores)
    assert off <= (1 - ATTRIBUTE_FLOOR) * matched, report(scores)


# --- the corpus itself -----------------------------------------------------------------------


def test_corpus_has_sixty_public_excerpts_each_listed_in_the_readme() -> None:
    """At least 60 public excerpts, each with a labels file and a README row naming its source."""
    logs = sorted(PUBLIC.rglob("*.log"))
    readme = (PUBLIC / "README.md").read_text("utf-8")
    assert len(logs) >= 60
    for log in logs:
        name = str(log.relative_to(PUBLIC))
        assert log.with_suffix(".json").is_file(), name
        row = next((row for row in readme.splitlines() if row.startswith(f"| `{name}`")), "")
        assert "https://github.com/" in row, name


@pytest.mark.parametrize("labels", all_labels(), ids=lambda labels: labels.name)
def test_labels_are_well_formed(labels: Labels) -> None:
    """Kinds are scored kinds, lines lie in the file, classes are in the vocabulary, failure
    incidents are named, and public excerpts cite a thread."""
    n_lines = len(read_lines(labels.log))
    for event in labels.events:
        assert event.kind in SCORED
        assert 1 <= event.lines[0] <= event.line <= event.lines[1] <= n_lines
        if event.kind == "failure":
            assert event.incident is not None
            assert event.failure_class is not None and is_known_class(event.failure_class)
    if labels.log.is_relative_to(PUBLIC):
        assert re.match(r"https://github\.com/[^/]+/[^/]+/(issues|pull)/\d+$", labels.source)


def test_corpus_holds_negatives_and_every_failure_source() -> None:
    """Negative excerpts (no events) and at least three real examples of each failure class
    the issue lists."""
    public = [labels for labels in all_labels() if labels.log.is_relative_to(PUBLIC)]
    assert sum(not labels.events for labels in public) >= 8
    per_class: dict[str, set[str]] = {}
    for labels in public:
        for event in labels.events:
            if event.failure_class:
                per_class.setdefault(event.failure_class, set()).add(labels.name)
    for name in (
        "killed",
        "segfault",
        "bus_error",
        "host_oom",
        "cuda_ecc",
        "ray_worker_died",
        "gpu_xid_31",
        "nccl_timeout",
        "cuda_oom",
        "slurm_time_limit",
    ):
        assert len(per_class.get(name, ())) >= 3, name


# --- the scorer ------------------------------------------------------------------------------

_T = datetime(2026, 1, 1, tzinfo=UTC)


def _labels(*events: Expected, interruptions: int = 1) -> Labels:
    return Labels(PUBLIC / "x.log", "g", "s", "st", "w", "p", "UTC", None, interruptions, 0, events)


def _failure(line: int, cls: str = "cuda_oom", time: datetime = _T) -> Event:
    return Event(EventKind.FAILURE, line, "traceback", time=time, failure_class=cls)


def test_a_failure_anywhere_in_its_record_matches_and_echoes_count_once() -> None:
    """Three reports of one incident (two in its traceback, one in its echo's range): one
    found, none wrong; a failure outside every range is wrong."""
    incident = (
        Expected("failure", 3, (3, 9), failure_class="cuda_oom", incident="a"),
        Expected("failure", 20, (20, 22), failure_class="cuda_oom", incident="a"),
    )
    score = score_file(_labels(*incident), [_failure(5), _failure(9), _failure(21), _failure(30)])
    assert (score.expected["failure"], score.found["failure"], score.wrong["failure"]) == (1, 1, 1)


def test_a_missed_incident_and_a_wrong_class_are_reported() -> None:
    """Two incidents, one found with another class: recall 1/2 and one class mismatch."""
    labels = _labels(
        Expected("failure", 1, (1, 1), failure_class="killed", incident="a"),
        Expected("failure", 5, (5, 5), failure_class="host_oom", incident="b"),
        interruptions=2,
    )
    score = score_file(labels, [_failure(1, "segfault")])
    assert score.found["failure"] == 1 and score.expected["failure"] == 2
    assert score.mismatches == ["failure line 1: class segfault, want killed"]


def test_interruptions_are_counted_the_way_a_backfill_dates_the_events() -> None:
    """An untimed failure takes the file's latest printed time: with a timed echo a second
    later it is one interruption, not two."""
    untimed = Event(EventKind.FAILURE, 1, "torchrun", failure_class="killed")
    timed = _failure(2, "killed")
    score = score_file(_labels(), [untimed, timed])
    assert score.interruptions == (1, 0)
