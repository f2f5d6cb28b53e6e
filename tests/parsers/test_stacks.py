"""Every training stack on its fixture log: exact events (kind, line, time, step, duration).

Real CPU captures for hf_trainer (4.46.3), accelerate, lightning, deepspeed; lines quoted from
real logs and source format strings for megatron, nemo, torchtitan, composer (fixtures/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines, summary, utc

FIXTURES = Path(__file__).parent / "fixtures"
START, END, STEP = EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END, EventKind.STEP
RESUME, RUN_START, RUN_END = EventKind.RESUME, EventKind.RUN_START, EventKind.RUN_END


def _events(name: str, fmt: str = "auto") -> tuple[list[tuple[object, ...]], str]:
    events, parser = parse(read_lines(FIXTURES / name), fmt)
    assert parser.misses == 0
    return summary(events), parser.name


def _saves(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [r for r in rows if r[0] in (START, END, RESUME, RUN_START, RUN_END)]


def test_hf_trainer_446_capture_gives_saves_resume_and_run_ends() -> None:
    """transformers 4.46.3: 5 saves paired to their last "saved in" line, the 4.x resume."""
    rows, name = _events("hf_trainer/hf_trainer_446.log")
    assert name == "hf_trainer"
    t = utc
    assert _saves(rows) == [
        (RUN_START, 10, t("2026-11-29 23:06:56.302"), None, None, None),
        (START, 20, t("2026-11-29 23:07:03.487"), 10, None, None),
        (END, 23, t("2026-11-29 23:07:03.566"), 10, pytest.approx(0.079), None),
        (START, 26, t("2026-11-29 23:07:09.275"), 20, None, None),
        (END, 29, t("2026-11-29 23:07:09.309"), 20, pytest.approx(0.034), None),
        (START, 32, t("2026-11-29 23:07:10.669"), 30, None, None),
        (END, 35, t("2026-11-29 23:07:10.715"), 30, pytest.approx(0.046), None),
        (RUN_END, 36, t("2026-11-29 23:07:10.741"), None, None, None),
        (RUN_START, 55, t("2026-11-29 23:07:11.763"), None, None, None),
        (RESUME, 65, t("2026-11-29 23:07:11.764"), 20, None, None),
        (START, 71, t("2026-11-29 23:07:16.034"), 30, None, None),
        (END, 74, t("2026-11-29 23:07:16.165"), 30, pytest.approx(0.131), None),
        (START, 77, t("2026-11-29 23:07:19.051"), 40, None, None),
        (END, 80, t("2026-11-29 23:07:19.078"), 40, pytest.approx(0.027), None),
        (RUN_END, 81, t("2026-11-29 23:07:19.096"), None, None, None),
    ]
    # one step event per step (the bar redrawn after a save's start gives none), per run
    assert [r[3] for r in rows if r[0] is STEP] == [5, 10, 15, 20, 24, 30, 21, 25, 30, 33, 38, 40]


def test_accelerate_capture_ends_each_save_at_its_random_states_line() -> None:
    """save_state: start at "Saving current state", end at "Random states saved"; one resume."""
    rows, name = _events("accelerate/accelerate.log")
    assert name == "accelerate"
    t = utc("2026-11-29 23:07:44")
    assert rows == [
        (START, 2, t, 10, None, None),
        (END, 7, t, 10, 0.0, None),
        (START, 9, t, 20, None, None),
        (END, 14, t, 20, 0.0, None),
        (START, 16, t, 30, None, None),
        (END, 21, t, 30, 0.0, None),
        (RESUME, 22, None, 20, None, None),
    ]


def test_lightning_capture_gives_verbose_saves_restores_and_fit_stops() -> None:
    """lightning 2.6.6: each launch's ``GPU available`` starts a run, untimed save starts,
    "Restored all states" resumes, fit stops."""
    rows, name = _events("lightning/lightning.log")
    assert name == "lightning"
    assert rows == [
        (EventKind.RUN_START, 2, None, None, None, None),
        (START, 18, None, 10, None, None),
        (START, 19, None, 20, None, None),
        (START, 20, None, 30, None, None),
        (RUN_END, 21, None, 30, None, None),
        (EventKind.RUN_START, 22, None, None, None, None),
        (RESUME, 39, None, None, None, None),
        (START, 41, None, 40, None, None),
        (RUN_END, 42, None, 40, None, None),
        (EventKind.RUN_START, 43, None, None, None, None),
        (RESUME, 59, None, None, None, None),
    ]


def test_deepspeed_019_capture_gives_starts_steps_and_one_resume() -> None:
    """deepspeed 0.19.8 prints no end marker; three load lines are one resume at step 30."""
    rows, name = _events("deepspeed/deepspeed.log")
    assert name == "deepspeed"
    t = utc
    assert _saves(rows) == [
        (START, 154, t("2026-11-29 23:16:04.684"), 10, None, None),
        (START, 160, t("2026-11-29 23:16:04.830"), 20, None, None),
        (START, 166, t("2026-11-29 23:16:04.978"), 30, None, None),
        (RESUME, 313, t("2026-11-29 23:16:05.032"), 30, None, None),
        (START, 325, t("2026-11-29 23:16:05.206"), 40, None, None),
    ]
    assert [r[3] for r in rows if r[0] is STEP] == [0, 5, 10, 15, 20, 25, 30, 0, 35, 40]


def test_deepspeed_016_save_pairs_with_ready_now_and_drops_other_ranks() -> None:
    """0.16: start at "about to be saved", end at the first "is ready now!", duration end-start."""
    head = "[2024-06-26 04:16:{}] [INFO] [{}] "
    lines = [
        head.format("12,291", "logging.py:96:log_dist") + "[Rank 0] [Torch] Checkpoint "
        "global_step100 is about to be saved!",
        head.format("12,292", "logging.py:96:log_dist") + "[Rank 0] Saving model checkpoint: "
        "/ck/global_step100/mp_rank_00_model_states.pt",
        head.format("12,293", "logging.py:96:log_dist") + "[Rank 1] Saving model checkpoint: "
        "/ck/global_step100/mp_rank_00_model_states.pt",
        head.format("12,300", "torch_checkpoint_engine.py:21:save") + "[Torch] Saving "
        "/ck/global_step100/zero_pp_rank_0_mp_rank_00_optim_states.pt...",
        head.format("14,017", "torch_checkpoint_engine.py:33:commit") + "[Torch] Checkpoint "
        "global_step100 is ready now!",
        head.format("14,020", "torch_checkpoint_engine.py:33:commit") + "[Torch] Checkpoint "
        "global_step100 is ready now!",
    ]
    rows, _ = _events_of(lines)
    assert rows == [
        (START, 1, utc("2024-06-26 04:16:12.291"), 100, None, None),
        (END, 5, utc("2024-06-26 04:16:14.017"), 100, pytest.approx(1.726), None),
    ]


def _events_of(lines: list[str], fmt: str = "auto") -> tuple[list[tuple[object, ...]], str]:
    events, parser = parse(lines, fmt)
    return summary(events), parser.name


def test_megatron_2024_takes_the_save_cost_from_the_timer_block() -> None:
    """Untimed save lines; the save-checkpoint timer's max (ms) is the duration. The resume is
    the loader's ' loading checkpoint from … at iteration 100' (its 'successfully loaded' line
    is the same resume), before the file's first stamp: dated at it (an upper bound)."""
    rows, name = _events("megatron/megatron_2024.log")
    assert name == "megatron"
    t = utc
    assert rows == [
        (RESUME, 2, t("2024-05-10 10:00:00"), 100, None, None),
        (RUN_START, 4, t("2024-05-10 10:00:00"), None, None, None),
        (STEP, 5, t("2024-05-10 10:01:00"), 150, pytest.approx(1.2), None),
        (STEP, 6, t("2024-05-10 10:02:00"), 200, pytest.approx(1.1905), None),
        (START, 7, None, 200, None, None),
        (END, 10, None, 200, pytest.approx(5.31261), None),
        (STEP, 11, t("2024-05-10 10:03:10"), 250, pytest.approx(1.2012), None),
        (RUN_END, 12, t("2024-05-10 10:04:00"), None, None, None),
    ]


