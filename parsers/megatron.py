"""NVIDIA Megatron-LM logs and its ``progress.txt`` (docs/FORMATS.md §5).

Read from NVIDIA/Megatron-LM d98e8a64dd (2026-08-22) and its history
(``megatron/training/checkpointing.py``, ``training.py``, ``core/timers.py``,
``utils/log_utils.py``). Megatron prints with bare ``print`` (rank 0 or the last rank); since
2026-01-27 (6cf285b238) save lines carry ``[%Y-%m-%d %H:%M:%S.%f]``, iteration lines since
2024-03-09 (f427c6f0a1) ``[%Y-%m-%d %H:%M:%S]`` (microseconds since 2026-01-27).

What is recognised (:class:`Megatron`):

* ``saving checkpoint at iteration N to DIR[ in FMT format]`` → ``checkpoint_start`` at N.
* ``successfully saved checkpoint {at|from} iteration N to DIR[ [ t …, p … ]]`` ends the save,
  and the ``save-checkpoint`` timer printed after it (``(min, max) time across ranks (ms):``
  then ``    save-checkpoint ......: (min, max)``, or the ``max time across ranks`` form, with
  or without the ``INFO:megatron.core.timers:`` prefix or srun ``--label``'s ``N: ``; the
  header may be glued to the timer line in pasted logs) gives its cost: ``checkpoint_end`` at
  the timer line, ``duration_s`` = the max over ranks in seconds, ``time`` = the "successfully
  saved" line's stamp (else start + duration, estimated). Without a timer line before the next
  record of the table (an iteration line, a resume, the next save) or a failure, the end is
  reported at the "successfully saved" line with ``duration_s`` = end − start when both lines
  are stamped. A quiet file (``finish()``) reports neither: the timer line may still come
  (the save's last barrier across ranks can take seconds), so a file whose last save line is
  its "successfully saved" one leaves that save open. An async save's timer comes before
  its "successfully saved" line (printed at finalize), which then gives nothing.
* ``iteration N/TOTAL | … elapsed time per iteration (ms): X | …`` → ``step`` (every
  ``--log-interval``; ``duration_s`` = X / 1000).
* ``successfully loaded checkpoint from DIR … at iteration N`` → ``resume`` at N (the
  `` loading checkpoint from DIR at iteration N`` line before it gives nothing).
* ``[before the start of training step] datetime: …`` → ``run_start``;
  ``[after training is done] datetime: …`` → ``run_end``.

:class:`MegatronProgress` reads ``--log-progress``'s ``<save>/progress.txt`` as a timing file:
``Starting job`` → ``run_start``; ``Saving async checkpoint\\tIteration: N`` →
``checkpoint_start``; ``Saved async checkpoint\\tIteration: N`` → ``checkpoint_end`` with
``duration_s`` = end − start (for an async save that is the time until it is durable, an
upper bound of the blocking cost); ``Saved checkpoint\\tIteration: N`` (sync) →
``checkpoint_end`` with no duration (no start is logged; stamps have whole seconds).
"""

from __future__ import annotations

import re
from datetime import timedelta

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.stack import Header, ParseContext, Pattern, Record, Stack
from ckpt_advisor.parsers.timestamps import parse_ymd_hms

_CKPT = "Megatron-LM megatron/training/checkpointing.py"
_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?"

STAMP = Header(
    keyword="] ",
    regex=re.compile(rf"\[(?P<time>{_TIME})\] (?P<msg>.*)"),
    parse_time=parse_ymd_hms,
    sample="  [2026-03-02 14:05:07.412391] successfully saved checkpoint from iteration     "
    "100 to /ck [ t 1/1, gtp_remat 1/1, p 1/1 ]",
    source=f"{_CKPT} (6cf285b238, 2026-01-27): "
    "f\"[{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}] …\"; training.py training_log "
    "(f427c6f0a1, 2024-03-09) ' [%Y-%m-%d %H:%M:%S] iteration …'",
    identifies_stack=False,
    in_prefilter=False,
)

SAVED = Pattern(
    name="saved",
    kind=None,
    keyword="successfully saved ",
    regex=re.compile(
        r"successfully saved (?:local )?checkpoint (?:at|from) iteration\s+(?P<step>\d+)"
        r"(?: to (?P<path>\S+))?"
    ),
    sample="  successfully saved checkpoint from iteration     100 to /ck [ t 1/1, p 1/1 ]",
    source=f"{_CKPT} save_checkpoint: print_rank_0(f'  successfully saved checkpoint from "
    "iteration {iteration:7d} to {save_dir} [ t …, p … ]') ('at iteration' before cbb9c05c06)",
)

