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
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def timing_record(
    step: int,
    start: datetime,
    end: datetime,
    *,
    path: str | os.PathLike[str] | None = None,
    bytes_written: int | None = None,
) -> dict[str, Any]:
    """The timing-file record of one save (DESIGN.md schema); times must be aware.

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
) -> Iterator[None]:
    """Time the ``with`` body as one save of ``step`` and append its record to ``timing_file``.

    ``bytes`` is the size of ``path`` after the save, when ``path`` is given and exists. A save
    that raises writes no record (the exception propagates).

    Raises:
        OSError: the timing file cannot be written (after a successful save).
    """
    start = _now()
    yield
    end = _now()
    bytes_written = size_bytes(path) if path is not None else None
    append_record(
        timing_file, timing_record(step, start, end, path=path, bytes_written=bytes_written)
    )


def hf_trainer_callback(timing_file: str | os.PathLike[str]) -> Any:
    """A ``transformers.TrainerCallback`` that appends one record per Trainer save.

    The Trainer has no hook before a save: ``on_step_end`` (with ``control.should_save`` set
    by ``DefaultFlowCallback``, which runs first), ``on_log`` and ``on_evaluate`` run just
    before it in ``_maybe_log_save_evaluate`` (transformers 4.46.3 / 5.x ``trainer.py``), so
    the latest of them is the start and ``on_save`` the end; evaluation is left out. ``path``
    is ``<output_dir>/checkpoint-<global_step>``. Only the main process writes.

    Usage: ``Trainer(..., callbacks=[hf_trainer_callback("ckpt_timings.jsonl")])``.

    Raises:
        ImportError: transformers is not installed.
    """
    from transformers import TrainerCallback  # type: ignore[import-not-found]

    class CheckpointTimingCallback(TrainerCallback):  # type: ignore[misc]
        """Appends ``{"step", "start", "end", "path", "bytes"}`` per save."""

        def __init__(self) -> None:
            self.start: datetime | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
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
            if start is None or not state.is_world_process_zero:
                return
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            append_record(
                timing_file,
                timing_record(
                    state.global_step, start, _now(), path=path, bytes_written=size_bytes(path)
                ),
            )

    return CheckpointTimingCallback()


def lightning_callback(timing_file: str | os.PathLike[str]) -> Any:
    """A ``lightning.pytorch.Callback`` that appends one record per checkpoint written.

    Lightning calls ``on_save_checkpoint`` while it builds the checkpoint dict, then writes
    it with ``strategy.checkpoint_io.save_checkpoint`` (lightning 2.6
    ``trainer/connectors/checkpoint_connector.py``, ``strategies/strategy.py``); no callback
    hook runs after the write. So ``setup`` wraps the strategy's ``checkpoint_io`` to see the
    write end: start = ``on_save_checkpoint``, end = the write's return, ``path`` and
    ``bytes`` = the written file. Only global rank 0 writes.

    Usage: ``Trainer(..., callbacks=[lightning_callback("ckpt_timings.jsonl")])``.

    Raises:
        ImportError: lightning is not installed.
    """
    from lightning.pytorch import Callback  # type: ignore[import-not-found]

    class CheckpointTimingCallback(Callback):  # type: ignore[misc]
        """Appends ``{"step", "start", "end", "path", "bytes"}`` per checkpoint file."""

        def __init__(self) -> None:
            self.start: datetime | None = None
            self._wrapped = False

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            if self._wrapped:
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

        def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
            self.start = _now()

    return CheckpointTimingCallback()