def test_megatron_2026_stamps_and_info_timer_prefix() -> None:
    """2026 stamps; timer after an INFO:megatron.core.timers header; no timer: end - start."""
    rows, _ = _events("megatron/megatron_2026.log", "megatron")
    t = utc
    assert rows == [
        (START, 1, t("2026-03-02 14:05:07.101"), 300, None, None),
        (END, 4, t("2026-03-02 14:05:11.412391"), 300, pytest.approx(4.3115), None),
        (STEP, 5, t("2026-03-02 14:05:20.000001"), 310, pytest.approx(0.8502), None),
        (START, 6, t("2026-03-02 14:06:00"), 320, None, None),
        (END, 7, t("2026-03-02 14:06:02.5"), 320, pytest.approx(2.5), None),
        (STEP, 8, t("2026-03-02 14:06:10"), 330, pytest.approx(0.851), None),
    ]


def test_megatron_progress_file_is_a_timing_file() -> None:
    """progress.txt: async save start/end paired; a sync "Saved checkpoint" has no duration."""
    rows, name = _events("megatron/progress.txt")
    assert name == "megatron_progress"
    t = utc
    assert rows == [
        (RUN_START, 1, t("2026-03-02 14:05:07"), None, None, None),
        (END, 2, t("2026-03-02 14:30:12"), 250, None, None),
        (START, 3, t("2026-03-02 15:00:01"), 500, None, None),
        (END, 4, t("2026-03-02 15:00:09"), 500, 8.0, None),
    ]


