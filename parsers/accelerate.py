"""HuggingFace Accelerate ``save_state``/``load_state`` (docs/FORMATS.md §2).

Read from huggingface/accelerate 16cb6eb80 (``src/accelerate/accelerator.py``,
``checkpointing.py``) and the capture in ``tests/parsers/fixtures/accelerate/`` (accelerate
1.15.0, which puts ``[RANK 0] `` before each message). Accelerate has no formatter of its
own: the script's ``basicConfig`` decides (the examples use ``%m/%d/%Y %H:%M:%S - LEVEL -
name - msg``, which has whole seconds only).

What is recognised:

* ``Saving current state to <dir>`` → ``checkpoint_start`` (step from ``step_N`` in the dir).
* ``Random states saved in <dir>/random_states_<rank>.pkl`` — always the last item written —
  → ``checkpoint_end`` with ``duration_s`` = end − start. The per-item lines (``Model weights
  saved in``, ``Optimizer state saved in``, FSDP/DeepSpeed/Megatron branch lines) give nothing.
* ``Loading states from <dir>`` and the examples' ``Resumed from checkpoint: <dir>`` →
  one ``resume``.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.hf_trainer import EXAMPLES_FORMAT
from ckpt_advisor.parsers.stack import Pattern, Stack

_SOURCE = "accelerate 16cb6eb80 src/accelerate"

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        name="saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="Saving current state to ",
        regex=re.compile(r"Saving current state to (?P<path>\S.*)"),
        sample="11/29/2026 23:07:44 - INFO - accelerate.accelerator - [RANK 0] Saving current "
        "state to /tmp/accout/step_10",
        source=f'{_SOURCE}/accelerator.py save_state: logger.info(f"Saving current state to '
        '{output_dir}")',
    ),
    Pattern(
        name="random_states_saved",
        kind=EventKind.CHECKPOINT_END,
        keyword="Random states saved in ",
        regex=re.compile(r"Random states saved in (?P<path>\S.*)"),
        sample="11/29/2026 23:07:44 - INFO - accelerate.checkpointing - [RANK 0] Random states "
        "saved in /tmp/accout/step_10/random_states_0.pkl",
        source=f'{_SOURCE}/checkpointing.py save_accelerator_state: logger.info(f"Random states '
        'saved in {output_states_file}") (the last write)',
    ),
    Pattern(
        name="loading",
        kind=EventKind.RESUME,
        keyword="Loading states from ",
        regex=re.compile(r"Loading states from (?P<path>\S.*)"),
        sample="11/29/2026 23:07:44 - INFO - accelerate.accelerator - [RANK 0] Loading states "
        "from /tmp/accout/step_20",
        source=f'{_SOURCE}/accelerator.py load_state: logger.info(f"Loading states from '
        '{input_dir}")',
    ),
    Pattern(
        name="resumed",
        kind=EventKind.RESUME,
        keyword="Resumed from checkpoint: ",
        regex=re.compile(r"^Resumed from checkpoint: (?P<path>\S.*)"),
        sample="Resumed from checkpoint: /tmp/accout/step_20",
        source='accelerate examples/complete_nlp_example.py: accelerator.print(f"Resumed from '
        'checkpoint: {args.resume_from_checkpoint}")',
        identifies_stack=False,
    ),
)


class Accelerate(Stack):
    """Accelerate: the pattern table; ``Random states saved in`` ends each save."""

    name = "accelerate"
    headers = (EXAMPLES_FORMAT,)
    patterns = PATTERNS
    step_in_path = re.compile(r"(?<![^/_])step_(\d+)")
