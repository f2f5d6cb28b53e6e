"""PyTorch Lightning logs (docs/FORMATS.md §3).

Read from Lightning-AI/pytorch-lightning 7f0c3436cd (2.6.0+169, ``src/lightning/pytorch/…``) and
the real logs ``agent/fixtures/real/lightning_*.log`` (lightning 2.6.6). Lightning gives its
logger a bare ``StreamHandler`` (no formatter), so records carry no time: every event has
``time=None``.

What is recognised:

* ``Epoch E, global step S: 'm' reached … saving model to '…' as top k`` (``ModelCheckpoint``
  with ``verbose=True``), printed just before the save → ``checkpoint_start`` at step S. Nothing
  marks the end of the save, so there is no ``checkpoint_end``. ``… was not in top k`` saves
  nothing and gives nothing.
* ``Restored all states from the checkpoint at <path>`` → ``resume`` (step from ``step=N`` in
  the path, if any). The ``Restoring states from the checkpoint path at …`` line before it is
  the same resume, and is also printed by ``validate``/``test``, which resume no training: it
  gives nothing.
* ``` `Trainer.fit` stopped: `max_steps=N` reached.``` (or any other ``Trainer.fit`` stop
  reason) → ``run_end`` (step N for ``max_steps``).
* ``An <Exc> was raised with message: …, saved checkpoint to <path>`` (a save on an exception)
  → ``checkpoint_end`` with no duration (step from the path, if any).
* ``GPU available: …`` (the Trainer's first line, once per launch, rank 0's) → ``run_start``:
  the only line a run prints before it trains, so a run killed without a word (SIGKILL: the bar
  simply stops) is one between two starts (``tests/parsers/fixtures/lightning_default/``).
* ``[rank: N] …`` messages and warning paths under ``lightning/pytorch/`` only identify the
  stack.

Lightning's progress bar (``TQDMProgressBar``: ``Epoch 0:  65%|██▌ | 130/200 [00:03<00:01,
41.42it/s, v_num=0]``; ``RichProgressBar``, the default when rich is installed: ``Epoch 0/-2 ━━━
130/200 0:00:03 • 0:00:02 41.42it/s v_num: 0.000``) counts batches within the epoch, not global
steps (docs/FORMATS.md §0.12). A reading gives a ``step`` event, and so the step of a failure
after it, where batches map onto steps: in an epoch where a save line followed a reading of
the same epoch on the same or the next line, step = the save's step plus the batches since that
reading; in any other epoch E of a bar of T batches, batch n is step E × T + n (one optimizer
step a batch, Lightning's default ``accumulate_grad_batches=1``, and every epoch the bar's T
batches: lightning 2.6 ``TQDMProgressBar.on_train_epoch_start`` resets it to
``total_train_batches``), unless a checkpoint's default name ``epoch=E-step=S`` put S outside
epoch E's batches (gradient accumulation: steps are fewer than batches). A reading that
gives no more than the last step a save or resume confirmed gives nothing. After a mid-epoch
resume the bar reads ``Training: 41/?`` (no epoch, no total) until the next epoch: nothing. The
bar's clock restarts every epoch, so it never dates lines.
"""

from __future__ import annotations

import re
from datetime import datetime

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.stack import ParseContext, Pattern, Record, Stack
from ckpt_advisor.parsers.text import Bar, bar_of, last_bar

_MODEL_CHECKPOINT = "lightning 2.6 src/lightning/pytorch/callbacks/model_checkpoint.py"
_CHECKPOINT_CONNECTOR = (
    "lightning 2.6 src/lightning/pytorch/trainer/connectors/checkpoint_connector.py"
)

MIDEPOCH_RESUME = Pattern(
    name="midepoch_resume",
    kind=EventKind.RESUME,
    keyword="resuming from a checkpoint that ended",
    regex=re.compile(r"resuming from a checkpoint that ended (?:before the epoch ended|mid-epoch)"),
    sample="UserWarning: You're resuming from a checkpoint that ended before the epoch ended. This "
    "can cause unreliable results if further training is done.",
    source="lightning 1.5-2.6 loops/training_epoch_loop.py / fit_loop.py rank_zero_warn (1.6: "
    "'… ended mid-epoch.'); public/lightning/openspeech_160_*, nemo/nemo_10797_* (a resume the "
    "framework only implies in a warning; a terminal wrap may put 'resuming' first on a line)",
)
"""Shared with ``parsers/nemo.py`` (NeMo routes Lightning's warnings through its logger)."""

