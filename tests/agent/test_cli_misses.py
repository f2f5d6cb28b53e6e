"""``ckpt-advisor parse --misses`` lists the error-looking lines that no pattern recognised."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main

LOOKALIKES = Path(__file__).parents[1] / "parsers" / "fixtures" / "quoted" / "lookalikes.log"


def test_parse_misses_lists_unrecognised_error_lines_with_their_line_numbers() -> None:
    """Each unrecognised error-looking line is printed as ``path:line: text``, and no events."""
    result = CliRunner().invoke(main, ["parse", "--misses", str(LOOKALIKES)])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        f'{LOOKALIKES}:3: The job was requeued last week; see docs for "CANCELLED AT" semantics',
        f"{LOOKALIKES}:4: WARNING: oom-killer is disabled for this cgroup",
        f"{LOOKALIKES}:7: ValueError: could not parse config, using defaults",
    ]


PUBLIC = Path(__file__).parents[1] / "parsers" / "fixtures" / "public"


def test_parse_misses_lists_what_the_failure_lines_around_it_leave_unread() -> None:
    """A real paste (NVSentinel#155): the three 'fallen off the bus' lines are read as one
    failure; the probe-routine failure after them matches nothing and is listed."""
    log = PUBLIC / "kernel" / "nvsentinel_155_fallen_off_bus.log"
    result = CliRunner().invoke(main, ["parse", "--misses", str(log)])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        f"{log}:4: [ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s)."
    ]


def test_parse_misses_lists_an_error_record_that_names_no_failure() -> None:
    """An upper-case [ERROR] record with no known failure text (DLRover#1585) is no event but
    is listed, so the next gap is one command away."""
    log = PUBLIC / "generic" / "dlrover_1585_error_record_negative.log"
    result = CliRunner().invoke(main, ["parse", "--misses", str(log)])
    assert result.output.splitlines() == [
        f"{log}:1: [2025-07-08 11:24:07,066] [ERROR] [ckpt_saver.py:702:_save_shard] The step 100 "
        "in event is no equal to step 101 in memory."
    ]
