"""Parsers on log excerpts real users pasted from real runs (fixtures/real_pasted/README.md).

Each expected event is what a human reads in the excerpt: (kind, line, time, step, duration_s,
failure class). The excerpts are verbatim; they exposed an srun ``--label`` prefix and a glued
timer header (Megatron), torchtitan's pre-``[titan]`` prefix, and NeMo 2's two async saves per
step finalized together at the end of training.
"""

from __future__ import annotations

from datetime import timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines, summary, utc

PASTED = Path(__file__).parent / "fixtures" / "real_pasted"
START, END, STEP = EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END, EventKind.STEP
RESUME, RUN_START, RUN_END = EventKind.RESUME, EventKind.RUN_START, EventKind.RUN_END
FAILURE = EventKind.FAILURE
PDT = ZoneInfo("America/Los_Angeles")


def _rows(name: str, fmt: str = "auto", tz: tzinfo | None = None) -> list[tuple[object, ...]]:
    events, parser = parse(read_lines(PASTED / name), fmt, **({"tz": tz} if tz else {}))
    assert parser.misses == 0
    assert parser.name == name.split("_")[0]
    return summary(events)


def test_megatron_moe_blog_save_cost_is_the_timer_max() -> None:
    """ROCm blog (MegaBlocks, 2025-02): the save-checkpoint timer's max is the final save's cost."""
    assert _rows("megatron_rocmblog_megablocks_moe.log") == [
        (RUN_START, 5, utc("2025-02-14 15:43:22"), None, None, None),
        (STEP, 8, None, 200, pytest.approx(0.5802), None),
        (STEP, 15, None, 1100, pytest.approx(0.8203), None),
        (STEP, 19, None, 2000, pytest.approx(0.5828), None),
        (START, 24, None, 2000, None, None),
        (END, 27, None, 2000, pytest.approx(293.63873), None),
        (RUN_END, 28, utc("2025-02-14 16:08:33"), None, None, None),
    ]


def test_megatron_dense_blog_reads_a_timer_glued_to_its_header() -> None:
    """'(min, max) time across ranks (ms):save-checkpoint …: (1658.80, 1658.85)' is one line;
    the second save, whose "successfully saved" line is the paste's last save line, stays
    open: its timer line could still follow (a file that went quiet ends no save)."""
    assert _rows("megatron_rocmblog_megablocks_dense.log") == [
        # before the paste's first stamp: dated at it (time_estimated, an upper bound)
        (STEP, 1, utc("2025-02-05 21:43:14"), 2000, pytest.approx(0.6571), None),
        (START, 6, utc("2025-02-05 21:43:14"), 2000, None, None),
        (END, 8, utc("2025-02-05 21:43:14"), 2000, pytest.approx(1.65885), None),
        (RUN_END, 10, utc("2025-02-05 21:43:14"), None, None, None),
        (START, 11, None, 2000, None, None),
    ]


def test_megatron_srun_labelled_lines_give_step_save_and_timer_cost() -> None:
    """srun --label's '0: ' / '1: ' prefixes: iteration, save and its 81.6 s timer are read."""
    assert _rows("megatron_hyperpod_srun_label.log") == [
        (STEP, 1, None, 1, pytest.approx(440.3526), None),
        (START, 2, None, 1, None, None),
        (END, 5, None, 1, pytest.approx(81.61182), None),
    ]


def test_megatron_ray_prefixed_save_that_never_ends_stays_open() -> None:
    """NeMo-RL #1847: a Ray-worker-prefixed save start with no end (the run stalled there)."""
    assert _rows("megatron_nemo_rl_1847.log") == [(START, 6, None, 0, None, None)]


def test_nemo_evo2_two_async_saves_per_step_finalize_in_order() -> None:
    """Top-k and -last saves at step 99 each keep their own blocking cost at their finalize."""
    assert _rows("nemo_evo2_notebook_last_step.log", tz=PDT) == [
        (STEP, 1, utc("2025-06-18 23:53:17.320"), 98, pytest.approx(0.24), None),  # line 4's
        (STEP, 2, utc("2025-06-18 23:53:17.320"), 99, pytest.approx(0.261), None),
        (START, 4, utc("2025-06-18 23:53:17.320"), 99, None, None),
        (START, 6, utc("2025-06-18 23:53:19.546"), 99, None, None),
        (END, 15, utc("2025-06-18 23:53:41"), 99, pytest.approx(1.718), None),
        (END, 17, utc("2025-06-18 23:53:42"), 99, pytest.approx(1.136), None),
    ]


def test_nemo_read_in_the_wrong_zone_keeps_its_saves_and_reports_the_offset() -> None:
    """The same PDT excerpt read as UTC: its stamps lie 7 h behind the Unix times its save
    lines print. Those Unix times are moved onto the stamps' clock, so every event is the PDT
    reading moved 7 h, with the same costs and persist spans (the save that starts at a Unix
    time and ends at a stamp is 23.68 s, not 7 h), and the offset is reported once, at the
    first line that shows it. Read as UTC before, the starts were 7 h after their ends."""
    lines = read_lines(PASTED / "nemo_evo2_notebook_last_step.log")
    right, _ = parse(lines, "nemo", tz=PDT, clock=True)
    wrong, _ = parse(lines, "nemo", clock=True)
    findings = [e for e in wrong if e.kind is EventKind.STAMP_ZONE_OFFSET]
    assert [(e.line, e.duration_s, e.time) for e in findings] == [
        (4, -7 * 3600.0, utc("2025-06-18 16:53:17.320"))  # the save start it moved
    ]
    moved = [
        (e.kind, e.line, e.time + timedelta(hours=7) if e.time else None, e.step, e.persist_s)
        for e in wrong
        if e.kind is not EventKind.STAMP_ZONE_OFFSET
    ]
    assert moved == [(e.kind, e.line, e.time, e.step, e.persist_s) for e in right]
    assert [e.persist_s for e in right if e.kind is END] == [
        pytest.approx(23.68),
        pytest.approx(22.454),
    ]