SAVE_START = Pattern(
    name="checkpoint_start",
    kind=EventKind.CHECKPOINT_START,
    keyword="saving model to ",
    regex=re.compile(
        r"Epoch (?P<epoch>\d+), (?:global )?step (?P<step>\d+): "
        r"(?:'[^']*'|\"[^\"]*\") reached \S+ \(best \S+\), "
        r"saving model to (?P<quote>['\"])(?P<path>.*?)(?P=quote) as top \d+"
    ),
    sample="Epoch 0, global step 40: 'train_loss' reached 0.03073 (best 0.03073), saving "
    "model to '/data/lt/epoch=0-step=40.ckpt' as top 1",
    source=f'{_MODEL_CHECKPOINT} _update_best_and_save: f"Epoch {{epoch:d}}, global step '
    "{step:d}: {self.monitor!r} reached {current:0.5f} (best {self.best_model_score:0.5f}), "
    'saving model to {filepath!r} as top {k}"',
)

PATTERNS: tuple[Pattern, ...] = (
    MIDEPOCH_RESUME,
    SAVE_START,
    Pattern(
        name="resume",
        kind=EventKind.RESUME,
        keyword="Restored all states from the checkpoint ",
        regex=re.compile(r"Restored all states from the checkpoint (?:file )?at (?P<path>\S.*)"),
        sample="Restored all states from the checkpoint at /data/lt/last.ckpt",
        source=f'{_CHECKPOINT_CONNECTOR}: f"Restored all states from the checkpoint at {{path}}" '
        "(1.x: '… checkpoint file at …')",
    ),
    Pattern(
        name="run_end",
        kind=EventKind.RUN_END,
        keyword="`Trainer.fit` stopped: ",
        regex=re.compile(r"`Trainer\.fit` stopped: (?:`max_steps=(?P<step>\d+)`)?"),
        sample="`Trainer.fit` stopped: `max_steps=200` reached.",
        source="lightning 2.6 src/lightning/pytorch/loops/fit_loop.py done: "
        'rank_zero_info(f"`Trainer.fit` stopped: `max_steps={self.max_steps!r}` reached.")',
    ),
    Pattern(
        name="exception_save",
        kind=EventKind.CHECKPOINT_END,
        keyword=", saved checkpoint to ",
        regex=re.compile(
            r"^An \w+ was raised with message: .*, saved checkpoint to (?P<path>\S.*)"
        ),
        sample="An KeyboardInterrupt was raised with message:                         , saved "
        "checkpoint to /ck/on_exception.ckpt",
        source="lightning 2.6 src/lightning/pytorch/callbacks/on_exception_checkpoint.py "
        "(docs/FORMATS.md §3; not printed by lightning 2.6.6's OnExceptionCheckpoint in the "
        "capture)",
    ),
    Pattern(
        name="rank_prefix",
        kind=None,
        keyword="[rank: ",
        regex=re.compile(r"^\[rank: \d+\] "),
        sample="[rank: 0] Received SIGTERM: 15",
        source='lightning_utilities rank_prefixed_message: f"[rank: {rank}] {message}"',
    ),
    Pattern(
        name="gpu_available",
        kind=EventKind.RUN_START,
        keyword="GPU available: ",
        regex=re.compile(r"^GPU available: (?:True|False)"),
        sample="GPU available: False, used: False",
        source='lightning 2.6 src/lightning/pytorch/trainer/setup.py: f"GPU available: '
        '{torch.cuda.is_available()}{gpu_type_info}, used: {…}"',
    ),
    Pattern(
        name="lightning_warning_path",
        kind=None,
        keyword="lightning",
        regex=re.compile(r"/(?:lightning/pytorch|pytorch_lightning)/[\w/]+\.py:\d+: "),
        sample="/opt/venv/lib/python3.11/site-packages/lightning/pytorch/callbacks/"
        "model_checkpoint.py:881: Checkpoint directory /data/lt exists and is not empty.",
        source="lightning 2.6 rank_zero_warn (warnings.showwarning format '<path>:<line>: <msg>')",
    ),
)


RICH_BAR = re.compile(
    r"(?P<desc>Epoch \d+(?:/-?\d+)?) [^\d\r]*?(?P<n>\d{1,15})/(?P<total>\d{1,15}|\?) +"
    r"(?P<elapsed>[\d:]+) • (?:[-\d:]+|\?) +(?P<rate>\d{1,15}(?:\.\d{1,15})?|\?)(?P<unit>it/s|s/it)"
)
"""``RichProgressBar``'s training bar: the description (``Epoch 0/-2``: epoch / max_epochs - 1),
the bar, ``BatchesProcessedColumn`` (``130/200``), ``CustomTimeColumn`` (elapsed • remaining)
and ``ProcessingSpeedColumn`` (lightning 2.6 ``callbacks/progress/rich_progress.py``; the real
``agent/fixtures/real/lightning_crash.log`` line 22)."""