TIMER = Pattern(
    name="save_timer",
    kind=None,
    keyword="save-checkpoint",
    regex=re.compile(
        r"^(?:\d+: )?(?:\(min, max\) time across ranks \(ms\):)?\s*"
        r"save-checkpoint(?:-non-persistent)?\s*\.*: "
        r"(?:\((?P<min>[\d.]+), (?P<duration_ms>[\d.]+)\)|(?P<max_ms>[\d.]+))\s*$"
    ),
    sample="    save-checkpoint ................................: (5312.47, 5312.61)",
    source="Megatron-LM megatron/core/timers.py _get_global_min_max_time_string: "
    "'(min, max) time across ranks (ms):' + '\\n    {name:.<48}: ({min:.2f}, {max:.2f})' "
    "(training.py save_checkpoint_and_time: timers.log(['save-checkpoint'])); real pastes "
    "also carry srun --label's '1: ' before it, or the header glued on the same line "
    "(tests/parsers/fixtures/real_pasted/)",
)

ITERATION = Pattern(
    name="iteration",
    kind=EventKind.STEP,
    keyword="elapsed time per iteration (ms): ",
    regex=re.compile(
        r"(?:^(?:\d+: )?|\] ) ?iteration\s+(?P<step>\d+)/\s*\d+ \|.*?"
        r"elapsed time per iteration \(ms\): (?P<duration_ms>[\d.]+)"
    ),
    sample=" [2024-03-09 10:12:01] iteration      100/    1000 | consumed samples:        12800 | "
    "elapsed time per iteration (ms): 1234.5 | learning rate: 1.000000E-04 | global batch size: "
    "  128 | lm loss: 6.412345E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |",
    source="Megatron-LM megatron/training/training.py training_log: ' iteration {:8d}/{:8d} |' "
    "+ ' elapsed time per iteration (ms): {:.1f} |'",
)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        name="saving",
        kind=EventKind.CHECKPOINT_START,
        keyword="saving checkpoint at iteration",
        regex=re.compile(r"saving checkpoint at iteration\s+(?P<step>\d+) to (?P<path>\S+)"),
        sample="saving checkpoint at iteration     100 to /ck in torch_dist format",
        source=f"{_CKPT} save_checkpoint: print_rank_0(f'saving checkpoint at iteration "
        "{iteration:7d} to {save_dir} in {ckpt_format} format')",
    ),
    SAVED,
    TIMER,
    ITERATION,
    Pattern(
        name="loaded",
        kind=EventKind.RESUME,
        keyword="successfully loaded checkpoint from ",
        regex=re.compile(
            r"successfully loaded checkpoint from (?P<path>\S+).*? at iteration (?P<step>\d+)"
        ),
        sample="  successfully loaded checkpoint from /ck [ t 1/1, p 1/1 ] at iteration 100",
        source=f"{_CKPT} load_checkpoint: print_rank_0(f'  successfully loaded checkpoint from "
        "{load_dir} [ t …, p … ] at iteration {iteration}')",
    ),
    Pattern(
        name="loading_at_iteration",
        kind=EventKind.RESUME,
        keyword="checkpoint from ",
        regex=re.compile(
            r"^ loading (?:distributed )?checkpoint from (?P<path>\S+) at iteration (?P<step>\d+)"
        ),
        sample=" loading checkpoint from /nas/megatron_gpt/ at iteration 100",
        source=f'{_CKPT} load_checkpoint: print_rank_0(f\' loading {{"distributed " if …}}'
        "checkpoint from {load_dir} at iteration {iteration}') (public/megatron/dlrover_977_*: "
        "the loader's own words; its 'successfully loaded' line, when printed, is the same "
        "resume)",
    ),
    Pattern(
        name="loading",
        kind=None,
        keyword="checkpoint from ",
        regex=re.compile(r"^ loading (?:distributed |release )?checkpoint from \S+"),
        sample=" loading release checkpoint from "
        "/mnt/nas2/work/Pai-Megatron-Patch/qwen-ckpts/Qwen2-0.5B-hf-to-mcore-te-tp1-pp1-new",
        source=f"{_CKPT} load_checkpoint: print_rank_0(f' loading release checkpoint from "
        "{load_dir}') (a Megatron log quoted in modelscope/ms-swift, 2024-07); the form with an "
        "iteration is ``loading_at_iteration``'s, this entry only identifies the stack",
    ),
    Pattern(
        name="before_training",
        kind=EventKind.RUN_START,
        keyword="[before the start of training step] datetime: ",
        regex=re.compile(rf"\[before the start of training step\] datetime: (?P<time>{_TIME})"),
        sample="[before the start of training step] datetime: 2024-03-09 10:10:00 ",
        source="Megatron-LM megatron/training/training.py pretrain: print_datetime('before the "
        "start of training step') → '[' + string + '] datetime: {%Y-%m-%d %H:%M:%S} '",
    ),
    Pattern(
        name="after_training",
        kind=EventKind.RUN_END,
        keyword="[after training is done] datetime: ",
        regex=re.compile(rf"\[after training is done\] datetime: (?P<time>{_TIME})"),
        sample="[after training is done] datetime: 2024-03-09 12:00:00 ",
        source="Megatron-LM megatron/training/training.py pretrain: print_datetime('after "
        "training is done')",
    ),
)


