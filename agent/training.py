"""Checkpoint timing-file writers to drop into a training script.

Each appends one JSON Lines record per save in the DESIGN.md timing-file schema::

    {"step": 500, "start": "2026-11-29T22:11:38.483000+00:00",
     "end": "2026-11-29T22:12:01.020000+00:00", "path": "/ck/checkpoint-500", "bytes": 123456}

(``start``/``end`` ISO 8601 with offset; ``path`` and ``bytes`` only when known), which
``ckpt-advisor`` reads with the ``timing_jsonl`` parser. Three writers:

* :func:`checkpoint_timer` — a context manager for any loop:
  ``with checkpoint_timer("ckpt_timings.jsonl", step=n, path=d): save(d)``;
* :func:`hf_trainer_callback` — a ``transformers.TrainerCallback``;
* :func:`lightning_callback` — a ``lightning.pytorch.Callback``.

transformers and lightning are imported only when their writer is asked for, so this module
imports without them. Records are appended with one ``write`` of one line (``O_APPEND``), so
concurrent writers (one per rank) do not interleave; call the writers on rank 0 only unless
per-rank files are wanted.

Advice that applies itself (opt-in): given ``advice_file`` (the daemon's ``[advice] dir``/
``JOB.json``) and the user's bounds, the two callbacks also move the job's own interval
(``save_steps``, ``every_n_train_steps``) to the advised one between steps, within those
bounds (:mod:`ckpt_advisor.agent.training_advice`, :class:`AdoptionPolicy`); a hand-written
loop uses :class:`AdvisedInterval` with :func:`checkpoint_timer`. Without ``advice_file``
nothing is read and nothing changes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.training_advice import LOG, AdvisedInterval
from ckpt_advisor.rules.adoption import AdoptionPolicy

__all__ = [
    "AdoptionPolicy",
    "AdvisedInterval",
    "append_record",
    "checkpoint_timer",
    "hf_trainer_callback",
    "lightning_callback",
    "size_bytes",
    "timing_record",
]


def timing_record(
    step: int,
    start: datetime,
    end: datetime,
    *,
    path: str | os.PathLike[str] | None = None,
    bytes_written: int | None = None,
    tier: str | None = None,
) -> dict[str, Any]:
    """The timing-file record of one save (DESIGN.md schema); times must be aware.

    ``tier`` (``memory``, ``local``, ``persistent``: the timing parser refuses other values)
    says where the save went, for a job that saves to two tiers.

    Raises:
        ValueError: a naive time, a negative step, or ``end`` before ``start``.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("start and end must be timezone-aware datetimes")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if end < start:
        raise ValueError("end is before start")
    record: dict[str, Any] = {"step": step, "start": start.isoformat(), "end": end.isoformat()}
    if path is not None:
        record["path"] = os.fspath(path)
    if bytes_written is not None:
        record["bytes"] = bytes_written
    if tier is not None:
        record["tier"] = tier
    return record


