"""HuggingFace Transformers ``Trainer`` logs (docs/FORMATS.md §1).

Read from transformers 4.46.3 and 5.24.0 (``trainer.py``, ``utils/logging.py``) and the real
logs in ``agent/fixtures/real/hf_trainer_*.log`` (5.24.0, explicit format).

What is recognised:

* ``Saving model checkpoint to …/checkpoint-<step>`` → ``checkpoint_start`` (step from the
  directory name; from the training bar when the directory is a ``tmp-checkpoint-…``).
* The save's sub-step lines ``<Thing> saved in <that directory>/…`` (``Configuration saved in``,
  ``Model weights saved in``): the LAST one before any other timestamped record (the next save,
  a resume), or before the training bar moves past the saved step, or before a failure, ends
  the save → ``checkpoint_end`` at that line with ``duration_s = end − start``. A quiet file
  (``finish()``) does not end it: HF writes the ``Configuration saved in`` lines at once, then
  the weights for seconds to minutes, so a save is open until a line shows it ended, and a
  file that ends inside one leaves it open (no end line, so no number). HF prints no line when the
  optimizer state is written (docs/FORMATS.md §0.2), so this under-counts the save by that part. A
  save whose start or sub-steps carry no time gets no ``checkpoint_end``.
* ``***** Running training *****`` → ``run_start``; ``Training completed.`` → ``run_end``.
* ``Resuming training from checkpoint with epoch E and global step S`` (5.x) and
  ``Continuing training from global step S`` (4.x) → ``resume`` at step S. ``Loading model
  from …/checkpoint-50.`` comes before it in the same resume and gives nothing;
  ``Loading best model from …`` (end of training) gives nothing either.
* transformers' default logging (WARNING: no prefix, no stamps, none of the lines above; the
  real capture ``tests/parsers/fixtures/hf_default/``): the file is the Trainer's from its first
  metrics dict (:data:`METRICS`), its clean end is the summary dict (:data:`TRAIN_METRICS`),
  and a run starts where the training bar starts again (:meth:`HfTrainer._bar_start`), its
  pace read from the bar's elapsed time (:meth:`HfTrainer._bar_pace`).
* Under DeepSpeed (``TrainingArguments(deepspeed=…)``), the engine writes the model and
  optimizer states after HF's own lines, inside the same save, and prints its own stamped lines
  (``parsers/deepspeed.py``: ``[Torch] Checkpoint <tag> is about to be saved!``, ``Saving model
  checkpoint: <dir>/global_step<N>/…``, ``[Torch] Saving <file>...``, and in 0.16 ``[Torch]
  Checkpoint <tag> is ready now!``): each such line of the open save is one of its sub-steps,
  as a "saved in" line, and gives its time (a save whose HF lines print no time, transformers'
  default format, starts at the first of them: what HF wrote before is not seen). DeepSpeed's
  lines before HF's first (its engine starts before ``***** Running training *****``) made the
  file DeepSpeed's: HF takes it over at its first line of its own (:attr:`Stack.absorbs`).
  Real captures: ``tests/parsers/fixtures/hf_deepspeed/`` (deepspeed 0.16.9 with transformers
  4.46.3, 0.19.8 with 5.24.0).
* The training tqdm bar (no description, total = ``Total optimization steps``) counts global
  steps: a line whose last bar state shows a new step gives one ``step`` event with
  ``duration_s`` = tqdm's smoothed seconds per step, and ``time`` = the time of a record glued
  after the bar on that line, if any (else ``None``). Other bars (``Writing model shards``,
  evaluation) are ignored. After a resume the bar's steps carry no ``duration_s``: the Trainer
  moves its bar from 0 to the resumed step in one update (transformers 4.46.3/5.24.0
  ``ProgressCallback.on_step_end``: ``update(global_step - current_step)``), and tqdm's smoothed
  rate and its ``miniters`` take that jump in for tens of steps, more the longer the jump (the
  capture ``agent/fixtures/real/hf_trainer_resume.log`` shows ``51/120 [00:01<00:02,
  32.81it/s]``, 0.03 s a step in a run of ~0.15 s steps; a run resumed at step 240 of 300 drew
  0.0019 s a step to its end). The rules then take the step time from the job's other runs, or
  from its saves and step times with C left out (``rules/progress.py`` ``step_time_s``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from ckpt_advisor.parsers import deepspeed
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.stack import Header, ParseContext, Pattern, Record, Stack, parse_step
from ckpt_advisor.parsers.text import Bar
from ckpt_advisor.parsers.timestamps import parse_mdy_hms, parse_ymd_hms

EXPLICIT_FORMAT = Header(
    keyword=" >> ",
    regex=re.compile(
        r"\[(?P<level>[A-Z]+)\|(?P<file>[^\]|\r\n]+):(?P<lineno>\d+)\] "
        r"(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) >> (?P<msg>.*)"
    ),
    parse_time=parse_ymd_hms,
    sample="[INFO|trainer.py:4149] 2026-11-29 22:11:38,483 >> Saving model checkpoint to "
    "/data/hf/run/checkpoint-25",
    source="transformers 4.46.3/5.24.0 utils/logging.py enable_explicit_format(): "
    '"[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s" '
    "(also TRANSFORMERS_VERBOSITY=detail in 4.46.3, with %(pathname)s)",
    identifies_stack=True,
)

EXAMPLES_FORMAT = Header(
    keyword=" - ",
    regex=re.compile(
        r"(?P<time>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d) - (?P<level>[A-Z]+) - "
        r"(?P<logger>[\w.]+) - (?P<msg>.*)"
    ),
    parse_time=parse_mdy_hms,
    sample="10/20/2023 15:41:03 - INFO - transformers.trainer - Saving model checkpoint to "
    "out/checkpoint-500",
    source='transformers examples/pytorch/*/run_*.py logging.basicConfig(format="%(asctime)s - '
    '%(levelname)s - %(name)s - %(message)s", datefmt="%m/%d/%Y %H:%M:%S")',
    identifies_stack=False,
)

_SOURCE_SAVE = "transformers 4.46.3 trainer.py:3812 _save / 5.24.0 trainer.py:4149"

SAVE_START = Pattern(
    name="checkpoint_start",
    kind=EventKind.CHECKPOINT_START,
    keyword="Saving model checkpoint to ",
    regex=re.compile(r"Saving model checkpoint to (?P<path>\S(?:.*\S)?)"),
    sample="[INFO|trainer.py:4149] 2026-11-29 22:11:38,483 >> Saving model checkpoint to "
    "/data/hf/run/checkpoint-25",
    source=f'{_SOURCE_SAVE}: logger.info(f"Saving model checkpoint to {{output_dir}}")',
)

SAVED_IN = Pattern(
    name="saved_in",
    kind=None,
    keyword=" saved in ",
    regex=re.compile(r" saved in (?P<path>\S(?:.*\S)?)"),
    sample="[INFO|modeling_utils.py:3639] 2026-11-29 22:11:38,555 >> Model weights saved in "
    "/data/hf/run/checkpoint-25/model.safetensors",
    source="transformers 5.24.0 modeling_utils.py:3639, configuration_utils.py:786/941; "
    "accelerate checkpointing.py (… saved in {file})",
    identifies_stack=False,
)

TOTAL_STEPS = Pattern(
    name="total_steps",
    kind=None,
    keyword="Total optimization steps = ",
    regex=re.compile(r"Total optimization steps = (?P<steps>[\d,]{1,20})"),
    sample="[INFO|trainer.py:1627] 2026-11-29 22:11:34,899 >>   Total optimization steps = 120",
    source='transformers 4.46.3/5.24.0 trainer.py: f"  Total optimization steps = {max_steps:,}"',
)

PATTERNS: tuple[Pattern, ...] = (
    SAVE_START,
    SAVED_IN,
    TOTAL_STEPS,
    Pattern(
        name="run_start",
        kind=EventKind.RUN_START,
        keyword="***** Running training *****",
        regex=re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*"),
        sample="[INFO|trainer.py:1618] 2026-11-29 22:11:34,899 >> ***** Running training *****",
        source="transformers 4.46.3/5.24.0 trainer.py _inner_training_loop",
    ),
    Pattern(
        name="resume_5x",
        kind=EventKind.RESUME,
        keyword="Resuming training from checkpoint with epoch ",
        regex=re.compile(
            r"Resuming training from checkpoint with epoch (?P<epoch>\d+) "
            r"and global step (?P<step>\d+)"
        ),
        sample="[INFO|trainer.py:1631] 2026-11-29 22:11:48,386 >>   Resuming training from "
        "checkpoint with epoch 0 and global step 50",
        source='transformers 5.24.0 trainer.py:1631: f"  Resuming training from checkpoint with '
        'epoch {e} and global step {s}"',
    ),
    Pattern(
        name="resume_4x",
        kind=EventKind.RESUME,
        keyword="Continuing training from global step ",
        regex=re.compile(r"Continuing training from global step (?P<step>\d+)"),
        sample="[INFO|trainer.py:2245] 2024-11-02 10:12:40,117 >>   Continuing training from "
        "global step 500",
        source='transformers 4.46.3 trainer.py: f"  Continuing training from global step '
        '{self.state.global_step}"',
    ),
    Pattern(
        name="run_end",
        kind=EventKind.RUN_END,
        keyword="Training completed.",
        regex=re.compile(r"^Training completed\."),
        sample="Training completed. Do not forget to share your model on huggingface.co/models =)",
        source='transformers 4.46.3/5.24.0 trainer.py: logger.info("\\n\\nTraining completed. '
        'Do not forget …") (the message starts with two newlines: a continuation line)',
    ),
)

_SOURCE_ON_LOG = (
    "transformers 5.24.0 trainer_callback.py ProgressCallback.on_log: "
    'self.training_bar.write(str(shallow_logs)), floats as f"{v:.4g}" strings (4.46.3: the '
    "floats as they are); trainer.py Trainer.log adds 'epoch'"
)

METRICS = Pattern(
    name="metrics",
    kind=None,
    keyword="{'loss': ",
    regex=re.compile(r"\{'loss': [^{}]*'learning_rate': [^{}]*'epoch': "),
    sample="{'loss': '3.9', 'grad_norm': '1.382', 'learning_rate': '4.525e-05', "
    "'epoch': '0.01953'}",
    source=_SOURCE_ON_LOG,
)
"""The training metrics the Trainer prints every ``logging_steps``: with transformers' default
logging (WARNING, no ``Saving model checkpoint`` line, no stamps) the first line only the
Trainer writes (tests/parsers/fixtures/hf_default/)."""

TRAIN_METRICS = Pattern(
    name="train_metrics",
    kind=EventKind.RUN_END,
    keyword="{'train_runtime': ",
    regex=re.compile(r"\{'train_runtime': [^{}]*'train_samples_per_second': "),
    sample="{'train_runtime': '48.62', 'train_samples_per_second': '9.873', "
    "'train_steps_per_second': '2.468', 'train_loss': '3.905', 'epoch': '0.1953'}",
    source=f"transformers 5.24.0 trainer.py _finalize_training: self.log(speed_metrics(…)); "
    f"{_SOURCE_ON_LOG}",
)
"""The run's summary, printed when training ends: its clean end where ``Training completed.``
(INFO) is not printed; after that line it gives nothing more."""

ENGINE_HEADERS = tuple(replace(h, identifies_stack=False) for h in deepspeed.DeepSpeed.headers)
"""DeepSpeed's record prefixes, for their time: the engine's lines in a Trainer's log."""

