"""When a run's progress began and when each restart ended: the one reckoning both the restart
cost R (:func:`rules.progress.restart_cost_s`) and goodput's restart time
(:func:`rules.goodput_spans.goodput_spans`) use, so the two agree on every interruption.

A restart runs from an interruption's first failure to the first progress (a step or a save)
of the run that recovers from it, dated back to when its steps began: ``t − (s − s₀)·τ``
(``s₀`` the run's ``resume`` step, else the step of the last save before it, else 0; τ the
step time), never before the run's first line nor after the progress line. A run's first
progress line often comes a whole logging interval after training resumed (Megatron prints
every ``--log-interval`` iterations, HF Trainer's bar a redraw later), and that time was
training, not restarting. Without τ the recovering run's first line ends the restart (a first
save may come a whole interval after the start: better a start-up counted as progress than an
interval counted as restart).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules.timeline import (
    PROGRESS_KINDS,
    BoolArray,
    FloatArray,
    IntArray,
    Kind,
    Timeline,
)


@dataclass(frozen=True, eq=False)
class Recoveries:
    """Runs' starts of progress and interruptions' recoveries (seconds, epoch).

    Attributes:
        began_s: shape (runs,), per run, when its progress began; its last line's time for a
            run with no progress.
        end_s: shape (i,), per interruption, when its restart ended (the module's rule; the
            newest observation when the job never recovered), never before its last failure.
        progress: shape (i,), the index of the first progress observation after each
            interruption's last failure, -1 when there is none.
        resumed: shape (i,), the ``resume`` step of the run that recovered, NaN unknown.
    """

    began_s: FloatArray
    end_s: FloatArray
    progress: IntArray
    resumed: FloatArray

    @property
    def recovered(self) -> BoolArray:
        """Shape (i,): True where progress followed the interruption."""
        out: BoolArray = self.progress >= 0
        return out


def recoveries(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    int_end_s: FloatArray,
    *,
    step_time_s: float | None,
) -> Recoveries:
    """The runs' starts of progress and the restarts' ends (module docstring).

    Args:
        timeline: the job's observations (failures re-dated, silent deaths added, as the
            estimate uses them).
        run_id: shape (n,), :func:`rules.runs.split_runs` on ``timeline``.
        saves: :func:`rules.progress.every_save_index` on ``timeline`` (where the saves were).
        int_end_s: shape (i,), each interruption's last failure time
            (:attr:`rules.interruptions.Interruption.end_s`), ascending.
        step_time_s: seconds per step, or None when unknown.

    Returns:
        The per-run and per-interruption times.
    """
    times = timeline.time_s
    n_i = int_end_s.size
    if not times.size:
        empty = np.zeros(0)
        return Recoveries(empty, np.full(n_i, np.nan), np.full(n_i, -1, np.intp), np.zeros(n_i))
    first_of_run = np.flatnonzero(np.concatenate(([True], run_id[1:] != run_id[:-1])))
    last_of_run = np.concatenate((first_of_run[1:] - 1, [times.size - 1]))
    began_s = _progress_began_s(
        timeline, run_id, saves, step_time_s, times[first_of_run], times[last_of_run]
    )
    failures = timeline.failure_index
    end_s = np.full(n_i, times[-1])
    resumed = np.full(n_i, np.nan)
    after = np.full(n_i, -1, np.intp)
    if n_i and failures.size:
        last_failure = failures[np.searchsorted(times[failures], int_end_s, "right") - 1]
        progress = np.flatnonzero(timeline.is_kind(*PROGRESS_KINDS))
        following = np.searchsorted(progress, last_failure, "right")
        recovered = following < progress.size
        at = progress[following[recovered]]
        after[recovered] = at
        end_s[recovered] = np.minimum(times[at], began_s[run_id[at]])
        resumed[recovered] = resume_steps(timeline, run_id)[run_id[at]]
    return Recoveries(began_s, np.maximum(end_s, int_end_s), after, resumed)


def _progress_began_s(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    step_time_s: float | None,
    run_first_s: FloatArray,
    run_last_s: FloatArray,
) -> FloatArray:
    """Per run, when its progress began (module docstring); its last line's time for a run
    with no progress."""
    began_s = run_last_s.copy()
    progress = np.flatnonzero(timeline.is_kind(*PROGRESS_KINDS))
    of_run = run_id[progress]  # non-decreasing: each run's first is where it changes
    first = np.flatnonzero(of_run[1:] != of_run[:-1]) + 1
    first = np.concatenate(([0], first)) if of_run.size else first
    runs, at = of_run[first], progress[first]
    shown_s = timeline.time_s[at]
    if step_time_s is None:
        began_s[runs] = run_first_s[runs]
        return began_s
    start_step = resume_steps(timeline, run_id)[runs]
    unknown = np.isnan(start_step)
    before = np.searchsorted(timeline.time_s[saves], run_first_s[runs[unknown]], "right") - 1
    saved_step = np.concatenate(([0.0], timeline.step[saves]))  # 0: nothing saved before
    start_step[unknown] = saved_step[before + 1]
    steps = timeline.step[at]
    dated = shown_s - np.where(np.isfinite(steps), steps - start_step, 0.0) * step_time_s
    dated = np.where(np.isfinite(dated), dated, shown_s)
    began_s[runs] = np.clip(dated, run_first_s[runs], shown_s)
    return began_s


def resume_steps(timeline: Timeline, run_id: IntArray) -> FloatArray:
    """Per run (indexed by run number), the step of its first ``resume`` line, NaN if none."""
    out = np.full(int(run_id[-1]) + 1 if run_id.size else 0, np.nan)
    resumes = np.flatnonzero(timeline.is_kind(Kind.RESUME) & np.isfinite(timeline.step))
    runs, first = np.unique(run_id[resumes], return_index=True)
    out[runs] = timeline.step[resumes[first]]
    return out