def append_record(timing_file: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``timing_file`` (created if missing).

    Raises:
        OSError: the file cannot be opened or written.
    """
    line = (json.dumps(record, separators=(", ", ": ")) + "\n").encode()
    fd = os.open(timing_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def size_bytes(path: str | os.PathLike[str]) -> int | None:
    """Total size of a checkpoint file or directory tree in bytes, ``None`` if it is missing."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if not p.is_dir():
        return None
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _now() -> datetime:
    return datetime.now(UTC).astimezone()


@contextmanager
def checkpoint_timer(
    timing_file: str | os.PathLike[str],
    *,
    step: int,
    path: str | os.PathLike[str] | None = None,
    schedule: AdvisedInterval | None = None,
    tier: str | None = None,
) -> Iterator[None]:
    """Time the ``with`` body as one save of ``step`` and append its record to ``timing_file``.

    ``bytes`` is the size of ``path`` after the save, when ``path`` is given and exists. A save
    that raises writes no record (the exception propagates). ``tier`` goes into the record
    (:func:`timing_record`). With ``schedule`` (an
    :class:`AdvisedInterval`), a completed save is noted in it (:meth:`AdvisedInterval.save_done`).

    Raises:
        OSError: the timing file cannot be written (after a successful save).
    """
    start = _now()
    yield
    end = _now()
    bytes_written = size_bytes(path) if path is not None else None
    append_record(
        timing_file,
        timing_record(step, start, end, path=path, bytes_written=bytes_written, tier=tier),
    )
    if schedule is not None:
        schedule.save_done(step)


def _policy(
    timing_file: str | os.PathLike[str] | None,
    advice_file: str | os.PathLike[str] | None,
    bounds: dict[str, float],
    caller: str,
) -> AdoptionPolicy | None:
    """The adoption policy of a callback's keyword arguments; None without ``advice_file``.

    Raises:
        ValueError: neither file, ``advice_file`` without ``min_interval_s`` and
            ``max_interval_s``, bounds without ``advice_file``, or a bound out of range.
        TypeError: a keyword :class:`AdoptionPolicy` does not take.
    """
    if timing_file is None and advice_file is None:
        raise ValueError(f"{caller} needs timing_file or advice_file")
    if advice_file is None:
        if bounds:
            raise ValueError(f"{', '.join(bounds)}: only with advice_file")
        return None
    if "min_interval_s" not in bounds or "max_interval_s" not in bounds:
        raise ValueError("advice_file needs min_interval_s and max_interval_s (seconds)")
    return AdoptionPolicy(**bounds)


def hf_trainer_callback(
    timing_file: str | os.PathLike[str] | None = None,
    *,
    advice_file: str | os.PathLike[str] | None = None,
    tier: str | None = None,
    poll_every_steps: int | None = None,
    **bounds: float,
) -> Any:
    """A ``transformers.TrainerCallback`` that times each save, and may follow advice.

    Timing (with ``timing_file``): the Trainer has no hook before a save: ``on_step_end``
    (with ``control.should_save`` set by ``DefaultFlowCallback``, which runs first),
    ``on_log`` and ``on_evaluate`` run just before it in ``_maybe_log_save_evaluate``
    (transformers 4.46.3 / 5.x ``trainer.py``), so the latest of them is the start and
    ``on_save`` the end; evaluation is left out. ``path`` is
    ``<output_dir>/checkpoint-<global_step>``. Only the main process writes.

    Advice (with ``advice_file`` and the keywords of :class:`AdoptionPolicy` as ``bounds``:
    ``min_interval_s`` and ``max_interval_s`` required, ``max_change_factor``,
    ``min_change_gap_s``, ``max_advice_age_s``, ``min_relative_change`` optional): an
    :class:`AdvisedInterval` starting from the Trainer's save interval (``state.save_steps``,
    resolved from ``save_steps`` at ``on_train_begin``) is stepped at each ``on_step_end``;
    a change sets ``args.save_steps`` and ``state.save_steps``. ``DefaultFlowCallback`` (which
    runs first) saves when ``global_step % state.save_steps == 0`` (transformers 5.x
    ``trainer_callback.py``); once the interval has moved, this callback sets
    ``control.should_save`` itself so that saves come every ``save_steps`` from the last save
    (not at multiples, which would leave one short gap after each change), keeping the
    Trainer's final save. ``tier`` and ``poll_every_steps`` go to :class:`AdvisedInterval`.
    Only ``save_strategy="steps"`` is moved.
    With several processes rank 0 decides and ``accelerate.utils.broadcast_object_list``
    hands its decision to every rank.

    Usage: ``Trainer(..., callbacks=[hf_trainer_callback("ckpt_timings.jsonl")])``.

    Raises:
        ImportError: transformers is not installed.
        ValueError: neither ``timing_file`` nor ``advice_file``, ``advice_file`` without both
            bounds, or a bound out of range.
        TypeError: an unknown keyword.
    """
    policy = _policy(timing_file, advice_file, bounds, "hf_trainer_callback")
    from transformers import TrainerCallback  # type: ignore[import-not-found]

    class CheckpointTimingCallback(TrainerCallback):  # type: ignore[misc]
        """Appends ``{"step", "start", "end", "path", "bytes"}`` per save; may follow advice."""

        def __init__(self) -> None:
            self.start: datetime | None = None
            self.schedule: AdvisedInterval | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if advice_file is None or policy is None or self.schedule is not None:
                return
            steps = int(getattr(state, "save_steps", 0) or args.save_steps)
            if str(args.save_strategy) not in ("steps", "SaveStrategy.STEPS") or steps < 1:
                LOG.warning("ckpt-advisor: save_strategy is not steps; advice is not followed")
                return
            schedule = AdvisedInterval(
                advice_file,
                interval_steps=steps,
                policy=policy,
                tier=tier,
                poll_every_steps=poll_every_steps,
                broadcast=_hf_broadcast(args),
                is_main=bool(state.is_world_process_zero),
            )
            schedule.last_save_step = int(state.global_step)  # 0, or the step resumed from
            self.schedule = schedule

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.schedule is not None:
                new = self.schedule.step_done(state.global_step)
                if new is not None:
                    args.save_steps = new
                    state.save_steps = new
                if self.schedule.changes:  # saves count from the last one, not from step 0
                    if self.schedule.save_due(state.global_step):
                        control.should_save = True
                    elif not control.should_training_stop:  # keep the final save
                        control.should_save = False
            if control.should_save:
                self.start = _now()

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.start is not None:
                self.start = _now()

        def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.start is not None:
                self.start = _now()

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            start, self.start = self.start, None
            if self.schedule is not None:
                self.schedule.save_done(state.global_step)
            if timing_file is None or start is None or not state.is_world_process_zero:
                return
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            append_record(
                timing_file,
                timing_record(
                    state.global_step, start, _now(), path=path, bytes_written=size_bytes(path)
                ),
            )

    return CheckpointTimingCallback()


def _hf_broadcast(args: Any) -> Any:
    """Rank 0's value to every rank of an HF Trainer job, or None for a single process."""
    if int(getattr(args, "world_size", 1)) <= 1:
        return None
    from accelerate.utils import broadcast_object_list  # type: ignore[import-not-found]

    def broadcast(value: int | None) -> int | None:
        box = [value]
        broadcast_object_list(box, from_process=0)
        return box[0]

    return broadcast


def lightning_callback(
    timing_file: str | os.PathLike[str] | None = None,
    *,
    advice_file: str | os.PathLike[str] | None = None,
    tier: str | None = None,
    poll_every_steps: int | None = None,
    **bounds: float,
) -> Any:
    """A ``lightning.pytorch.Callback`` that times each checkpoint written, and may follow advice.

        Timing (with ``timing_file``): Lightning calls ``on_save_checkpoint`` while it builds the
        checkpoint dict, then writes it with ``strategy.checkpoint_io.save_checkpoint`` (lightning
        2.6 ``trainer/connectors/checkpoint_connector.py``, ``strategies/strategy.py``); no
        callback hook runs after the write. So ``setup`` wraps the strategy's ``checkpoint_io`` to
        see the write end: start = ``on_save_checkpoint``, end = the write's return, ``path`` and
        ``bytes`` = the written file. Only global rank 0 writes.

        Advice (with ``advice_file`` and both bounds; the other keywords as in
        :func:`hf_trainer_callback`): the interval of the ``ModelCheckpoint`` callbacks that save
        every N training steps (``every_n_train_steps``) is moved between batches
        (``on_train_batch_end``, which runs before ``ModelCheckpoint``'s: Lightning puts checkpoint
        callbacks last), by setting their ``_every_n_train_steps`` (lightning 2.6
        ``callbacks/model_checkpoint.py`` checks ``global_step % _every_n_train_steps``, so saves
    fall on multiples of the new interval). Rank 0
        decides; ``trainer.strategy.broadcast`` hands the decision to every rank.

        Usage: ``Trainer(..., callbacks=[lightning_callback("ckpt_timings.jsonl")])``.

        Raises:
            ImportError: lightning is not installed.
            ValueError: neither ``timing_file`` nor ``advice_file``, ``advice_file`` without both
                bounds, or a bound out of range.
            TypeError: an unknown keyword.
    """
    policy = _policy(timing_file, advice_file, bounds, "lightning_callback")
    from lightning.pytorch import Callback  # type: ignore[import-not-found]

    class CheckpointTimingCallback(Callback):  # type: ignore[misc]
        """Appends ``{"step", "start", "end", "path", "bytes"}`` per checkpoint file."""

        def __init__(self) -> None:
            self.start: datetime | None = None
            self._wrapped = False
            self.schedule: AdvisedInterval | None = None
            self._checkpoints: list[Any] = []

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            if advice_file is not None and policy is not None and self.schedule is None:
                self._follow(trainer, advice_file, policy)
            if self._wrapped or timing_file is None:
                return
            self._wrapped = True
            io = trainer.strategy.checkpoint_io
            save = io.save_checkpoint

            def timed_save(checkpoint: Any, path: Any, storage_options: Any = None) -> None:
                start, self.start = (self.start or _now()), None
                save(checkpoint, path, storage_options=storage_options)
                if trainer.global_rank == 0:
                    record = timing_record(
                        trainer.global_step,
                        start,
                        _now(),
                        path=path,
                        bytes_written=size_bytes(path),
                    )
                    append_record(timing_file, record)

            io.save_checkpoint = timed_save

        def _follow(
            self, trainer: Any, advice: str | os.PathLike[str], bounds: AdoptionPolicy
        ) -> None:
            self._checkpoints = [
                cb
                for cb in trainer.checkpoint_callbacks
                if int(getattr(cb, "_every_n_train_steps", 0) or 0) >= 1
            ]
            if not self._checkpoints:
                LOG.warning(
                    "ckpt-advisor: no ModelCheckpoint(every_n_train_steps=...); "
                    "advice is not followed"
                )
                return

            def broadcast(value: int | None) -> int | None:
                return trainer.strategy.broadcast(value, src=0)  # type: ignore[no-any-return]

            self.schedule = AdvisedInterval(
                advice,
                interval_steps=int(self._checkpoints[0]._every_n_train_steps),
                policy=bounds,
                tier=tier,
                poll_every_steps=poll_every_steps,
                broadcast=broadcast if trainer.world_size > 1 else None,
                is_main=trainer.global_rank == 0,
            )

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            if self.schedule is None:
                return
            new = self.schedule.step_done(trainer.global_step)
            if new is not None:
                for cb in self._checkpoints:
                    cb._every_n_train_steps = new

        def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
            self.start = _now()
            if self.schedule is not None:
                self.schedule.save_done(trainer.global_step)

    return CheckpointTimingCallback()