class Megatron(Stack):
    """Megatron-LM: pairs saves with their timer block (or their "successfully saved" line)."""

    name = "megatron"
    headers = (STAMP,)
    patterns = PATTERNS
    step_in_path = re.compile(r"iter_(\d+)")

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        self._saved: Event | None = None
        """The "successfully saved" end of the open save, waiting for its timer line."""

    def on_record(self, record: Record) -> list[Event]:
        """Hold a save's end until its timer line; other messages go by the table."""
        hit = self.match(record.msg)
        if hit is None:
            return []
        pattern, m = hit
        if pattern is TIMER:
            return self._timed(record, m)
        if pattern is SAVED:
            if self._open_save is None:
                return []  # an async save's finalize, after its timer line closed it
            events = self._flush()
            self._saved = self.event(EventKind.CHECKPOINT_END, record, m)
            return events
        if pattern.kind is None:
            return []
        return self._flush() + self.pair(self.event(pattern.kind, record, m))

    def interrupted(self) -> list[Event]:
        """A failure: the timer line of a save that printed "successfully saved" will not come
        (it gathers every rank); report that end now, before the failure."""
        return self._flush()

    def _timed(self, record: Record, m: re.Match[str]) -> list[Event]:
        start = self._open_save
        if start is None:
            return []
        duration_s = float(m["duration_ms"] or m["max_ms"]) / 1000
        saved, self._saved = self._saved, None
        time, estimated = (saved.time if saved is not None else None), False
        if time is None and start.time is not None:
            time, estimated = start.time + timedelta(seconds=duration_s), True
        end = Event(
            EventKind.CHECKPOINT_END,
            record.line,
            self.name,
            time=time,
            time_estimated=estimated,
            duration_s=duration_s,
            detail=start.detail,
        )
        return self.pair(end)

    def _flush(self) -> list[Event]:
        saved, self._saved = self._saved, None
        return [] if saved is None else self.pair(saved)


PROGRESS_FORMAT = Header(
    keyword="\tJob ID: ",
    regex=re.compile(
        r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\tJob ID: [^\t]*\t# GPUs: \d+\t(?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="2026-03-02 14:05:07\tJob ID: 4242\t# GPUs: 16\tStarting job",
    source="Megatron-LM megatron/training/utils/log_utils.py append_to_progress_log: "
    "f\"{time.strftime('%Y-%m-%d %H:%M:%S')}\\tJob ID: {job_id}\\t# GPUs: {num_gpus}\\t{string}\"",
    identifies_stack=True,
)

_PROGRESS = "Megatron-LM megatron/training/training.py append_to_progress_log"


def _progress(name: str, kind: EventKind, text: str, sample: str) -> Pattern:
    return Pattern(
        name=name,
        kind=kind,
        keyword=text,
        regex=re.compile(rf"^{text}(?:\tIteration: (?P<step>\d+))?"),
        sample=sample,
        source=f"{_PROGRESS}(f'{text}\\tIteration: {{iteration}}…')",
    )


class MegatronProgress(Stack):
    """``megatron_progress``: Megatron's ``--log-progress`` file, a ready-made timing file."""

    name = "megatron_progress"
    headers = (PROGRESS_FORMAT,)
    patterns = (
        _progress(
            "starting",
            EventKind.RUN_START,
            "Starting job",
            "2026-03-02 14:05:07\tJob ID: 4242\t# GPUs: 16\tStarting job",
        ),
        _progress(
            "saving_async",
            EventKind.CHECKPOINT_START,
            "Saving async checkpoint",
            "2026-03-02 15:00:01\tJob ID: 4242\t# GPUs: 16\tSaving async checkpoint\t"
            "Iteration: 500",
        ),
        _progress(
            "saved_async",
            EventKind.CHECKPOINT_END,
            "Saved async checkpoint",
            "2026-03-02 15:00:09\tJob ID: 4242\t# GPUs: 16\tSaved async checkpoint\tIteration: 500",
        ),
        _progress(
            "saved",
            EventKind.CHECKPOINT_END,
            "Saved checkpoint",
            "2026-03-02 14:30:12\tJob ID: 4242\t# GPUs: 16\tSaved checkpoint\tIteration: 250\t"
            "Job throughput: 401.2 TFLOP/s/GPU\tCumulative throughput: 398.7 TFLOP/s/GPU\t"
            "Floating-point operations: 1.23e+20\tTokens (in billions): 2.05",
        ),
    )
