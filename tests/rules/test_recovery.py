"""A restart ends where the recovering run's steps began (rules/recovery.py), for the restart
cost R of the estimate and for goodput's restart time alike."""

from __future__ import annotations

import pytest

from ckpt_advisor.rules.goodput import Bucket
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import Observation
from tests.rules.simulate import obs, real_hf_observations


def megatron_like(restart_s: float = 180.0) -> list[Observation]:
    """Megatron-shaped runs: an iteration line every 10 iterations of 1 s (its own elapsed
    time per iteration), a 10 s save every 500 iterations, two crashes at iteration 1200, each
    back ``restart_s`` later at the last save (iteration 1000) whose first line comes 10
    iterations in."""
    out: list[Observation] = [obs("run_start", 0.0)]
    t, it = 0.0, 0
    for life in range(3):
        while it < (1200 if life < 2 else 1600):
            it += 10
            t += 10.0
            out.append(obs("step", t, step=it, duration_s=1.0))
            if it % 500 == 0:
                out += [obs("checkpoint_start", t, step=it), obs("checkpoint_end", t + 10, step=it)]
                t += 10.0
        if life == 2:
            break
        out.append(obs("failure", t, failure_class="nccl_error"))
        t += restart_s  # back, loaded, training iteration 1001
        out += [obs("run_start", t), obs("resume", t, step=1000)]
        it = 1000
    return out


def test_megatron_restart_cost_is_the_true_downtime_in_both() -> None:
    """Two crashes, each down 180 s: R is 180 s, not 190 s (the first line after the restart
    is iteration 1010, 10 s of training after it: 1010 − 1000 at 1 s dates it back to the
    restart), and goodput's restart time is 2 × 180 s = 6m 00s."""
    est = estimate_job("mg", megatron_like(), now_s=0.0)
    assert est.step_time_s == 1.0
    assert est.restart_cost_s == pytest.approx(180.0)
    assert est.goodput_spans is not None
    assert est.goodput_spans.breakdown()[Bucket.RESTART] == pytest.approx(360.0)


def test_hf_captured_restart_cost_is_goodputs() -> None:
    """The captured HF crash and resume: the interruption starts at the re-dated failure
    (step 59, 1795990304.060 s), the resumed run (from step 50) first shows step 55 at
    1795990310.672 s, dated back by 5 steps of the median 0.15362 s (the crash run's bar
    rates: the resumed run's bar gives none): 1795990309.904 s; R = 5.844 s in the estimate as
    in goodput (the estimate gave 6.724 s, to the bar line)."""
    est = estimate_job("hf", real_hf_observations(), now_s=0.0)
    assert len(est.interruptions) == 1
    assert est.step_time_s == pytest.approx(0.153623, abs=1e-6)
    start_s = est.interruptions[0].start_s
    assert start_s == pytest.approx(1795990304.060, abs=1e-3)
    by_hand_s = 1795990310.672 - 5 * est.step_time_s - start_s
    assert est.restart_cost_s == pytest.approx(by_hand_s, abs=1e-6)
    assert est.restart_cost_s == pytest.approx(5.844, abs=1e-3)
    assert est.goodput_spans is not None
    assert est.goodput_spans.breakdown()[Bucket.RESTART] == pytest.approx(est.restart_cost_s)
