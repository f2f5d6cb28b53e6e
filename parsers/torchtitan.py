"""pytorch/torchtitan logs (docs/FORMATS.md §7).

Read from pytorch/torchtitan b5bcd76c6 (2026-08-21) and its history (2e998c0b1^, 0e0590c13,
031f73f8a, eef8bb2b1): ``torchtitan/components/checkpoint.py``, ``train.py``,
``tools/logging.py``. Prefix ``[titan] 2025-06-16 23:40:42,709 - root - INFO - `` (torchrun
``--tee`` adds ``[rank0]:`` before it); step lines are ANSI-coloured (stripped first). Before
the ``[titan] `` tag the prefix was ``2025-04-01 00:25:54,090 - root - INFO - `` (forks still
print it, some with ``step: 640/644 = 99.3789%  loss: …`` step lines).

What is recognised:

* Save start: ``Saving the checkpoint (or staging if async is enabled).`` (2025-02 … 2026-06),
  ``Saving the checkpoint.`` / ``Staging the checkpoint.`` (2026-06 →), ``Saving a full
  checkpoint at last step, step N.`` / ``Saving a model only checkpoint in <dtype> at last
  step, step N.`` → ``checkpoint_start`` (step: the last step line's, or N).
* Save end with its duration: ``Finished saving the checkpoint (or staging if async is
  enabled)in T seconds.`` (no space before ``in`` until 2026-04), ``… enabled) in T seconds.``,
  ``Finished saving|staging the checkpoint in T seconds.``, ``Last step checkpoint completed in
  Ts`` → ``checkpoint_end`` with ``duration_s`` = T. With async checkpointing T is the staging
  time, the part that blocks training; the background process's lines (``[rank0]:[0] … -
  Completed checkpoint save request …``) are not save ends and give nothing.
* ``Loading the checkpoint from <dir>.`` / ``Loading the checkpoint at step N.`` → ``resume``
  (step from ``step-N``); ``No checkpoint was provided, this is a fresh start.`` gives nothing.
* ``step: N  loss: …`` → ``step``; ``Training starts at step N`` → ``run_start``;
  ``Training completed`` → ``run_end``.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.stack import Header, Pattern, Stack
from ckpt_advisor.parsers.timestamps import parse_ymd_hms

_CKPT = "torchtitan torchtitan/components/checkpoint.py"
_TRAIN = "torchtitan torchtitan/train.py"

TITAN_FORMAT = Header(
    keyword="[titan] ",
    regex=re.compile(
        r"\[titan\] (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (?P<logger>[\w.]+) - "
        r"(?P<level>[A-Z]+) - (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="[rank0]:[titan] 2025-06-16 23:40:42,709 - root - INFO - Saving the checkpoint (or "
    "staging if async is enabled).",
    source='torchtitan tools/logging.py init_logger: "[titan] %(asctime)s - %(name)s - '
    '%(levelname)s - %(message)s"',
    identifies_stack=True,
    in_prefilter=False,
)

PLAIN_FORMAT = Header(
    keyword=" - root - ",
    regex=re.compile(
        r"(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - root - "
        r"(?P<level>[A-Z]+) - (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="[rank0]:2025-04-01 00:25:54,090 - root - INFO - Saving a full checkpoint at last "
    "step, step 644.",
    source='torchtitan tools/logging.py before the "[titan] " tag: "%(asctime)s - %(name)s - '
    '%(levelname)s - %(message)s" (root logger); real paste in '
    "tests/parsers/fixtures/real_pasted/torchtitan_newcomputebench_docs.log",
    identifies_stack=False,
    in_prefilter=False,
)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        name="finished",
        kind=EventKind.CHECKPOINT_END,
        keyword="Finished ",
        regex=re.compile(
            r"Finished (?:saving|staging) the checkpoint"
            r"(?: \(or staging if async is enabled\))? ?in (?P<duration_s>\d+(?:\.\d+)?) seconds"
        ),
        sample="[rank0]:[titan] 2025-06-16 23:41:10,002 - root - INFO - Finished saving the "
        "checkpoint (or staging if async is enabled)in 27.29 seconds.",
        source=f'{_CKPT} save(): logger.info(f"Finished saving the checkpoint (or staging if '
        'async is enabled)in {time.monotonic() - begin:.2f} seconds.") (space added 0e0590c13; '
        "split into saving/staging 2e998c0b1)",
    ),
    Pattern(
        name="last_step_done",
        kind=EventKind.CHECKPOINT_END,
        keyword="Last step checkpoint completed in ",
        regex=re.compile(r"Last step checkpoint completed in (?P<duration_s>\d+(?:\.\d+)?)s"),
        sample="[titan] 2026-08-21 10:00:00,000 - root - INFO - Last step checkpoint completed "
        "in 41.07s",
        source=f'{_CKPT} (2e998c0b1 →) logger.info(f"Last step checkpoint completed in '
        '{t:.2f}s")',
    ),
    Pattern(
        name="saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="ing the checkpoint",
        regex=re.compile(
            r"^(?:Saving|Staging) the checkpoint(?: \(or staging if async is enabled\))?\.$"
        ),
        sample="[rank0]:[titan] 2025-06-16 23:40:42,709 - root - INFO - Saving the checkpoint "
        "(or staging if async is enabled).",
        source=f'{_CKPT} save(): logger.info("Saving the checkpoint (or staging if async is '
        'enabled).") (2e998c0b1 →: "Saving the checkpoint." / "Staging the checkpoint.")',
    ),
    Pattern(
        name="saving_last",
        kind=EventKind.CHECKPOINT_START,
        keyword=" at last step, step ",
        regex=re.compile(
            r"(?:^|- )Saving a (?:full|model only) checkpoint.* at last step, step (?P<step>\d+)"
        ),
        sample="[titan] 2025-06-17 02:10:00,100 - root - INFO - Saving a full checkpoint at last "
        "step, step 3000.",
        source=f'{_CKPT} _save_last_step: logger.info(f"Saving a full checkpoint at last step, '
        'step {curr_step}.")',
    ),
    Pattern(
        name="loading",
        kind=EventKind.RESUME,
        keyword="Loading the checkpoint ",
        regex=re.compile(
            r"^Loading the checkpoint (?:from (?P<path>\S+?)|at step (?P<step>\d+))\.?$"
        ),
        sample="[rank0]:[titan] 2025-06-17 08:00:03,511 - root - INFO - Loading the checkpoint "
        "from ./outputs/checkpoint/step-800.",
        source=f'{_CKPT} load(): logger.info(f"Loading the checkpoint from {{checkpoint_id}}.") '
        '(2024: f"Loading the checkpoint at step {step}.")',
    ),
    Pattern(
        name="step",
        kind=EventKind.STEP,
        keyword="step:",
        regex=re.compile(r"^step:\s*(?P<step>\d+)(?:/\d+ = [\d.]+%)?\s+loss:"),
        sample="[rank0]:[titan] 2025-06-16 23:40:41,117 - root - INFO - step: 800  loss:  "
        "4.7215  memory: 49.66GiB(52.28%)  tps: 5,847  tflops: 338.65  mfu: 34.24%",
        source=f'{_TRAIN} log(): f"{{color.red}}step: {{step:2}}  {{color.green}}loss: …"',
    ),
    Pattern(
        name="training_starts",
        kind=EventKind.RUN_START,
        keyword="Training starts at step ",
        regex=re.compile(r"^Training starts at step (?P<step>\d+)"),
        sample="[rank0]:[titan] 2025-06-16 22:10:03,001 - root - INFO - Training starts at step 1.",
        source=f'{_TRAIN} train(): logger.info(f"Training starts at step {{self.step + 1}}")',
    ),
    Pattern(
        name="training_completed",
        kind=EventKind.RUN_END,
        keyword="Training completed",
        regex=re.compile(r"^Training completed"),
        sample="[rank0]:[titan] 2025-06-17 02:10:41,300 - root - INFO - Training completed",
        source=f'{_TRAIN} train(): logger.info("Training completed")',
    ),
)


class Torchtitan(Stack):
    """torchtitan: the pattern table; start lines take the last step line's step."""

    name = "torchtitan"
    headers = (TITAN_FORMAT, PLAIN_FORMAT)
    patterns = PATTERNS
    step_in_path = re.compile(r"step-(\d+)")
