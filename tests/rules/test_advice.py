"""The recommendation in steps and in the job's own setting."""

from __future__ import annotations

import pytest

from ckpt_advisor.rules.advice import interval_steps, setting_for


@pytest.mark.parametrize(
    ("interval_s", "step_time_s", "steps"),
    [
        (7001.4, 2.0, 3500),  # 3500.7 -> two significant digits
        (2468.0, 2.0, 1200),  # 1234 -> 1200
        (2500.0, 2.0, 1300),  # 1250 -> 1300 (half up)
        (87.4, 1.0, 87),
        (9.6, 1.0, 10),
        (3.0, 10.0, 1),  # less than a step: still 1
    ],
)
def test_interval_steps_rounds_to_two_significant_digits(
    interval_s: float, step_time_s: float, steps: int
) -> None:
    """Seconds / step time, rounded half up to two significant digits, at least 1."""
    assert interval_steps(interval_s, step_time_s) == steps


def test_interval_steps_rejects_a_zero_step_time() -> None:
    """A step time of 0 is a ValueError naming step_time_s."""
    with pytest.raises(ValueError, match="step_time_s"):
        interval_steps(100.0, 0.0)


@pytest.mark.parametrize(
    ("stack", "text"),
    [
        ("hf_trainer", "save_steps=1200"),
        ("lightning", "every_n_train_steps=1200"),
        ("megatron", "--save-interval 1200"),
        ("torchtitan", "checkpoint.interval = 1200"),
        ("deepspeed", None),
        ("accelerate", None),
        ("something_else", None),
    ],
)
def test_setting_for_names_each_stacks_own_setting(stack: str, text: str | None) -> None:
    """Each stack gets its own knob; stacks without one (DeepSpeed) and unknown ones get None."""
    assert setting_for(stack, 1200) == text


def test_setting_for_rejects_zero_steps() -> None:
    """An interval of 0 steps is a ValueError naming interval_steps."""
    with pytest.raises(ValueError, match="interval_steps"):
        setting_for("hf_trainer", 0)