def test_nemo_sync_and_async_saves_resume_and_progress_lines() -> None:
    """Sync: Save duration; async: blocking part as duration, finalize as persist; no 'scratch'."""
    events, parser = parse(read_lines(FIXTURES / "nemo/nemo.log"))
    assert parser.name == "nemo"
    t = utc
    assert summary(events) == [
        (START, 1, t("2024-05-02 10:00:00.5"), 500, None, None),
        (END, 2, t("2024-05-02 10:00:11.75"), 500, pytest.approx(11.25), None),
        (STEP, 4, None, 500, pytest.approx(0.5312), None),
        (START, 5, t("2025-04-24 16:35:04.058"), 9, None, None),
        (STEP, 7, None, 10, pytest.approx(0.03146), None),
        (END, 8, t("2025-04-24 16:35:05"), 9, pytest.approx(0.153), None),
        (RESUME, 10, t("2024-05-02 11:00:00"), 500, None, None),
    ]
    assert events[5].persist_s == pytest.approx(0.942)


def test_a_nemo_sync_save_ends_at_the_next_nemo_record_of_any_kind() -> None:
    """A ``Global Checkpoint Save`` followed by a NeMo record that is not its scheduling line
    (``Async finalization time took …``) was synchronous: it ends there, not only at a line of
    the table, so a run's last save is not left open for want of one."""
    nemo = read_lines(FIXTURES / "nemo/nemo.log")
    esm2 = read_lines(FIXTURES / "real_pasted/nemo_bionemo_esm2_hyperpod.log")
    events, _ = parse([nemo[1], esm2[0]], "nemo")
    assert summary(events) == [
        (START, 1, utc("2024-05-02 10:00:00.512"), 500, None, None),
        (END, 1, utc("2024-05-02 10:00:11.762"), 500, pytest.approx(11.25), None),
    ]
    alone, _ = parse([nemo[1]], "nemo")
    assert [e.kind for e in alone] == [START]


def test_torchtitan_every_save_generation_and_no_background_chatter() -> None:
    """2025 no-space 'enabled)in', 2026 staging and last-step lines; DCP process lines ignored."""
    rows, name = _events("torchtitan/torchtitan.log")
    assert name == "torchtitan"
    t = utc
    assert rows == [
        (RESUME, 2, t("2025-06-16 22:10:00.003"), 500, None, None),
        (RUN_START, 4, t("2025-06-16 22:10:09.2"), 501, None, None),
        (STEP, 5, t("2025-06-16 23:40:41.117"), 800, None, None),
        (START, 6, t("2025-06-16 23:40:42.709"), 800, None, None),
        (END, 7, t("2025-06-16 23:41:10.002"), 800, 27.29, None),
        (STEP, 9, t("2025-06-17 00:10:41.117"), 900, None, None),
        (START, 10, t("2026-08-21 10:00:00"), 900, None, None),
        (END, 11, t("2026-08-21 10:00:03.5"), 900, 3.5, None),
        (START, 12, t("2026-08-21 11:00:00"), 1000, None, None),
        (END, 13, t("2026-08-21 11:00:41.07"), 1000, 41.07, None),
        (RUN_END, 14, t("2026-08-21 11:00:41.3"), None, None, None),
    ]


