"""Lightning: ModelCheckpoint lines, restores and fit stops, all untimed."""

from __future__ import annotations

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, summary


def test_not_in_top_k_saves_nothing() -> None:
    """``… was not in top k`` (no save) gives no event, in 2.x and pre-1.3 wording."""
    lines = [
        "GPU available: True (cuda), used: True",
        "Epoch 0, global step 80: 'val_loss' was not in top 1",
        "Epoch 0, step 80: val_loss was not in top 1",
    ]
    events, parser = parse(lines)
    assert parser.name == "lightning"
    assert events == []


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
