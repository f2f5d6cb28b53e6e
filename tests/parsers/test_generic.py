"""The generic fallback (parsers/generic.py) on real pastes of stacks with no parser of their
own, and its precedence: a detected stack's pattern wins, a fixed format has no fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines, summary, utc

PUBLIC = Path(__file__).parent / "fixtures" / "public"
START, END = EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END


def test_fairseq_save_starts_at_preparing_and_ends_with_its_writing_time() -> None:
    """'Preparing to save … @ 2162 updates' starts it; the trainer's 'Finished saving' (one file
    of the save) is not its end; 'Saved checkpoint … (writing took 61.3 seconds)' is."""
    events, parser = parse(read_lines(PUBLIC / "generic" / "fairseq_2493_save.log"))
    assert summary(events) == [
        (START, 1, utc("2021-01-05 23:30:23"), 2162, None, None),
        (END, 3, utc("2021-01-05 23:31:24"), 2162, pytest.approx(61.31149206700138), None),
    ]
    assert {e.parser for e in events} == {"generic"}
    assert parser.name == "auto"  # the fallback is never detected as the file's stack


def test_each_keras_modelcheckpoint_line_is_a_save_of_its_own() -> None:
    """Four 'saving model to …hdf5' lines without a step are four saves; 'did not improve'
    lines are none."""
    events, _ = parse(read_lines(PUBLIC / "generic" / "keras_14305_modelcheckpoint.log"))
    assert [(e.kind, e.line) for e in events] == [(START, 1), (START, 3), (START, 5), (START, 7)]
    events, _ = parse(read_lines(PUBLIC / "generic" / "ssd_keras_47_modelcheckpoint.log"))
    assert [e.line for e in events] == [5, 8, 11, 14]


def test_mmcv_orbax_and_dlrover_saves() -> None:
    """mmcv's 'Saving checkpoint at 12 epochs' (no step), Orbax's 'Saving checkpoint at step
    19', DLRover's 'Function save_to_memory cost 0.545s' (an end with its blocking time)."""
    rows = summary(parse(read_lines(PUBLIC / "generic" / "mmdet_8654_mmcv_save.log"))[0])
    assert rows == [(START, 4, utc("2022-08-29 13:22:24.750"), None, None, None)]
    orbax = parse(read_lines(PUBLIC / "generic" / "goodput_4_orbax_async_save.log"))[0]
    assert [(e.kind, e.line, e.step) for e in orbax] == [(START, 4, 19)]
    dlrover = parse(read_lines(PUBLIC / "generic" / "dlrover_1079_save_to_memory.log"))[0]
    assert summary(dlrover) == [(END, 9, utc("2024-04-18 10:50:38.012"), None, 0.545, None)]


def test_a_detected_stack_takes_precedence_over_the_fallback() -> None:
    """In a Megatron log every save is the Megatron stack's, none the fallback's."""
    events, parser = parse(
        read_lines(PUBLIC / "megatron" / "megatron_314_save_then_torch_save_error.log")
    )
    assert parser.name == "megatron"
    assert {e.parser for e in events if e.kind in (START, END)} == {"megatron"}


def test_a_fixed_format_has_no_fallback() -> None:
    """With --format hf_trainer, fairseq's save lines are not read by the fallback."""
    events, _ = parse(read_lines(PUBLIC / "generic" / "fairseq_2493_save.log"), "hf_trainer")
    assert events == []


def test_a_dcp_async_request_outside_torchtitan_starts_a_save() -> None:
    """DCP's background process line alone (no torchtitan lines around it) starts the save of
    the checkpoint it names (step from ``step-10``)."""
    line = read_lines(PUBLIC / "torchtitan" / "torchtitan_3476_pinned_mem_staging.log")[11]
    events, _ = parse([line])
    assert [(e.kind, e.step, e.parser) for e in events] == [(START, 10, "generic")]
