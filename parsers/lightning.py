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
* ``GPU available: …``, ``[rank: N] …`` messages and warning paths under
  ``lightning/pytorch/`` only identify the stack.

Lightning's own progress bars count batches within the epoch, not global steps
(docs/FORMATS.md §0.12),
so they give no ``step`` events.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.stack import Pattern, Stack

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

PATTERNS: tuple[Pattern, ...] = (
    MIDEPOCH_RESUME,
    Pattern(
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
    ),
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
        kind=None,
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


class Lightning(Stack):
    """Lightning stack: a stateless pattern table; checkpoint paths carry ``step=N``."""

    name = "lightning"
    patterns = PATTERNS
    step_in_path = re.compile(r"(?<!\w)step=(\d+)")
