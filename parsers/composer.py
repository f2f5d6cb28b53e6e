"""MosaicML Composer / llm-foundry logs (docs/FORMATS.md §9).

Read from mosaicml/composer 6405188805 (v0.24.1+199: ``composer/trainer/trainer.py``,
``callbacks/checkpoint_saver.py``, ``utils/checkpoint.py``, ``loggers/console_logger.py``) and
llm-foundry 8c8dd48f7 (``command_utils/train.py`` logging format). At the default INFO level
Composer prints no save lines (they are DEBUG): a save is seen only with DEBUG on, or in the
timing file / checkpoint folder.

What is recognised:

* DEBUG ``Saving sharded checkpoints to <file>...`` / ``Saving monolithic checkpoint to
  <file>`` → ``checkpoint_start``; DEBUG ``Checkpoint locally saved to <file>`` →
  ``checkpoint_end`` (``duration_s`` = end − start). Step from ``ba<N>`` in the file name.
* INFO ``Loading checkpoint from <path>`` (autoresume or ``load_path``) → ``resume``;
  ``Waiting for checkpoint uploading to finish``, ``Searching for a previous checkpoint to
  autoresume`` and ``No previous autoresume checkpoint found`` only identify the stack.
* Console logger ``[epoch=E][batch=N/T]:`` / ``[batch=N/T]:`` → ``step`` (batch = step).
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.stack import Header, Pattern, Stack
from ckpt_advisor.parsers.timestamps import parse_ymd_hms

_COMPOSER = "composer v0.24.1+199 composer"

FOUNDRY_FORMAT = Header(
    keyword=": rank",
    regex=re.compile(
        r"(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): rank\d+\[\d+\]\[[^\]]*\]: "
        r"(?P<level>[A-Z]+): (?P<logger>[\w.]+): (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="2024-01-19 15:51:44,402: rank0[11406][MainThread]: INFO: composer.trainer.trainer: "
    "Run name: mpt-7b-run",
    source="llm-foundry command_utils/train.py logging.basicConfig: f'%(asctime)s: "
    "rank{dist.get_global_rank()}[%(process)d][%(threadName)s]: %(levelname)s: %(name)s: "
    "%(message)s' (llm-foundry PR#884)",
    identifies_stack=True,
)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        name="saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="Saving ",
        regex=re.compile(
            r"Saving (?:sharded checkpoints|monolithic checkpoint) to (?P<path>\S+?)(?:\.\.\.)?$"
        ),
        sample="2024-01-19 16:40:02,118: rank0[11406][MainThread]: DEBUG: "
        "composer.utils.checkpoint: Saving monolithic checkpoint to ep0-ba1000-rank0.pt",
        source=f"{_COMPOSER}/utils/checkpoint.py _save_checkpoint: log.debug(f'Saving monolithic "
        "checkpoint to {save_filename}') / log.debug(f'Saving sharded checkpoints to "
        "{save_filename}...')",
    ),
    Pattern(
        name="saved",
        kind=EventKind.CHECKPOINT_END,
        keyword="Checkpoint locally saved to ",
        regex=re.compile(r"Checkpoint locally saved to (?P<path>\S+)"),
        sample="2024-01-19 16:40:09,561: rank0[11406][MainThread]: DEBUG: "
        "composer.callbacks.checkpoint_saver: Checkpoint locally saved to "
        "/ck/ep0-ba1000-rank0.pt",
        source=f"{_COMPOSER}/callbacks/checkpoint_saver.py _save_checkpoint: "
        "log.debug(f'Checkpoint locally saved to {saved_path}')",
    ),
    Pattern(
        name="loading",
        kind=EventKind.RESUME,
        keyword="Loading checkpoint from ",
        regex=re.compile(r"^Loading checkpoint from (?P<path>\S+)"),
        sample="2024-01-20 08:00:12,004: rank0[20211][MainThread]: INFO: "
        "composer.trainer.trainer: Loading checkpoint from /ck/latest-rank0.pt",
        source=f"{_COMPOSER}/trainer/trainer.py __init__: log.info(f'Loading checkpoint from "
        "{load_path}')",
        identifies_stack=False,
    ),
    Pattern(
        name="upload_wait",
        kind=None,
        keyword="Waiting for checkpoint uploading to finish",
        regex=re.compile(r"^Waiting for checkpoint uploading to finish"),
        sample="2024-01-19 18:02:11,933: rank0[11406][MainThread]: INFO: "
        "composer.callbacks.checkpoint_saver: Waiting for checkpoint uploading to finish",
        source=f"{_COMPOSER}/callbacks/checkpoint_saver.py fit_end: log.info('Waiting for "
        "checkpoint uploading to finish')",
    ),
    Pattern(
        name="autoresume",
        kind=None,
        keyword="autoresume",
        regex=re.compile(
            r"^(?:Searching for a previous checkpoint to autoresume|No previous autoresume "
            r"checkpoint found)"
        ),
        sample="2024-01-20 08:00:11,871: rank0[20211][MainThread]: INFO: "
        "composer.trainer.trainer: Searching for a previous checkpoint to autoresume",
        source=f"{_COMPOSER}/trainer/trainer.py _get_autoresume_checkpoint",
    ),
    Pattern(
        name="batch",
        kind=EventKind.STEP,
        keyword="[batch=",
        regex=re.compile(r"^(?:\[epoch=\d+\])?\[batch=(?P<step>\d+)/\d+\]:"),
        sample="[epoch=1][batch=10/100]:",
        source=f"{_COMPOSER}/loggers/console_logger.py _log_to_console: "
        "f'[epoch={epoch}][batch={batch}/{total}]: '",
        identifies_stack=False,
    ),
)


class Composer(Stack):
    """Composer / llm-foundry: the pattern table (saves only at DEBUG)."""

    name = "composer"
    headers = (FOUNDRY_FORMAT,)
    patterns = PATTERNS
    step_in_path = re.compile(r"ba(\d+)")
