"""Each job's current recommendation, for training code that follows it (``[advice]``).

After every estimate run the daemon puts each job's advice (:func:`advice_json`)
on an :class:`AdviceBoard`: in memory for ``/advice/JOB`` on the metrics listener
(``agent/daemon/http.py``), and, with ``[advice] dir``, in ``dir/JOB.json``, which the training
callbacks' ``advice_file`` reads (``agent/training_advice.py``). The file is replaced atomically
(a temp file in the same directory, fsync, ``os.replace``, fsync of the directory), so a reader
sees the old advice or the new, never half of one, even across a crash or a power loss. A file
that cannot be written is logged once (until a write succeeds again) and never stops the daemon;
the training side then sees the old file go stale (``max_advice_age_s``) and changes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ckpt_advisor.agent.contracts import iso
from ckpt_advisor.agent.marks import setting_is_lower_bound
from ckpt_advisor.rules.model import JobEstimate

log = logging.getLogger(__name__)

FILE_MODE = 0o644
"""Advice files are read by the training jobs, often another user than the daemon's."""


ADVICE_VERSION = 1
"""The advice file's ``version``: raised only if a key changes meaning (keys are added)."""


def advice_json(est: JobEstimate) -> dict[str, Any]:
    """The advice file and ``/advice/JOB`` object of one estimate (docs/DESIGN.md, "Advice
    file"), read by :func:`rules.adoption.parse_advice` on the training side.

    ``status`` and the intervals are the estimate's: the callbacks move the interval only on
    ``drift``. ``current_interval_s`` (with ``current_interval_is_upper_bound``, as in
    ``estimates``), ``step_time_s`` and the range over the plausible C
    (``recommended_interval_range_s``) say what the advice rests on; so do C and whether it is
    a lower bound (``checkpoint_cost_s``, ``checkpoint_cost_is_lower_bound``,
    ``checkpoint_cost_range_s``: ``[low, high]``, ``high`` null when C has no upper bound),
    whether the setting is to be read ``or more`` (``recommended_setting_is_lower_bound``, as
    in ``estimates``), and how old the data is: ``newest_event`` (ISO 8601) and
    ``newest_event_age_s``, the seconds from it to ``computed_at``. A job seen through its
    timing file alone has an event only at each save, so its age runs up to one save spacing
    (``current_interval_s`` plus C) while it is healthy: it is a fact to compare with that
    spacing, not a staleness verdict (the callbacks judge the advice's own age, by
    ``computed_at``).
    """
    range_s = est.recommended_interval_range_s
    cost_range_s = est.checkpoint_cost_range_s
    newest_s = est.newest_event_s
    out = {
        "version": ADVICE_VERSION,
        "job": est.job,
        "status": str(est.status),
        "recommended_interval_s": est.recommended_interval_s,
        "recommended_interval_steps": est.recommended_interval_steps,
        "recommended_interval_range_s": None if range_s is None else list(range_s),
        "recommended_setting": est.recommended_setting,
        "current_interval_s": est.current_interval_s,
        "current_interval_is_upper_bound": est.current_interval_is_upper_bound,
        "current_interval_steps": est.current_interval_steps,
        "step_time_s": est.step_time_s,
        "checkpoint_cost_s": est.checkpoint_cost_s,
        "checkpoint_cost_is_lower_bound": est.checkpoint_cost_is_lower_bound,
        "mtbf_is_lower_bound": est.mtbf_is_lower_bound,
        "checkpoint_cost_range_s": None if cost_range_s is None else list(cost_range_s),
        "computed_at": iso(est.computed_at_s),
        "newest_event": iso(newest_s),
        "newest_event_age_s": None if newest_s is None else max(0.0, est.computed_at_s - newest_s),
        "tiers": tier_advice(est),
    }
    out["recommended_setting_is_lower_bound"] = setting_is_lower_bound(out)
    return out


def tier_advice(est: JobEstimate) -> dict[str, dict[str, float | int | None]]:
    """The advice file's ``tiers``: the fast tier's and the persistent interval of a two-tier
    job's recommended pair (``{}`` when there is none)."""
    tiers = est.tiers
    if tiers is None or tiers.fast_interval_s is None:
        return {}
    return {
        tiers.fast_tier: {
            "interval_s": tiers.fast_interval_s,
            "interval_steps": tiers.fast_interval_steps,
        },
        "persistent": {
            "interval_s": tiers.persistent_interval_s,
            "interval_steps": tiers.persistent_interval_steps,
        },
    }


def advice_file_name(job: str) -> str:
    """``JOB.json``, with every character but letters, digits and ``_.-~`` percent-encoded
    (so ``a/b`` is ``a%2Fb.json``: one file in the directory, whatever the job's name)."""
    return quote(job, safe="") + ".json"


def write_atomically(path: Path, text: str, *, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``text`` so that a reader sees the old content or the new, whole.

    A temp file beside ``path`` (same filesystem, a dot name no ``*.json`` glob matches) is
    written, fsynced, given ``mode`` and renamed over ``path`` (POSIX ``rename(2)`` is atomic);
    then the directory is fsynced so the rename survives a power loss.

    Raises:
        OSError: the directory cannot be written; no temp file is left behind.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class AdviceBoard:
    """The latest advice of every job, kept in memory and, with a directory, in files.

    Args:
        directory: ``[advice] dir``; None keeps the advice in memory only.
        endpoint: ``[advice] endpoint``: whether ``/advice/JOB`` answers.

    Thread-safe: the scheduler's thread publishes, the HTTP server's threads read.
    """

    def __init__(self, directory: Path | None = None, *, endpoint: bool = False) -> None:
        self.directory = directory
        self.endpoint = endpoint
        self._latest: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._failing: str | None = None

    def configure(self, directory: Path | None, *, endpoint: bool) -> None:
        """Write to ``directory`` and serve or not from now on (a config reload)."""
        self.directory, self.endpoint = directory, endpoint

    def path(self, job: str) -> Path | None:
        """Where ``job``'s advice file is, or None without ``[advice] dir``."""
        return None if self.directory is None else self.directory / advice_file_name(job)

    def publish(self, estimates: Sequence[JobEstimate]) -> None:
        """Take each estimate's advice: kept for the endpoint and written to its file."""
        for est in estimates:
            record = advice_json(est)
            with self._lock:
                self._latest[est.job] = record
            self._write(est.job, record)

    def retain(self, jobs: Iterable[str]) -> None:
        """Forget the advice of jobs not in ``jobs`` (removed by a reload; their files stay
        and go stale, which the training side ignores)."""
        keep = set(jobs)
        with self._lock:
            self._latest = {job: r for job, r in self._latest.items() if job in keep}

    def get(self, job: str) -> dict[str, Any] | None:
        """``job``'s latest advice, or None when it has none (yet)."""
        with self._lock:
            return self._latest.get(job)

    def _write(self, job: str, record: dict[str, Any]) -> None:
        path = self.path(job)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, json.dumps(record, indent=1) + "\n")
        except OSError as exc:
            problem = f"{path.parent}: {exc.strerror or exc}"
            if problem != self._failing:
                log.warning("cannot write advice file %s: %s; advice kept in memory", path, problem)
            self._failing = problem
            return
        if self._failing is not None:
            log.info("advice files are written again (%s)", path.parent)
            self._failing = None
