"""NVIDIA NeMo logs (docs/FORMATS.md §6).

Read from NVIDIA/NeMo 8cfedd7203 (v2.5.0rc0+113): ``nemo/utils/formatters/base.py`` (prefix),
``utils/callbacks/nemo_model_checkpoint.py`` (1.x-style saves),
``lightning/pytorch/callbacks/model_checkpoint.py`` (NeMo 2), ``utils/callbacks/dist_ckpt_io.py``
and ``lightning/io/pl.py`` (``Global Checkpoint Save``), ``utils/exp_manager.py`` (resume).
Prefix ``[NeMo I 2025-09-20 12:00:00 nemo_logging:393] `` (colour codes only with
``NEMO_ENABLE_COLORING``; stripped before matching).

What is recognised:

* ``Checkpoint save for step N started at <epoch s>.`` → ``checkpoint_start`` at N, dated by
  the printed epoch seconds, on the clock of the file's stamps: a stamp read in the wrong zone
  lies a whole zone offset from the Unix time on its line, and the Unix times are moved by it
  (reported once, ``stamp_zone_offset``; :meth:`parsers.stack.Stack.epoch_time`), so a save
  whose start is a Unix time and whose end a stamp measures its cost, not the offset.
* ``Global Checkpoint Save : Rank: r : Iteration: N : Start time: t s : Save duration: d s``
  → the save's blocking cost d (one per save; other ranks' copies are ignored). A start line is
  implied when none was printed (``time`` = t).
* ``Scheduled async checkpoint save for <path>`` marks the save asynchronous (its blocking
  part ends here if no ``Save duration`` was printed), and ``Async checkpoint save for step N
  (<path>) finalized successfully[ at <epoch s>].`` ends it → ``checkpoint_end`` at the
  finalize line with ``duration_s`` = the blocking part and ``persist_s`` = start → finalize;
  its step is the start's (the finalize message prints the global step after it, one more;
  without a start: ``step=N`` in the path, else the printed step − 1). Scheduled saves queue
  until finalized and are matched by path: NeMo 2 saves a top-k and a ``-last`` checkpoint at
  one step and may finalize both at the end of training (real paste, BioNeMo Evo2 2025-06).
  Other ranks' ``Global Checkpoint Save`` copies are told apart by their ``Rank``.
* A synchronous save ends at its ``Global Checkpoint Save`` line (reported once the next
  ``[NeMo …]`` record, or a failure, shows no async scheduling followed) → ``checkpoint_end``,
  ``time`` = t + d. A quiet file (``finish()``) reports nothing: the scheduling line may still
  come, so a file whose last line is a ``Global Checkpoint Save`` leaves that save open.
* ``Resuming training from checkpoint: <path>`` → ``resume`` (step from ``step=N`` in the
  path). NeMo 2's ``There were no checkpoints found … Training from scratch.`` is no resume.
* NeMo 2 progress lines ``… | global_step: N | … | train_step_timing in s: X | …`` → ``step``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.lightning import MIDEPOCH_RESUME
from ckpt_advisor.parsers.stack import Header, ParseContext, Pattern, Record, Stack, parse_step
from ckpt_advisor.parsers.timestamps import parse_ymd_hms

NEMO_FORMAT = Header(
    keyword="[NeMo ",
    regex=re.compile(
        r"\[NeMo (?P<level>[DIWEC]) (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) "
        r"(?P<module>[\w.]+):(?P<lineno>\d+)\] ?(?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="[NeMo I 2025-04-24 16:35:05 nemo_logging:393] Async checkpoint save for step 10 "
    "(/res/checkpoints/model--step=9-consumed_samples=1280.0.ckpt) finalized successfully.",
    source='NeMo v2.5 nemo/utils/formatters/base.py: "%(color)s[NeMo %(levelname)1.1s '
    '%(asctime)s %(module)s:%(lineno)d]%(end_color)s %(message)s", datefmt "%Y-%m-%d %H:%M:%S"',
    identifies_stack=True,
)

_CKPT_1X = "NeMo v2.5 nemo/utils/callbacks/nemo_model_checkpoint.py"
_CKPT_2 = "NeMo v2.5 nemo/lightning/pytorch/callbacks/model_checkpoint.py"

STARTED = Pattern(
    name="save_started",
    kind=EventKind.CHECKPOINT_START,
    keyword="Checkpoint save for step ",
    regex=re.compile(
        r"Checkpoint save for step (?P<step>\d+) started at (?P<epoch_s>\d+(?:\.\d+)?)"
    ),
    sample="[NeMo I 2024-05-02 10:00:00 nemo_model_checkpoint:461] Checkpoint save for step 500 "
    "started at 1714644000.123456.",
    source=f'{_CKPT_1X} _save_checkpoint: logging.info(f"Checkpoint save for step '
    '{trainer.global_step} started at {start_time}.") (start_time = time.time())',
)

GLOBAL_SAVE = Pattern(
    name="global_save",
    kind=None,
    keyword="Global Checkpoint Save : ",
    regex=re.compile(
        r"Global Checkpoint Save : Rank ?: ?(?P<rank>\d+) : Iteration ?: ?(?P<step>\d+) : "
        r"Start time ?: ?(?P<epoch_s>\d+(?:\.\d+)?) ?s : "
        r"Save duration ?: ?(?P<duration_s>\d+(?:\.\d+)?) ?s"
    ),
    sample="[NeMo I 2025-04-24 16:35:04 nemo_logging:393] Global Checkpoint Save : Rank: 0 : "
    "Iteration: 9 : Start time: 1745512504.058s : Save duration: 0.153s",
    source="NeMo v2.5 nemo/utils/callbacks/dist_ckpt_io.py save_checkpoint: logging.info(f'Global "
    "Checkpoint Save : Rank: {rank} : Iteration: {it} : Start time: {start:.3f}s : Save "
    "duration: {d:.3f}s')",
)

SCHEDULED = Pattern(
    name="scheduled",
    kind=None,
    keyword="Scheduled async checkpoint save for ",
    regex=re.compile(r"Scheduled async checkpoint save for (?P<path>\S.*)"),
    sample="[NeMo I 2025-04-24 16:35:04 nemo_logging:393] Scheduled async checkpoint save for "
    "/res/checkpoints/model--step=9-consumed_samples=1280.0.ckpt",
    source=f'{_CKPT_2} _save_checkpoint: logging.info(f"Scheduled async checkpoint save for '
    '{filepath}")',
)

FINALIZED = Pattern(
    name="finalized",
    kind=None,
    keyword=") finalized successfully",
    regex=re.compile(
        r"Async checkpoint save for step (?P<step>\d+) \((?P<path>.*)\) finalized successfully"
        r"(?: at (?P<epoch_s>\d+(?:\.\d+)?))?"
    ),
    sample="[NeMo I 2025-04-24 16:35:05 nemo_logging:393] Async checkpoint save for step 10 "
    "(/res/checkpoints/model--step=9-consumed_samples=1280.0.ckpt) finalized successfully.",
    source=f'{_CKPT_2} / {_CKPT_1X}: logging.info(f"Async checkpoint save for step '
    '{global_step} ({filepath}) finalized successfully[ at {time.time()}].")',
)

PATTERNS: tuple[Pattern, ...] = (
    MIDEPOCH_RESUME,
    STARTED,
    GLOBAL_SAVE,
    SCHEDULED,
    FINALIZED,
    Pattern(
        name="resume",
        kind=EventKind.RESUME,
        keyword="Resuming training from checkpoint: ",
        regex=re.compile(r"Resuming training from checkpoint: (?P<path>\S.*)"),
        sample="[NeMo I 2024-05-02 11:00:00 nemo_logging:381] Resuming training from checkpoint: "
        "/res/checkpoints/megatron_gpt--val_loss=2.10-step=500-consumed_samples=64000.0.ckpt",
        source='NeMo v2.5 nemo/utils/exp_manager.py: logging.info(f"Resuming training from '
        'checkpoint: {trainer.ckpt_path}")',
    ),
    Pattern(
        name="progress",
        kind=EventKind.STEP,
        keyword="global_step: ",
        regex=re.compile(
            r"\| global_step: (?P<step>\d+) \|(?:.*?\| train_step_timing in s: "
            r"(?P<duration_s>\d+(?:\.\d+)?))?"
        ),
        sample="Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | "
        "global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | "
        "train_step_timing in s: 0.03146 | val_loss: 4.106",
        source="NeMo 2 nemo/lightning/pytorch/callbacks/progress_printer.py (bionemo-recipes#740)",
    ),
)


@dataclass(slots=True)
class _Save:
    start: Event
    blocking_s: float | None = None
    blocking_line: int = 0
    is_async: bool = False
    path: str | None = None


class NeMo(Stack):
    """NeMo: sync saves end at ``Global Checkpoint Save``; async ones at their finalize line."""

    name = "nemo"
    headers = (NEMO_FORMAT,)
    patterns = PATTERNS
    step_in_path = re.compile(r"(?<!\w)step=(\d+)")

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        self._save: _Save | None = None
        self._pending: list[_Save] = []
        """Scheduled async saves awaiting their finalize line, oldest first."""
        self._rank: str | None = None
        """Rank of the first ``Global Checkpoint Save`` line; other ranks' copies are ignored."""

    def on_record(self, record: Record) -> list[Event]:
        """Track the save in progress; other messages go by the table."""
        hit = self.match(record.msg)
        events: list[Event] = []
        if hit is None:
            if record.header is not None and not record.continued:
                events.extend(self._ended_sync())  # any other NeMo record: no scheduling came
            return events
        pattern, m = hit
        save = self._save
        if pattern is SCHEDULED and save is None:
            return self._scheduled_alone(record, m)
        if pattern is SCHEDULED and save is not None:
            save.is_async = True
            save.path = m["path"]
            end = self.time_of(record)
            if save.blocking_s is None and end is not None and save.start.time is not None:
                save.blocking_s = (end - save.start.time).total_seconds()
            self._pending.append(save)
            self._save = None
            return events
        if pattern is FINALIZED:
            return self._finalized(record, m)
        events.extend(self._ended_sync())
        if pattern is STARTED:
            self._save = _Save(self.event(EventKind.CHECKPOINT_START, record, m))
            events.append(self._save.start)
        elif pattern is GLOBAL_SAVE:
            events.extend(self._global(record, m))
        elif pattern.kind is not None:
            events.extend(self.pair(self.event(pattern.kind, record, m)))
        return events

    def interrupted(self) -> list[Event]:
        """A failure: the save in progress, if it printed its ``Global Checkpoint Save``, was
        synchronous; report its end now, before the failure."""
        return self._ended_sync()

    def _ended_sync(self) -> list[Event]:
        """End the save in progress if its ``Global Checkpoint Save`` came: a record other
        than its scheduling line follows, so it was synchronous."""
        save = self._save
        if save is not None and not save.is_async and save.blocking_s is not None:
            return self._close_sync()
        return []

    def _scheduled_alone(self, record: Record, m: re.Match[str]) -> list[Event]:
        """``Scheduled async checkpoint save for <path>`` with no start line before it (NeMo 2
        without the CheckpointIO timing lines): the save starts here, its finalize ends it."""
        start = self.event(EventKind.CHECKPOINT_START, record, m)
        save = _Save(start)
        save.is_async = True
        save.path = m["path"]
        self._pending.append(save)
        return [start]

    def _global(self, record: Record, m: re.Match[str]) -> list[Event]:
        step = parse_step(m["step"])
        if self._rank is None:
            self._rank = m["rank"]
        save = self._save
        if (
            m["rank"] != self._rank
            or (save is not None and save.blocking_s is not None)
            or (save is None and step is not None and step == self._closed_step)
        ):
            return []  # another rank's copy
        duration_s = float(m["duration_s"])
        if save is None or (save.start.step is not None and save.start.step != step):
            start = Event(
                EventKind.CHECKPOINT_START,
                record.line,
                self.name,
                time=self.epoch_time(record, m["epoch_s"], after_s=duration_s),
                step=step,
            )
            self._save = save = _Save(start)
            events = [start]
        else:
            events = []
        save.blocking_s = duration_s
        save.blocking_line = record.line
        return events

    def _close_sync(self) -> list[Event]:
        save, self._save = self._save, None
        if save is None or save.blocking_s is None:
            return []
        start = save.start
        self._closed_step = start.step
        time = None if start.time is None else start.time + timedelta(seconds=save.blocking_s)
        return [
            Event(
                EventKind.CHECKPOINT_END,
                save.blocking_line,
                self.name,
                time=time,
                step=start.step,
                duration_s=save.blocking_s,
                detail=start.detail,
            )
        ]

    def _finalized(self, record: Record, m: re.Match[str]) -> list[Event]:
        save = self._take_pending(m["path"])
        end = self.epoch_time(record, m["epoch_s"]) if m["epoch_s"] else self.time_of(record)
        start_time = save.start.time if save is not None else None
        persist_s = None
        if end is not None and start_time is not None:
            persist_s = max(0.0, (end - start_time).total_seconds())
        return [
            Event(
                EventKind.CHECKPOINT_END,
                record.line,
                self.name,
                time=end,
                step=self._finalized_step(m)
                if save is None or save.start.step is None
                else save.start.step,
                duration_s=save.blocking_s if save is not None else None,
                persist_s=persist_s,
                detail=m["path"][:200],
            )
        ]

    def _take_pending(self, path: str) -> _Save | None:
        """The scheduled save ``path`` finalizes (else the oldest), removed from the queue.

        NeMo 2 saves a top-k and a ``-last`` checkpoint at the same step and may finalize
        both at the end of training ("Pending async checkpoint saves. Finalizing them
        synchronously now"), so finalizes are matched to schedules by path.
        """
        for i, save in enumerate(self._pending):
            if save.path == path:
                return self._pending.pop(i)
        if self._pending:
            return self._pending.pop(0)
        current, self._save = self._save, None
        return current

    def _finalized_step(self, m: re.Match[str]) -> int | None:
        """Step of a finalize with no known start: ``step=N`` in its path, else N − 1."""
        found = self.step_in_path.search(m["path"])
        if found is not None:
            return parse_step(found.group(1))
        step = parse_step(m["step"])
        return None if step is None else max(0, step - 1)
