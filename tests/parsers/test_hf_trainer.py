"""HF Trainer: formats, resume wording by version, save pairing and the training bar."""

from __future__ import annotations

from datetime import UTC
from zoneinfo import ZoneInfo

from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, summary, utc

START, END = EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END


def _rec(clock: str, msg: str, where: str = "trainer.py:4149", level: str = "INFO") -> str:
    return f"[{level}|{where}] 2026-11-29 {clock} >> {msg}"


def test_examples_format_gives_time_in_the_given_zone() -> None:
    """The example scripts' ``%m/%d/%Y %H:%M:%S - LEVEL - name -`` stamp is read in ``tz``."""
    lines = [
        "10/20/2023 15:41:03 - INFO - transformers.trainer - ***** Running training *****",
        "10/20/2023 15:41:29 - INFO - transformers.trainer - Saving model checkpoint to "
        "out/checkpoint-500",
        "10/20/2023 15:41:31 - INFO - transformers.modeling_utils - Model weights saved in "
        "out/checkpoint-500/model.safetensors",
        "10/20/2023 15:41:35 - INFO - __main__ - evaluating",
    ]
    events, parser = parse(lines, tz=ZoneInfo("Europe/Paris"))
    assert parser.name == "hf_trainer"
    assert summary(events) == [
        (EventKind.RUN_START, 1, utc("2023-10-20 13:41:03"), None, None, None),
        (START, 2, utc("2023-10-20 13:41:29"), 500, None, None),
        (END, 3, utc("2023-10-20 13:41:31"), 500, 2.0, None),
    ]


def test_transformers_4x_resume_wording_gives_one_resume() -> None:
    """4.x prints several "Continuing training" lines; only the global-step one is the resume."""
    lines = [
        _rec("10:00:00,000", "Loading model from out/checkpoint-50.", "trainer.py:2126"),
        _rec(
            "10:00:01,000", "  Continuing training from checkpoint, will skip to saved global_step"
        ),
        _rec("10:00:01,000", "  Continuing training from epoch 0"),
        _rec("10:00:01,000", "  Continuing training from global step 50"),
    ]
    events, _ = parse(lines)
    assert summary(events) == [
        (EventKind.RESUME, 4, utc("2026-11-29 10:00:01"), 50, None, None),
    ]


def test_loading_the_best_model_at_the_end_is_not_a_resume() -> None:
    """``Loading best model from …`` is end-of-training bookkeeping and gives nothing."""
    line = _rec("10:00:00,000", "Loading best model from out/checkpoint-100 (score: 0.5).")
    events, _ = parse([line])
    assert events == []


def test_a_save_ends_at_its_last_saved_in_line_before_another_record() -> None:
    """Only "saved in" lines under the save's own directory extend it; any other record ends it."""
    lines = [
        _rec("10:00:00,000", "Saving model checkpoint to out/checkpoint-25"),
        _rec("10:00:00,500", "Configuration saved in out/checkpoint-25/config.json"),
        _rec("10:00:01,000", "tokenizer config file saved in out/checkpoint-250/tok.json"),
        _rec("10:00:02,000", "Model weights saved in out/checkpoint-25/model.safetensors"),
    ]
    events, _ = parse(lines)
    assert summary(events) == [
        (START, 1, utc("2026-11-29 10:00:00"), 25, None, None),
        (END, 2, utc("2026-11-29 10:00:00.500"), 25, 0.5, None),
    ]


def test_a_save_without_saved_in_lines_has_no_end() -> None:
    """With no sub-step line the end is unknown, so only the start is reported."""
    lines = [
        _rec("10:00:00,000", "Saving model checkpoint to out/checkpoint-25"),
        _rec(
            "10:00:05,000",
            "Deleting older checkpoint [out/checkpoint-5] due to args.save_total_limit",
        ),
    ]
    events, _ = parse(lines)
    assert [e.kind for e in events] == [START]


def test_a_quiet_file_leaves_an_open_save_open() -> None:
    """``finish()`` (the file went quiet, or a read reached its end) ends no save: the weights
    line written after it still ends the save, as if no flush had happened, and a save a file
    ends inside has no end, so no number."""
    config = [
        _rec("10:00:00,000", "Saving model checkpoint to out/checkpoint-25/"),
        _rec("10:00:00,001", "Configuration saved in out/checkpoint-25/config.json"),
    ]
    later = [
        _rec("10:00:45,250", "Model weights saved in out/checkpoint-25/model.safetensors"),
        _rec("10:00:46,000", "Deleting older checkpoint [out/checkpoint-5]"),
    ]
    parser = make_parser("hf_trainer", tz=UTC)
    events = [ev for n, line in enumerate(config, 1) for ev in parser.feed(line, n)]
    assert parser.finish() == []
    assert [e.kind for e in events] == [START]
    events += [ev for n, line in enumerate(later, 3) for ev in parser.feed(line, n)]
    events += parser.finish()
    assert summary(events) == [
        (START, 1, utc("2026-11-29 10:00:00"), 25, None, None),
        (END, 3, utc("2026-11-29 10:00:45.250"), 25, 45.25, None),
    ]
    whole, _ = parse(config + later)
    assert summary(whole) == summary(events)
    cut, _ = parse(config)
    assert [e.kind for e in cut] == [START]