ENGINE_SAVE_LINES = tuple(
    replace(p, name=f"deepspeed_{p.name}", kind=None, identifies_stack=False)
    for p in deepspeed.PATTERNS
    if p.name in ("about_to_be_saved", "saving_model_checkpoint", "torch_saving", "ready_now")
)
"""DeepSpeed's save lines (``parsers/deepspeed.py``), as sub-steps of the Trainer's save."""
_ENGINE_TAG_LINES = frozenset(
    p for p in ENGINE_SAVE_LINES if p.name in ("deepspeed_about_to_be_saved", "deepspeed_ready_now")
)
"""Those that name the save by its tag (``global_step10``), not by a path in its directory."""

_EXPLICIT_HEAD = re.compile(EXPLICIT_FORMAT.regex.pattern.removesuffix("(?P<msg>.*)"))
""":data:`EXPLICIT_FORMAT` up to its message, matched at a line's start (there the header can
be read one way only: its file name ends at the first ``]``): the message is the rest."""

PACE_SPAN_S = 10.0
"""Bar time a bar-started run's pace is read over: tqdm prints whole seconds, so within 10%."""

_CHECKPOINT_STEP = re.compile(r"(?<![\w-])checkpoint-(\d+)/*$")
_TMP_CHECKPOINT = re.compile(r"tmp-checkpoint-[^/]*/*$")


