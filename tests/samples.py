"""Sample values shared by the rules' and the agent's tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from ckpt_advisor.rules.model import JobEstimate, Note, NoteCode, Reason, ReasonCode, Status


def drifting_estimate(**changes: Any) -> JobEstimate:
    """A drifting job: checkpoint every 4 h (1,800 steps of 8 s) where 1 h (450 steps) is best,
    with one note (C changed from 4 to 5 min); ``changes`` replace fields."""
    base = JobEstimate(
        job="llama-70b",
        computed_at_s=1_700_000_000.0,
        checkpoint_cost_s=300.0,
        checkpoint_cost_ci_s=(280.0, 320.0),
        checkpoint_cost_source="timing_file",
        n_checkpoints=12,
        mtbf_s=21_600.0,
        mtbf_ci_s=(12_000.0, 50_000.0),
        n_failures=4,
        exposure_s=86_400.0,
        restart_cost_s=None,
        current_interval_s=14_400.0,
        young_interval_s=3_600.0,
        daly_interval_s=3_500.0,
        recommended_interval_s=3_600.0,
        recommended_interval_ci_s=None,
        step_time_s=8.0,
        current_interval_steps=1_800,
        recommended_interval_steps=450,
        waste_fraction_current=0.35,
        waste_fraction_recommended=0.15,
        drift_ratio=4.0,
        status=Status.DRIFT,
        reason=Reason(ReasonCode.DRIFT, {"ratio": 4.0, "drift_ratio": 1.5}),
        newest_event_s=1_700_000_000.0,
        failure_classes={"nccl_timeout": 3, "xid_79": 1},
        notes=(Note(NoteCode.COST_CHANGED, {"previous_s": 240.0, "cost_s": 300.0, "n_saves": 3}),),
        confidence=0.9,
    )
    return dataclasses.replace(base, **changes)
