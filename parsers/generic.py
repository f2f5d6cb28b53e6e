"""The fallback for stacks with no parser of their own: a small, conservative save vocabulary.

Jobs on fairseq, mmcv/mmengine (mmdetection, mmsegmentation), Keras/TensorFlow, JAX/Orbax or
DLRover print their saves in a few common shapes (docs/FORMATS.md §20). This stack is never
*detected*: with ``auto`` every record piece that no detected stack matched is offered to it, so
a stack parser that matches always takes precedence, and its events say ``parser="generic"``.
It is conservative: every pattern needs the word *checkpoint* (or a model file with a
checkpoint suffix, ``.h5`` / ``.hdf5`` / ``.keras``) and a framework's own wording, each with
the real pasted line it was read from (tests/parsers/fixtures/public/generic/).

Failures need no fallback: tracebacks, shell deaths and ERROR records are recognised in every
log (``parsers/failures.py``).
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.deepspeed import DEEPSPEED_FORMAT
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.stack import Header, Pattern, Record, Stack
from ckpt_advisor.parsers.timestamps import parse_ymd_hms

PARSER_NAME = "generic"

FAIRSEQ_FORMAT = Header(
    keyword=" | ",
    regex=re.compile(
        r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| [A-Z]+ \| [\w.]+ \| (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="2021-01-05 23:30:23 | INFO | fairseq.checkpoint_utils | Preparing to save checkpoint "
    "for epoch 70 @ 2162 updates",
    source="fairseq fairseq_cli/train.py logging.basicConfig(format='%(asctime)s | "
    "%(levelname)s | %(name)s | %(message)s', datefmt='%Y-%m-%d %H:%M:%S')",
    identifies_stack=False,
    in_prefilter=False,
)

MMCV_FORMAT = Header(
    keyword=" - ",
    regex=re.compile(
        r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - [\w.]+ - [A-Z]+ - (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="2022-08-29 13:22:24,750 - mmdet - INFO - Saving checkpoint at 12 epochs",
    source="mmcv 1.x mmcv/utils/logging.py get_logger: '%(asctime)s - %(name)s - %(levelname)s "
    "- %(message)s'",
    identifies_stack=False,
    in_prefilter=False,
)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        name="fairseq_preparing",
        kind=EventKind.CHECKPOINT_START,
        keyword="Preparing to save checkpoint for ",
        regex=re.compile(r"Preparing to save checkpoint for epoch \d+ @ (?P<step>\d+) updates"),
        sample="2021-01-05 23:30:23 | INFO | fairseq.checkpoint_utils | Preparing to save "
        "checkpoint for epoch 70 @ 2162 updates",
        source="fairseq fairseq/checkpoint_utils.py save_checkpoint (public/generic/"
        "fairseq_2493_save.log)",
        identifies_stack=False,
    ),
    Pattern(
        name="fairseq_saved",
        kind=EventKind.CHECKPOINT_END,
        keyword="Saved checkpoint ",
        regex=re.compile(
            r"Saved checkpoint (?P<path>\S+) \(epoch \d+ @ (?P<step>\d+) updates.*"
            r"\(writing took (?P<duration_s>\d+(?:\.\d+)?) seconds\)"
        ),
        sample="2021-01-05 23:31:24 | INFO | fairseq.checkpoint_utils | Saved checkpoint "
        "checkpoints/checkpoint70.pt (epoch 70 @ 2162 updates, score 100.0) (writing took "
        "61.31149206700138 seconds)",
        source="fairseq fairseq/checkpoint_utils.py save_checkpoint: the whole save, copies "
        "included (the trainer's 'Finished saving checkpoint to' before it is one file)",
        identifies_stack=False,
    ),
    Pattern(
        name="keras_saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="saving model to ",
        regex=re.compile(
            r"Epoch \d+: (?:\S+ improved from \S+ to \S+, )?saving model to "
            r"(?P<path>\S+\.(?:h5|hdf5|keras))\b"
        ),
        sample="Epoch 00040: val_loss improved from 0.29410 to 0.28634, saving model to "
        "out/test/test_weights.hdf5",
        source="keras 2.x keras/callbacks.py ModelCheckpoint._save_model (verbose=1): "
        "'\\nEpoch %05d: %s improved from %0.5f to %0.5f, saving model to %s'",
        identifies_stack=False,
    ),
    Pattern(
        name="mmcv_saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="Saving checkpoint at ",
        regex=re.compile(r"Saving checkpoint at (?:(?P<step>\d+) iterations|\d+ epochs)$"),
        sample="2022-08-29 13:22:24,750 - mmdet - INFO - Saving checkpoint at 12 epochs",
        source="mmcv 1.x mmcv/runner/hooks/checkpoint.py CheckpointHook._save_checkpoint: "
        "f'Saving checkpoint at {runner.epoch + 1} epochs' / '… iterations'",
        identifies_stack=False,
    ),
    Pattern(
        name="orbax_saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="Saving checkpoint at ",
        regex=re.compile(r"\] Saving checkpoint at step (?P<step>\d+)$"),
        sample="I0608 20:54:47.918725 123567287061632 checkpoint_manager.py:1512] [process=0] "
        "Saving checkpoint at step 19",
        source="orbax-checkpoint checkpoint_manager.py CheckpointManager.save "
        "(public/generic/goodput_4_orbax_async_save.log)",
        identifies_stack=False,
    ),
    Pattern(
        name="dcp_async_request",
        kind=EventKind.CHECKPOINT_START,
        keyword="Received async checkpoint request with id=",
        regex=re.compile(r"Received async checkpoint request with id=(?P<path>\S+)"),
        sample="[rank0]:[0] 2026-06-01 13:34:02,318 - root - INFO - Received async checkpoint "
        "request with id=./outputs/checkpoint/step-10",
        source="torch/distributed/checkpoint/_async_process_executor.py (torch 2.7+): the "
        "background save of DCP async_save begins (outside a torchtitan log, whose own lines "
        "bracket the same save; public/torchtitan/torchtitan_3476_*)",
        identifies_stack=False,
    ),
    Pattern(
        name="dlrover_memory_saved",
        kind=EventKind.CHECKPOINT_END,
        keyword="Function save_to_memory cost ",
        regex=re.compile(r"Function save_to_memory cost (?P<duration_s>\d+(?:\.\d+)?)s"),
        sample="[2024-04-18 10:50:38,012] [INFO] [engine.py:97:wrapper] Function save_to_memory "
        "cost 0.545s",
        source="dlrover dlrover/trainer/torch/flash_checkpoint/engine.py timer wrapper: the "
        "blocking copy into shared memory (the storage write is asynchronous)",
        identifies_stack=False,
    ),
)


class Generic(Stack):
    """The fallback stack (module docstring): a pattern table, never detected."""

    name = PARSER_NAME
    headers = (FAIRSEQ_FORMAT, MMCV_FORMAT, DEEPSPEED_FORMAT)
    patterns = PATTERNS
    step_in_path = re.compile(r"(?:step|iter|checkpoint)[-_]?(\d+)")

    def on_record(self, record: Record) -> list[Event]:
        """Each start line is a save of its own: this vocabulary prints one start per save,
        often without a step (Keras' epochs), which the default pairing would take for a
        repeated line of the save still open."""
        hit = self.match(record.msg)
        if hit is None or hit[0].kind is None:
            return []
        if hit[0].kind is EventKind.CHECKPOINT_START:
            self._open_save = None
        return self.pair(self.event(hit[0].kind, record, hit[1]))