_EPOCH = re.compile(r"Epoch (\d+)")
_EPOCH_STEP = re.compile(r"(?<!\w)epoch=(\d{1,9})-step=(\d{1,15})")
"""ModelCheckpoint's default file name, ``{epoch}-{step}`` (``epoch=1-step=60.ckpt``)."""


def rich_bar(line: str) -> Bar | None:
    """The last ``RichProgressBar`` training-bar state on ``line``, or None (an unknown total,
    ``130/?``, is 0)."""
    rate_at = max(line.rfind("it/s"), line.rfind("s/it"))
    if rate_at < 0:
        return None
    m = RICH_BAR.search(line, line.rfind("\r", 0, rate_at) + 1)
    if m is None:
        return None
    return bar_of(m, m["desc"], int(m["total"]) if m["total"].isdigit() else 0)


class Lightning(Stack):
    """Lightning stack: the pattern table (checkpoint paths carry ``step=N``) and the progress
    bar's batches mapped onto global steps where they can be (the module docstring)."""

    name = "lightning"
    patterns = PATTERNS
    step_in_path = re.compile(r"(?<!\w)step=(\d+)")
    reads_bars = True

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        self._offsets: dict[int, int] = {}
        """Per epoch a save anchored, global step minus the bar's batch count (else epoch ×
        the bar's total)."""
        self._reading: tuple[int, int, int] | None = None
        """(epoch, batches, line) of the last bar reading."""
        self._batches_per_epoch = 0
        """The bar's total at its last reading (0: not known)."""
        self._batch_steps = True
        """Whether an epoch's batch n may be step epoch × total + n: no checkpoint name
        (``epoch=E-step=S``) said otherwise (gradient accumulation, epochs of other lengths)."""

    def last_bar(self, line: str) -> Bar | None:
        """The last bar state on ``line``: tqdm's (``Epoch 0: …|``) or rich's."""
        return last_bar(line) or rich_bar(line)

    def is_training_bar(self, bar: Bar) -> bool:
        """Never: the bar restarts every epoch, so its clock dates nothing."""
        return False

    def on_bar(self, bar: Bar, lineno: int, time: datetime | None) -> list[Event]:
        """A ``step`` event for a training-bar reading that maps onto a global step beyond the
        last one confirmed (the module docstring), else nothing."""
        epoch = _EPOCH.match(bar.desc or "")
        if epoch is None or bar.n == 0:
            return []
        number = int(epoch[1])
        self._reading = (number, bar.n, lineno)
        self._batches_per_epoch = bar.total
        mapped = (bar.total and self._batch_steps) or not number
        offset = self._offsets.get(number, number * bar.total if mapped else None)
        if offset is None or (self.last_step is not None and bar.n + offset <= self.last_step):
            return []
        self.last_step = bar.n + offset
        return [
            Event(
                EventKind.STEP,
                lineno,
                self.name,
                time=time,
                step=self.last_step,
                duration_s=bar.seconds_per_it,
            )
        ]

    def _check_batch_steps(self, event: Event) -> None:
        """A checkpoint named ``epoch=E-step=S`` whose S is not in epoch E's batches at the
        bar's total (E × T ≤ S ≤ (E + 1) × T) ends the epoch × total mapping."""
        named = _EPOCH_STEP.search(event.detail or "")
        per_epoch = self._batches_per_epoch
        if named is not None and per_epoch:
            epoch, step = int(named[1]), int(named[2])
            self._batch_steps &= epoch * per_epoch <= step <= (epoch + 1) * per_epoch

    def on_record(self, record: Record) -> list[Event]:
        """The table's events; a save line right after a bar reading of its epoch anchors that
        epoch's batches to its global step."""
        hit = self.match(record.msg)
        if hit is None or hit[0].kind is None:
            return []
        pattern, m = hit
        event = self.event(hit[0].kind, record, m)
        self._check_batch_steps(event)
        reading = self._reading
        if pattern is SAVE_START and event.step is not None and reading is not None:
            epoch, batches, line = reading
            if epoch == int(m["epoch"]) and record.line - line <= 1:
                self._offsets[epoch] = event.step - batches
        return self.pair(event)