def test_composer_autoresume_batches_and_debug_saves() -> None:
    """llm-foundry prefix; 'Loading checkpoint from' resumes; DEBUG save lines pair."""
    rows, name = _events("composer/llm_foundry.log")
    assert name == "composer"
    t = utc
    assert rows == [
        (RESUME, 3, t("2024-01-20 08:00:12.004"), 1000, None, None),
        (STEP, 4, None, 1010, None, None),
        (START, 6, t("2024-01-20 08:40:02.118"), 2000, None, None),
        (END, 7, t("2024-01-20 08:40:09.561"), 2000, pytest.approx(7.443), None),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "Epoch 0, global step 80: 'val_loss' was not in top 1",
        "[rank0]:[0] 2025-06-25 10:00:00,000 - root - INFO - Completed checkpoint save request "
        "for checkpoint_id=./outputs/checkpoint/step-800",
        "[INFO|trainer.py:2683] 2026-11-29 22:12:00,001 >> Loading best model from "
        "/data/hf/run/checkpoint-75 (score: 0.1).",
        "[NeMo I 2025-09-20 09:00:00 nemo_logging:393] There were no checkpoints found in "
        "checkpoint_dir or no checkpoint folder at checkpoint_dir :/res. Training from scratch.",
        "Restoring states from the checkpoint path at /ck/last.ckpt",
    ],
)
def test_look_alikes_give_nothing(line: str) -> None:
    """Lines that look like saves or resumes but are not give no event in any stack."""
    from ckpt_advisor.parsers import STACKS

    for fmt in ["auto", *STACKS]:
        assert _events_of([line], fmt)[0] == [], fmt


def test_ansi_coloured_nemo_prefix_is_read() -> None:
    """NEMO_ENABLE_COLORING wraps the prefix in escapes; the record is still read and dated."""
    line = "\x1b[32m[NeMo I 2024-05-02 11:00:00 nemo_logging:381]\x1b[0m Resuming training from "
    line += "checkpoint: /res/x--step=70-last.ckpt"
    assert _events_of([line])[0] == [(RESUME, 1, utc("2024-05-02 11:00:00"), 70, None, None)]


def test_naive_stamps_are_read_in_the_configured_zone() -> None:
    """A DeepSpeed stamp in Europe/Paris (UTC+2 in June) becomes 2 hours earlier in UTC."""
    from zoneinfo import ZoneInfo

    line = "[2024-06-26 04:16:12,291] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0,"
    events, _ = parse([line + " lr=[0.1], mom=[0.9]"], "deepspeed", tz=ZoneInfo("Europe/Paris"))
    assert summary(events) == [(STEP, 1, utc("2024-06-26 02:16:12.291"), 10, None, None)]


def test_nemo_scheduled_async_save_without_a_start_line_starts_the_save() -> None:
    """NeMo 2 without the CheckpointIO timing line: 'Scheduled async checkpoint save for …' is
    the start its '… finalized successfully' ends (real lines 5 and 15 of the Evo2 notebook)."""
    lines = read_lines(
        Path(__file__).parent / "fixtures" / "real_pasted" / "nemo_evo2_notebook_last_step.log"
    )
    rows, name = _events_of([lines[4], lines[14]])
    assert name == "nemo"
    assert [(kind, line, time) for kind, line, time, *_ in rows] == [
        (START, 1, utc("2025-06-18 16:53:19")),
        (END, 2, utc("2025-06-18 16:53:41")),
    ]
    assert rows[1][3] == 99  # the finalize's 'step 100' is one past the file's step