def test_a_nemo_save_longer_than_half_a_zone_step_is_no_zone_offset() -> None:
    """``Global Checkpoint Save`` is printed once the save took its ``Save duration``: the
    excerpt's line 4 with a 600 s save (its stamp 600 s after its Unix start time), read in its
    own zone, reports no offset and keeps the printed start."""
    line = read_lines(PASTED / "nemo_evo2_notebook_last_step.log")[3]
    assert "16:53:19" in line and "Save duration: 1.718s" in line
    line = line.replace("16:53:19", "17:03:17").replace("1.718s", "600.0s")
    events, _ = parse([line], "nemo", tz=PDT, clock=True)
    assert [(e.kind, e.time) for e in events] == [(START, utc("2025-06-18 23:53:17.320"))]


def test_nemo_esm2_finalize_without_start_takes_the_step_in_its_path() -> None:
    """Finalizes alone ('for step 50', path 'step=49') are ends at the path's step, untimed."""
    t = utc
    assert _rows("nemo_bionemo_esm2_hyperpod.log") == [
        (END, 8, t("2025-05-15 23:42:54"), 49, None, None),
        (END, 10, t("2025-05-15 23:43:04"), 49, None, None),
        (END, 12, t("2025-05-15 23:43:22"), 74, None, None),
        (END, 14, t("2025-05-15 23:43:22"), 74, None, None),
        (END, 16, t("2025-05-15 23:43:23"), 99, None, None),
        (END, 18, t("2025-05-15 23:43:25"), 99, None, None),
    ]


def test_nemo_single_global_save_line_starts_a_save_it_cannot_end_alone() -> None:
    """'Global Checkpoint Save … Save duration: 4.389s' alone starts a save at t; whether it
    was synchronous (end at t + d) only a next record shows (a ``Scheduled async`` line may
    follow), so a file ending there leaves it open, and the next record ends it."""
    assert _rows("nemo_llmb_nemotron4_readme.log", tz=PDT) == [
        (START, 1, utc("2025-04-11 21:48:41.151"), 50, None, None),
    ]
    lines = read_lines(PASTED / "nemo_llmb_nemotron4_readme.log")
    more = "[NeMo I 2025-04-11 14:48:46 nemo_logging:393] Resuming training from checkpoint: x"
    events, _ = parse([*lines, more], "nemo", tz=PDT)
    assert summary(events)[:2] == [
        (START, 1, utc("2025-04-11 21:48:41.151"), 50, None, None),
        (END, 1, utc("2025-04-11 21:48:45.540"), 50, pytest.approx(4.389), None),
    ]


def test_torchtitan_1287_async_staging_and_profiler_lines() -> None:
    """PR #1287: 'enabled)in 0.02 seconds' (no space) ends the save at step 800."""
    t = utc
    assert _rows("torchtitan_torchtitan_1287_save.log") == [
        (STEP, 2, t("2025-06-25 13:20:46.458"), 800, None, None),
        (START, 3, t("2025-06-25 13:20:46.458"), 800, None, None),
        (END, 5, t("2025-06-25 13:20:46.479"), 800, pytest.approx(0.02), None),
        (STEP, 9, t("2025-06-25 13:21:01.733"), 810, None, None),
        (STEP, 10, t("2025-06-25 13:21:15.731"), 820, None, None),
    ]


def test_torchtitan_1287_resume_at_step_400() -> None:
    """PR #1287: 'Loading the checkpoint at step 400.' resumes; training starts at 401."""
    assert _rows("torchtitan_torchtitan_1287_resume.log") == [
        (RESUME, 6, utc("2025-06-25 13:10:45.513"), 400, None, None),
        (RUN_START, 9, utc("2025-06-25 13:10:56.821"), 401, None, None),
    ]


def test_torchtitan_untagged_prefix_gives_last_save_then_abort() -> None:
    """Pre-'[titan]' prefix: last-step save 5.53 s, completion, then torchrun's SIGABRT."""
    t = utc
    assert _rows("torchtitan_newcomputebench_docs.log") == [
        (START, 2, t("2025-04-01 00:25:54.090"), 644, None, None),
        (END, 3, t("2025-04-01 00:25:59.616"), 644, pytest.approx(5.53), None),
        (RUN_END, 5, t("2025-04-01 00:26:01.706"), None, None, None),
        (FAILURE, 16, t("2025-04-01 00:26:08"), 644, None, "abort"),
        (FAILURE, 33, None, 644, None, "child_failed"),
    ]


def test_torchtitan_untagged_step_line_with_progress_is_a_step() -> None:
    """'step: 640/644 = 99.3789%  loss: …' is step 640 (read when the format is given)."""
    events, _ = parse(read_lines(PASTED / "torchtitan_newcomputebench_docs.log"), "torchtitan")
    assert summary(events)[0] == (STEP, 1, utc("2025-04-01 00:25:47.084"), 640, None, None)
