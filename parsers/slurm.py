"""Slurm's own lines in a job's output: cancellations (time limit, preemption, node failure,
user cancel, requeue), srun task deaths, OOM kills, and Lightning's requeue.

Format strings from SchedMD/slurm ``src/slurmd/slurmstepd/req.c`` (``*** %s ON %s CANCELLED AT
%s …``, entity ``JOB <id>`` or ``STEP <id>.<step>``), ``src/srun/launch.c``,
``src/api/step_launch.c`` and ``task/cgroup`` (docs/FORMATS.md §13), commits 284c3b95f0 and
f7bc53fb04 (25.05: ``DUE to SIGNAL Terminated``). The ``CANCELLED AT`` time is ``%FT%T``, local
time in the cluster's zone (``SLURM_TIME_FORMAT`` may change it: then the time is left out).
Slurm prints ``*** JOB …`` and ``*** STEP …`` for the same kill: ``parsers/failures.py`` keeps
one of them.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.failure_rule import FailureRule, fixed
from ckpt_advisor.parsers.timestamps import parse_ymd_hms
from ckpt_advisor.parsers.vocabulary import signal_class

_CANCEL_REASONS = {
    "TIME LIMIT": "slurm_time_limit",
    "PREEMPTION": "preemption",
    "NODE FAILURE": "node_failure",
    "JOB REQUEUE": "slurm_requeue",
    "TASK FAILURE": "slurm_task_failure",
}


def _cancel_class(m: re.Match[str]) -> str:
    reason = m["reason"]
    if reason is None or reason.startswith("SIGNAL"):
        return "slurm_cancelled"
    for text, failure_class in _CANCEL_REASONS.items():
        if reason.startswith(text):
            return failure_class
    return "slurm_cancelled"


def _task_class(m: re.Match[str]) -> str:
    what = m["what"].strip()
    if what.startswith("Exited with exit code"):
        return "exit_code"
    if what == "Out Of Memory":
        return "host_oom"
    return signal_class(what)


def _slurm_time(text: str, tz: tzinfo) -> datetime:
    return parse_ymd_hms(text, tz)


PARSER_NAME = "slurm"
"""``Event.parser`` of the events of these rules."""

RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "slurm_cancelled",
        " CANCELLED AT ",
        re.compile(
            r"\*\*\* (?P<entity>JOB|STEP) \S+ ON \S+ CANCELLED AT (?P<time>.+?)"
            r"(?: DUE (?:TO|to) (?P<reason>[A-Z][A-Za-z ]*?)(?:,[^*]*)?)? \*\*\*"
        ),
        _cancel_class,
        "slurmstepd: error: *** JOB 1234567 ON gpu-node-017 CANCELLED AT 2024-03-05T14:22:51 "
        "DUE TO TIME LIMIT ***",
        "slurm src/slurmd/slurmstepd/req.c _handle_signal_container (docs/FORMATS.md §13); a "
        "STEP cancelled without a reason right after a task's death is srun cancelling the "
        "step, a consequence (public/slurm/hafs_101_oom_kill.log)",
        parse_time=_slurm_time,
        echo_after_failure=lambda m: m["reason"] is None and m["entity"] == "STEP",
    ),
    FailureRule(
        "slurm_step_failed",
        " FAILED (non-zero exit code",
        re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ FAILED \(non-zero exit code"),
        fixed("slurm_task_failure"),
        "slurmstepd: error: *** STEP 1234567.0 ON gpu-node-017 FAILED (non-zero exit code or "
        "other failure mode) ***",
        "slurm src/slurmd/slurmstepd/req.c (docs/FORMATS.md §13)",
    ),
    FailureRule(
        "srun_task_exit",
        "srun: error: ",
        re.compile(r"srun: error: \S+: tasks? [\d,\-\[\]]+: (?P<what>.+)"),
        _task_class,
        "srun: error: gpu-node-017: task 0: Exited with exit code 1",
        "slurm src/api/step_launch.c / src/srun/launch.c (docs/FORMATS.md §13)",
    ),
    FailureRule(
        "srun_node_failure",
        "Node failure on ",
        re.compile(r"srun: error: Node failure on \S+"),
        fixed("node_failure"),
        "srun: error: Node failure on gpu-node-017",
        "slurm src/srun/srun_job.c (docs/FORMATS.md §13)",
    ),
    FailureRule(
        "oom_kill_event",
        "kill event",
        re.compile(r"Detected \d+ oom[_-]kill event(?:s|\(s\))? in"),
        fixed("host_oom"),
        "slurmstepd: error: Detected 1 oom_kill event in StepId=1234567.0. Some of the step "
        "tasks have been OOM Killed.",
        "slurm src/plugins/task/cgroup (docs/FORMATS.md §13); before 21.08 'Detected 1 "
        "oom-kill event(s) in step 3495064.0 cgroup.' (public/slurm/hafs_101_oom_kill.log)",
    ),
    FailureRule(
        "srun_step_aborted",
        "srun: ",
        re.compile(
            r"srun: (?:Job step aborted: Waiting up to|Force Terminated |Terminating job step)"
        ),
        fixed("terminated"),
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "slurm src/srun (docs/FORMATS.md §13): srun reacting to an earlier end, a consequence",
        kind=None,
    ),
    FailureRule(
        "lightning_requeue",
        "Requeued SLURM job",
        re.compile(r"Requeued SLURM job: \S+"),
        fixed("restart"),
        "Requeued SLURM job: 1234567",
        "lightning/pytorch/trainer/connectors/signal_connector.py _slurm_sigusr_handler_fn",
        kind=EventKind.RESTART,
    ),
)
