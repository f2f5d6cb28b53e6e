"""DeepSpeed engine logs (docs/FORMATS.md §4).

Read from microsoft/DeepSpeed 38327e07f (v0.16.4+6): ``deepspeed/utils/logging.py`` (format),
``runtime/engine.py`` (save/load), ``runtime/checkpoint_engine/torch_checkpoint_engine.py``
(``[Torch] …`` lines), and the capture in ``tests/parsers/fixtures/deepspeed/``.

What is recognised:

* ``[Torch] Checkpoint <tag> is about to be saved!`` (rank 0), else ``Saving model checkpoint:
  <path>`` (ranks 0 and 1), else the first ``[Torch] Saving <file>...`` → ``checkpoint_start``
  (step from ``global_step<N>`` in the tag or path; later start lines of the same save give
  nothing).
* ``[Torch] Checkpoint <tag> is ready now!`` (``commit``, every rank) → ``checkpoint_end``
  with ``duration_s`` = end − start; the other ranks' copies give nothing.
* ``[Torch] Loading checkpoint from <file>...`` (0.16) / ``[Torch] Begin Load checkpoint from
  <file>...`` (0.19) → ``resume`` (once per step, though one line is printed per file).

deepspeed 0.19.8 (the capture) commented out ``is ready now!`` and the ``[Torch] Saving/Saved``
lines: its saves give a ``checkpoint_start`` only.
* ``step=N, skipped=K, lr=…`` (``log_dist`` every ``steps_per_print``) → ``step``.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.stack import Header, Pattern, Stack
from ckpt_advisor.parsers.timestamps import parse_ymd_hms

_ENGINE = "deepspeed 0.16.4 runtime/engine.py"
_TORCH_ENGINE = "deepspeed 0.16.4 runtime/checkpoint_engine/torch_checkpoint_engine.py"

_FORMAT_SOURCE = (
    'deepspeed 0.16.4 utils/logging.py: "[%(asctime)s] [%(levelname)s] '
    '[%(filename)s:%(lineno)d:%(funcName)s] %(message)s"; log_dist adds "[Rank {r}] "'
)

DEEPSPEED_LOG_DIST = Header(
    keyword="] [Rank ",
    regex=re.compile(
        r"\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \[(?P<level>[A-Z]+)\] "
        r"\[(?P<file>[^\]:]+):(?P<lineno>\d+):(?P<func>[^\]]*)\] \[Rank -?\d+\] (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="[2024-06-26 04:16:12,291] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, "
    "skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
    source=_FORMAT_SOURCE,
    identifies_stack=True,
)
"""A ``log_dist`` record (``[Rank N]``): DeepSpeed's own. The bare format below is shared by
tools that copied DeepSpeed's logger (DLRover's flash checkpoint saver, whose Megatron-LM and
HF Trainer jobs print their own stack's lines beside it: public/megatron/dlrover_977_*), so it
gives the time but does not identify the stack."""

DEEPSPEED_FORMAT = Header(
    keyword="] [",
    regex=re.compile(
        r"\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \[(?P<level>[A-Z]+)\] "
        r"\[(?P<file>[^\]:]+):(?P<lineno>\d+):(?P<func>[^\]]*)\] (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="[2024-04-09 15:39:37,942] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving "
    "./training/model/temp/test-step00000001-state/pytorch_model/mp_rank_00_model_states.pt...",
    source=_FORMAT_SOURCE,
    identifies_stack=False,
    in_prefilter=False,
)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        name="about_to_be_saved",
        kind=EventKind.CHECKPOINT_START,
        keyword=" is about to be saved!",
        regex=re.compile(r"\[Torch\] Checkpoint (?P<path>\S+) is about to be saved!"),
        sample="[2026-11-29 23:16:04,684] [INFO] [logging.py:123:log_dist] [Rank 0] [Torch] "
        "Checkpoint global_step10 is about to be saved!",
        source=f'{_TORCH_ENGINE} create(): log_dist(f"[Torch] Checkpoint {{tag}} is about to be '
        'saved!", ranks=[0])',
    ),
    Pattern(
        name="saving_model_checkpoint",
        kind=EventKind.CHECKPOINT_START,
        keyword="Saving model checkpoint: ",
        regex=re.compile(r"Saving model checkpoint: (?P<path>\S+)"),
        sample="[2024-06-26 04:16:12,291] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model "
        "checkpoint: /ck/global_step100/mp_rank_00_model_states.pt",
        source=f'{_ENGINE} _save_checkpoint: log_dist(f"Saving model checkpoint: {{save_path}}", '
        "ranks=[0, 1])",
    ),
    Pattern(
        name="torch_saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="[Torch] Saving ",
        regex=re.compile(r"\[Torch\] Saving (?P<path>\S+?)\.\.\.$"),
        sample="[2024-06-26 04:16:12,292] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] "
        "Saving /ck/global_step100/mp_rank_00_model_states.pt...",
        source=f'{_TORCH_ENGINE} save(): logger.info(f"[Torch] Saving {{path}}...")',
    ),
    Pattern(
        name="ready_now",
        kind=EventKind.CHECKPOINT_END,
        keyword=" is ready now!",
        regex=re.compile(r"\[Torch\] Checkpoint (?P<path>\S+) is ready now!"),
        sample="[2024-06-26 04:16:14,017] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] "
        "Checkpoint global_step100 is ready now!",
        source=f'{_TORCH_ENGINE} commit(): logger.info(f"[Torch] Checkpoint {{tag}} is ready '
        'now!")',
    ),
    Pattern(
        name="load",
        kind=EventKind.RESUME,
        keyword=" checkpoint from ",
        regex=re.compile(r"\[Torch\] (?:Loading|Begin Load) checkpoint from (?P<path>\S+?)\.\.\.$"),
        sample="[2024-06-26 05:01:02,003] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] "
        "Loading checkpoint from /ck/global_step100/mp_rank_00_model_states.pt...",
        source=f"{_TORCH_ENGINE} load(): "
        'logger.info(f"[Torch] Loading checkpoint from {path}...")'
        ' (0.19.8: log_dist(f"[Torch] Begin Load checkpoint from {path}..."))',
    ),
    Pattern(
        name="step",
        kind=EventKind.STEP,
        keyword=", skipped=",
        regex=re.compile(r"(?<![\w/])step=(?P<step>\d+), skipped=\d+, lr="),
        sample="[2024-06-26 04:16:12,291] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, "
        "skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
        source=f'{_ENGINE} _take_model_step: log_dist(f"step={{self.global_steps}}, '
        'skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])',
    ),
    Pattern(
        name="version",
        kind=None,
        keyword="DeepSpeed info: version=",
        regex=re.compile(r"DeepSpeed info: version="),
        sample="[2024-06-26 04:10:00,001] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed "
        "info: version=0.16.4, git-hash=unknown, git-branch=unknown",
        source=f'{_ENGINE} __init__: log_dist(f"DeepSpeed info: version={{__version__}}, …")',
    ),
)


class DeepSpeed(Stack):
    """DeepSpeed stack: the pattern table; the base class pairs starts with ``is ready now!``."""

    name = "deepspeed"
    headers = (DEEPSPEED_LOG_DIST, DEEPSPEED_FORMAT)
    patterns = PATTERNS
    step_in_path = re.compile(r"global_step(\d+)")
