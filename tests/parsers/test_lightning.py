"""Lightning: ModelCheckpoint lines, restores and fit stops, all untimed; the progress bar's
batches mapped onto global steps where they can be."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines, summary

FIXTURES = Path(__file__).parent / "fixtures"


def test_not_in_top_k_saves_nothing() -> None:
    """``… was not in top k`` (no save) gives no event, in 2.x and pre-1.3 wording."""
    lines = [
        "GPU available: True (cuda), used: True",
        "Epoch 0, global step 80: 'val_loss' was not in top 1",
        "Epoch 0, step 80: val_loss was not in top 1",
    ]
    events, parser = parse(lines)
    assert parser.name == "lightning"
    assert [e.kind for e in events] == [EventKind.RUN_START]


def test_monitor_names_quoted_either_way_are_read() -> None:
    """``{monitor!r}`` and ``{filepath!r}`` may use double quotes; both are read."""
    line = (
        'Epoch 2, global step 300: "val\'s loss" reached 0.12000 (best 0.12000), saving model to '
        '"/ck/it\'s/epoch=2-step=300.ckpt" as top 3'
    )
    events, _ = parse([line], fmt="lightning")
    assert [(e.kind, e.step, e.detail) for e in events] == [
        (EventKind.CHECKPOINT_START, 300, "/ck/it's/epoch=2-step=300.ckpt")
    ]


def test_restoring_alone_is_not_a_resume() -> None:
    """``validate``/``test`` print "Restoring states …" too; only "Restored all states" resumes."""
    lines = [
        "Restoring states from the checkpoint path at /ck/epoch=1-step=500.ckpt",
        "Loaded model weights from the checkpoint at /ck/epoch=1-step=500.ckpt",
    ]
    events, _ = parse(lines, fmt="lightning")
    assert events == []


def test_a_restore_takes_its_step_from_the_checkpoint_name() -> None:
    """``step=N`` in the restored path is the resume step (``global_step=`` is not)."""
    lines = [
        "Restored all states from the checkpoint at /ck/epoch=1-step=500.ckpt",
        "Restored all states from the checkpoint file at /ck/global_step=7.ckpt",
    ]
    events, _ = parse(lines, fmt="lightning")
    assert summary(events) == [
        (EventKind.RESUME, 1, None, 500, None, None),
        (EventKind.RESUME, 2, None, None, None, None),
    ]


def test_fit_stopped_by_max_epochs_ends_the_run_without_a_step() -> None:
    """Any ``Trainer.fit`` stop is a clean run end; only ``max_steps`` names the step."""
    events, _ = parse(["`Trainer.fit` stopped: `max_epochs=3` reached."], fmt="lightning")
    assert summary(events) == [(EventKind.RUN_END, 1, None, None, None, None)]


def test_default_tqdm_bar_gives_the_failure_the_last_step_it_reached() -> None:
    """Lightning's TQDM bar counts batches per epoch: epoch E's batch n is step E × 50 + n (the
    bar's total; real capture, 50 batches an epoch), as the saves glued to its bar confirm
    (epoch 1, batch 30 = step 80; epoch 2, batch 20 = step 120), so the CUDA error after batch
    30 of epoch 2 is at step 130. The launch's ``GPU available`` (line 2) starts the run."""
    events, parser = parse(read_lines(FIXTURES / "lightning" / "lightning_bar.log"))
    assert parser.name == "lightning"
    assert [(e.kind, e.line, e.step) for e in events] == [
        (EventKind.RUN_START, 2, None),
        (EventKind.STEP, 19, 40),
        (EventKind.CHECKPOINT_START, 19, 40),
        (EventKind.STEP, 20, 80),
        (EventKind.CHECKPOINT_START, 20, 80),
        (EventKind.STEP, 21, 120),
        (EventKind.CHECKPOINT_START, 21, 120),
        (EventKind.STEP, 22, 130),
        (EventKind.FAILURE, 22, 130),
    ]
    assert events[1].duration_s == pytest.approx(1 / 300.25)  # the bar's batches a second


def test_a_bar_behind_the_last_save_gives_no_step_and_a_later_epoch_counts_its_total() -> None:
    """A reading no further than the step a save confirmed is not taken as a step; epoch 1's
    batch 20 of a 50-batch bar is step 70 (one optimizer step a batch, Lightning's default)."""
    lines = [
        "GPU available: False, used: False",
        "Epoch 0:  80%|████████  | 40/50 [00:00<00:00, 300.25it/s, v_num=0]Epoch 0, global step "
        "40: 'train_loss' reached 1.84330 (best 1.84330), saving model to '/data/lt/epoch=0-step"
        "=40.ckpt' as top 1",
        "Epoch 0:  80%|████████  | 40/50 [00:00<00:00, 300.50it/s, v_num=0]",
        "Epoch 1:  40%|████      | 20/50 [00:00<00:00, 287.16it/s, v_num=0]",
    ]
    events, _ = parse(lines, fmt="lightning")
    assert [(e.kind, e.step) for e in events] == [
        (EventKind.RUN_START, None),
        (EventKind.STEP, 40),
        (EventKind.CHECKPOINT_START, 40),
        (EventKind.STEP, 70),
    ]


def test_a_checkpoint_name_outside_its_epochs_batches_ends_the_mapping() -> None:
    """With ``accumulate_grad_batches=2`` a 50-batch epoch is 25 steps: the resume from
    ``epoch=1-step=40.ckpt`` (step 40 is not in epoch 1's batches 50-100) says batches are no
    steps, so epoch 2's readings give none (they said step 110); the resume keeps its step."""
    lines = [
        "GPU available: False, used: False",
        "Epoch 1:  90%|█████████ | 45/50 [00:00<00:00, 300.25it/s, v_num=0]",
        "Restored all states from the checkpoint at /data/lt/epoch=1-step=40.ckpt",
        "Epoch 2:  20%|██        | 10/50 [00:00<00:00, 287.16it/s, v_num=1]",
    ]
    events, _ = parse(lines, fmt="lightning")
    assert [(e.kind, e.step) for e in events] == [
        (EventKind.RUN_START, None),
        (EventKind.STEP, 95),
        (EventKind.RESUME, 40),
    ]
