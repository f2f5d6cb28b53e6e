"""The recommended interval in the user's own units: steps, and the setting that holds them."""

from __future__ import annotations

import math

from ckpt_advisor.rules._checks import require_count, require_positive

SETTINGS: dict[str, str] = {
    "hf_trainer": "save_steps={steps}",
    "lightning": "every_n_train_steps={steps}",
    "megatron": "--save-interval {steps}",
    "torchtitan": "checkpoint.interval = {steps}",
}
"""Training stack (parser name) -> the job's own interval setting, with ``{steps}`` to fill in.

Sources: transformers ``TrainingArguments.save_steps`` (with ``save_strategy="steps"``);
Lightning ``ModelCheckpoint(every_n_train_steps=...)``; Megatron-LM ``--save-interval``
(``megatron/training/arguments.py``); torchtitan ``[checkpoint] interval`` in the job TOML
(``--checkpoint.interval`` on the command line). DeepSpeed and Accelerate are absent on purpose:
they have no interval setting of their own, the training script decides when to call
``engine.save_checkpoint`` / ``accelerator.save_state``, so only the step count can be given."""


def interval_steps(interval_s: float, step_time_s: float) -> int:
    """Convert an interval to whole training steps, rounded to two significant digits.

    ``N = interval_s / step_time_s`` rounded half up to two significant digits (1234 -> 1200,
    87.4 -> 87, 0.3 -> 1), never below 1. Two digits are what people type and cost nothing:
    the waste curve is flat near its optimum (k× off costs a factor ``(k + 1/k)/2``, so the
    at most ~5% rounding error costs about 0.1% of the waste).

    Args:
        interval_s: the interval, seconds, finite and > 0.
        step_time_s: seconds per training step, finite and > 0.

    Returns:
        Steps, an integer >= 1.

    Raises:
        ValueError: an argument is non-finite or <= 0.
    """
    steps = require_positive("interval_s", interval_s) / require_positive(
        "step_time_s", step_time_s
    )
    if steps < 1.0:
        return 1
    unit = 10.0 ** max(math.floor(math.log10(steps)) - 1, 0)
    return max(1, int(math.floor(steps / unit + 0.5) * unit))


def setting_for(stack: str, interval_steps: int) -> str | None:
    """The line to put in the job's configuration for a checkpoint every ``interval_steps``.

    Args:
        stack: the parser / training stack name, e.g. ``"hf_trainer"``, ``"lightning"``,
            ``"megatron"``, ``"torchtitan"`` (see :data:`SETTINGS`).
        interval_steps: steps between checkpoints, >= 1.

    Returns:
        The setting text, e.g. ``"save_steps=1200"``; None for a stack without such a setting
        (DeepSpeed, Accelerate) or an unknown one.

    Raises:
        ValueError: ``interval_steps`` is not an integer >= 1.
    """
    steps = require_count("interval_steps", interval_steps, minimum=1)
    template = SETTINGS.get(stack)
    return None if template is None else template.format(steps=steps)