def test_a_failure_after_a_quiet_pause_ends_the_open_save() -> None:
    """A traceback flushed by ``finish()`` ends the save it interrupted at its last "saved in"
    line, as the line after the traceback would have: the same save end, before the failure."""
    lines = [
        _rec("10:00:00,000", "Saving model checkpoint to out/checkpoint-25/"),
        _rec("10:00:02,000", "Model weights saved in out/checkpoint-25/model.safetensors"),
        "Traceback (most recent call last):",
        '  File "train.py", line 1, in <module>',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    quiet, _ = parse(lines)
    assert [(e.kind, e.line) for e in quiet] == [
        (START, 1),
        (END, 2),
        (EventKind.FAILURE, 3),
    ]
    assert summary(quiet)[1] == (END, 2, utc("2026-11-29 10:00:02"), 25, 2.0, None)
    resumed, _ = parse([*lines, _rec("10:05:00,000", "***** Running training *****")])
    assert [(e.kind, e.line) for e in resumed[:3]] == [(e.kind, e.line) for e in quiet]
    assert summary(resumed)[:2] == summary(quiet)[:2]


def test_a_tmp_checkpoint_dir_takes_its_step_from_the_training_bar() -> None:
    """A ``tmp-checkpoint-<random>`` save (no step in the name) is dated by the bar's step."""
    line = "\r 21%|██        | 25/120 [00:03<00:15,  6.24it/s]" + _rec(
        "10:00:00,000", "Saving model checkpoint to out/tmp-checkpoint-1a2b"
    )
    events, _ = parse([line])
    assert [(e.kind, e.step) for e in events] == [(EventKind.STEP, 25), (START, 25)]


def test_a_final_save_model_outside_a_checkpoint_dir_has_no_step() -> None:
    """``trainer.save_model()`` to the output dir is a save with an unknown step."""
    events, _ = parse([_rec("10:00:00,000", "Saving model checkpoint to out")])
    assert [(e.kind, e.step, e.detail) for e in events] == [(START, None, "out")]


def test_bars_other_than_the_training_bar_give_no_steps() -> None:
    """Bars with a description or another total than the optimization steps are ignored."""
    lines = [
        _rec("10:00:00,000", "  Total optimization steps = 1,200", "trainer.py:1627"),
        "\r 10%|█         | 10/100 [00:01<00:09, 10.00it/s]",
        "\rWriting model shards: 100%|██████████| 1/1 [00:00<00:00, 37.80it/s]",
        "\r  1%|          | 12/1200 [00:04<07:00,  2.50s/it]",
    ]
    events, _ = parse(lines)
    assert summary(events) == [(EventKind.STEP, 4, None, 12, 2.5, None)]


def test_one_step_event_per_line_at_most() -> None:
    """A line of many redraws gives one step event, for its last bar state."""
    redraws = "".join(f"\r  {n}%|          | {n}/120 [00:01<00:10, 8.00it/s]" for n in range(1, 60))
    events, _ = parse([redraws, redraws], fmt="hf_trainer")
    assert [(e.kind, e.line, e.step) for e in events] == [(EventKind.STEP, 1, 59)]


def test_a_bad_timestamp_is_a_miss_and_no_time() -> None:
    """An impossible date is reported and leaves the event without a time."""
    events, parser = parse(
        ["[INFO|trainer.py:1618] 2026-02-30 10:00:00,000 >> ***** Running training *****"]
    )
    assert summary(events) == [(EventKind.RUN_START, 1, None, None, None, None)]
    assert parser.misses == 1
    assert parser.errors[0][0] == 1
    assert "bad timestamp" in parser.errors[0][1]


def test_bare_messages_without_a_formatter_are_read_without_time() -> None:
    """With no logging formatter (HF's default handler) messages still match, untimed."""
    lines = ["***** Running training *****", "Saving model checkpoint to out/checkpoint-10"]
    events, parser = parse(lines)
    assert parser.name == "hf_trainer"
    assert summary(events) == [
        (EventKind.RUN_START, 1, None, None, None, None),
        (START, 2, None, 10, None, None),
    ]


def test_generic_saved_in_wording_does_not_identify_the_stack() -> None:
    """ "… saved in …" is printed by other libraries too, so it does not make a log HF's."""
    events, parser = parse(
        ["Config saved in /tmp/run/config.yaml", "GPU available: True, used: True"]
    )
    assert [(e.kind, e.line) for e in events] == [(EventKind.RUN_START, 2)]
    assert parser.name == "lightning"