@dataclass(slots=True)
class _Save:
    path: str
    step: int | None
    start_time: datetime | None
    end: tuple[int, datetime] | None = None
    """(line, time) of the last timed "saved in" line of this save so far."""

    def contains(self, path: str) -> bool:
        return path == self.path or path.startswith(self.path + "/")


class HfTrainer(Stack):
    """HF Trainer stack: the pattern table plus save start/end pairing and the training bar."""

    name = "hf_trainer"
    headers = (EXPLICIT_FORMAT, EXAMPLES_FORMAT, *ENGINE_HEADERS)
    patterns = (*PATTERNS, METRICS, TRAIN_METRICS, *ENGINE_SAVE_LINES)
    absorbs = ("deepspeed",)
    step_in_path = _CHECKPOINT_STEP
    reads_bars = True

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        self._save: _Save | None = None
        self._max_steps: int | None = None
        self._bar_step: int | None = None
        self._step_event: int | None = None
        """Step of the last ``step`` event of this run (one event per step)."""
        self._resumed_run = False
        """This run resumed from a checkpoint: its bar's rate is no measure (module docstring)."""
        self._bar_elapsed_s: float | None = None
        """Elapsed seconds of the training bar's last state."""
        self._start_pending = False
        """A start was read and its run has shown no step yet."""
        self._run_ended = False
        """This run printed its clean end."""
        self._bar_run = False
        """This run's start was read from its bar (no start line): :meth:`_bar_pace`."""
        self._pace_from: tuple[int, float] | None = None
        """(step, elapsed seconds) of a bar-started run's first state past 0."""
        self._unprefixed = False
        """Detected by its metrics (:meth:`detected_by`): transformers' default logging."""

    @property
    def provisional(self) -> bool:
        """Detected by a metrics dict: a record with a prefix may follow (a file cut after
        one, as a range of a big log read by a worker), and then the log is no default
        logging's (:meth:`detected_by`)."""
        return self._unprefixed

    def detected_by(self, text: str) -> tuple[str, ...]:
        """All of :attr:`keywords` in a log detected by its metrics (:data:`METRICS`: no
        logging prefix, the metrics lines end the bar's redraws, so they show its restarts);
        else all but the metrics' (a line a few steps apart, for no event)."""
        hit = None if self.detects_by_header(text) else self.match(text)
        self._unprefixed = hit is not None and hit[0] is METRICS
        if self._unprefixed:
            return self.keywords
        return tuple(k for k in self.keywords if k != METRICS.keyword)

    def took_record(self, line: str, lineno: int) -> bool:
        """Take a "saved in" line of the open save (three of an HF save's four lines), as
        :meth:`on_record` would: its time ends the save so far. The line must start with the
        explicit header (where :meth:`~parsers.stack.Stack.feed` finds it) and its message be
        one :data:`SAVED_IN` reads first (no ``Saving model checkpoint to``, the one pattern
        before it)."""
        save = self._save
        if save is None:
            return False
        head = _EXPLICIT_HEAD.match(line)
        if head is None:
            return False
        msg = line[head.end() :]
        m = SAVED_IN.regex.search(msg)
        if m is None or not save.contains(m["path"]) or SAVE_START.keyword in msg:
            return False
        end_time = self.stamp_time(EXPLICIT_FORMAT, head["time"], lineno)
        if end_time is not None:
            save.end = (lineno, end_time)
        return True

    def on_record(self, record: Record) -> list[Event]:
        """Pair saves with their last "saved in" line; other messages go by the table."""
        hit = self.match(record.msg)
        events: list[Event] = []
        save = self._save
        if save is not None and record.header is not None and not record.continued:
            if hit is not None and self._sub_step(save, *hit):
                end_time = self.time_of(record)
                if end_time is not None:
                    if save.start_time is None and hit[0] in ENGINE_SAVE_LINES:
                        save.start_time = end_time  # HF's own lines print no time
                    save.end = (record.line, end_time)
                return events
            events.extend(self._close_save())
        if hit is None:
            return events
        pattern, m = hit
        if pattern is TOTAL_STEPS:
            self._max_steps = parse_step(m["steps"].replace(",", ""))
        elif pattern is SAVE_START:
            step = self._bar_step if _TMP_CHECKPOINT.search(m["path"]) else None
            start = self.event(EventKind.CHECKPOINT_START, record, m, step)
            self._save = _Save(m["path"].rstrip("/"), start.step, start.time)
            events.append(start)
        elif pattern.kind is EventKind.RUN_END:
            if not self._run_ended:  # the summary follows ``Training completed.`` when INFO
                events.append(self.event(pattern.kind, record, m))
            self._run_ended = True
        elif pattern.kind is not None:
            events.append(self.event(pattern.kind, record, m))
            if pattern.kind in (EventKind.RUN_START, EventKind.RESUME):
                self._new_run(resumed=pattern.kind is EventKind.RESUME, from_bar=False)
        return events

    def _new_run(self, *, resumed: bool, from_bar: bool) -> None:
        self._step_event = None  # a new run may show a step the last one showed
        self._resumed_run, self._bar_run = resumed, from_bar
        self._start_pending, self._run_ended, self._pace_from = True, False, None

    @staticmethod
    def _sub_step(save: _Save, pattern: Pattern, m: re.Match[str]) -> bool:
        """Whether a record matching ``pattern`` is a part of the open ``save``: a "saved in"
        line or a DeepSpeed save line with a path in its directory, or a DeepSpeed line that
        names the save by its tag (``global_step<N>`` of the save's step, when known)."""
        if pattern in _ENGINE_TAG_LINES:
            return save.step is None or m["path"] == f"global_step{save.step}"
        return (pattern is SAVED_IN or pattern in ENGINE_SAVE_LINES) and save.contains(m["path"])

    def is_training_bar(self, bar: Bar) -> bool:
        """The bar without a description whose total is ``Total optimization steps`` (the
        evaluation bar has none either, but counts batches), or where no line printed it
        (default logging), the first such bar's (``on_train_begin`` makes it before any
        evaluation's; a relaunch with another ``max_steps`` is then not read)."""
        return bar.desc is None and (self._max_steps is None or bar.total == self._max_steps)

    def inert_bar(self, bar: Bar) -> bool:
        """A bar with a description (``Writing model shards``, evaluation's): never the
        training bar, so nothing reads it."""
        return bar.desc is not None

    def on_bar(self, bar: Bar, lineno: int, time: datetime | None) -> list[Event]:
        """Turn the training bar's last state on a line into at most one ``step`` event, and
        none for a step already given: tqdm redraws the same state after every record printed
        above the bar (``tqdm.write``), so two adjacent lines often show one step; the record
        glued to the second (a save's start) carries its time itself."""
        if not self.is_training_bar(bar):
            return []
        if self._max_steps is None:  # the first bar without a description: on_train_begin's
            self._max_steps = bar.total
        events = self._bar_start(bar, lineno)
        if bar.n == 0:
            return events
        self._start_pending = False
        self._bar_step = bar.n
        if self._save is not None and (self._save.step is None or bar.n > self._save.step):
            events.extend(self._close_save())
        if self._step_event != bar.n:
            self._step_event = bar.n
            # a resumed run's bar jumped to the resumed step: its rate counts the steps skipped
            seconds_per_step = (
                self._bar_pace(bar)
                if self._bar_run
                else None
                if self._resumed_run
                else bar.seconds_per_it
            )
            events.append(
                Event(
                    EventKind.STEP,
                    lineno,
                    self.name,
                    time=time,
                    step=bar.n,
                    duration_s=seconds_per_step,
                )
            )
        return events

    def _bar_start(self, bar: Bar, lineno: int) -> list[Event]:
        """A ``run_start`` where the training bar starts again with no start line before it
        (transformers' default logging prints none): its step or its elapsed time went back, or
        it is the file's first state and a new bar's (step 0) or one of a log detected by its
        metrics (:data:`METRICS`, no logging prefix): there the stack is detected after the
        bar started, and the file's first run must start to be judged (a run that died
        silently counts only between two starts, ``rules/timeline.py``). Caveat: a rotated
        default-logging log's continuation starts a run that did not die."""
        last_elapsed_s, self._bar_elapsed_s = self._bar_elapsed_s, bar.elapsed_s
        if self._start_pending:
            return []
        if last_elapsed_s is None:
            restarted = bar.n == 0 or self._unprefixed
        else:
            restarted = bar.n < (self._bar_step or 0) or bar.elapsed_s < last_elapsed_s
        if not restarted:
            return []
        self._new_run(resumed=False, from_bar=True)
        return [Event(EventKind.RUN_START, lineno, self.name, detail="training bar restarted")]

    def _bar_pace(self, bar: Bar) -> float | None:
        """Seconds per step of a run started from its bar: the bar's elapsed time since the
        run's first state past 0 over the steps since, once that spans :data:`PACE_SPAN_S`.
        Whether the run resumed is not printed, and a resumed bar's smoothed rate counts the
        steps it jumped (module docstring); the steps after its first state are trained."""
        if self._pace_from is None:
            self._pace_from = (bar.n, bar.elapsed_s)
            return None
        first_step, first_elapsed_s = self._pace_from
        span_s = bar.elapsed_s - first_elapsed_s
        if bar.n <= first_step or span_s < PACE_SPAN_S:
            return None
        return span_s / (bar.n - first_step)

    def interrupted(self) -> list[Event]:
        """A failure ends the save in progress: its last "saved in" line so far is its end."""
        return self._close_save()

    def _close_save(self) -> list[Event]:
        save, self._save = self._save, None
        if save is None or save.start_time is None or save.end is None:
            return []
        end_line, end_time = save.end
        duration_s = (end_time - save.start_time).total_seconds()
        if duration_s < 0:
            self.context.report(end_line, f"save of {save.path} ends before it starts")
            return []
        return [
            Event(
                EventKind.CHECKPOINT_END,
                end_line,
                self.name,
                time=end_time,
                step=save.step,
                duration_s=duration_s,
                detail=save.path,
            )
        ]
