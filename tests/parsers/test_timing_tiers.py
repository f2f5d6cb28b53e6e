"""The optional ``tier`` of timing records: where each save went, for two-tier jobs."""

from __future__ import annotations

from datetime import UTC, datetime

from ckpt_advisor.agent.training import timing_record
from ckpt_advisor.parsers.timing import TIERS
from ckpt_advisor.rules.tiers import Tier
from tests.parsers._helpers import parse


def test_jsonl_and_csv_records_carry_their_tier() -> None:
    """A memory save and a persistent save keep their tier on the event; a record without one
    has none; an unknown tier is a miss naming the field."""
    jsonl = [
        '{"step": 10, "end": 1795993260, "duration_s": 0.4, "tier": "memory"}',
        '{"step": 100, "end": 1795993560, "duration_s": 95, "tier": "persistent"}',
        '{"step": 110, "end": 1795993600, "duration_s": 0.4}',
        '{"step": 120, "end": 1795993640, "duration_s": 0.4, "tier": "ram"}',
    ]
    events, parser = parse(jsonl, fmt="timing_jsonl")
    assert [(e.step, e.tier) for e in events] == [(10, "memory"), (100, "persistent"), (110, None)]
    assert parser.misses == 1
    assert "tier must be one of memory, local, persistent" in parser.errors[0][1]
    csv = ["step,end,duration_s,Tier", "10,1795993260,0.4,local", "20,1795993300,0.4,"]
    events, parser = parse(csv, fmt="timing_csv")
    assert [(e.step, e.tier) for e in events] == [(10, "local"), (20, None)]


def test_the_writer_records_the_tier_the_parser_reads() -> None:
    """timing_record(tier="memory") writes the field, and the parser's tiers are the rules'."""
    start = datetime(2026, 11, 29, 22, tzinfo=UTC)
    assert timing_record(10, start, start, tier="memory")["tier"] == "memory"
    assert "tier" not in timing_record(10, start, start)
    assert tuple(t.value for t in Tier) == TIERS
