"""Ray's reports of dead workers and actors (Ray-based trainers: verl, OpenRLHF, NeMo-RL).

Ray prints a worker's death from the driver or the raylet, never from the worker itself
(docs/FORMATS.md §18): ``A worker died or was killed while executing a task by an unexpected
system error`` (``python/ray/_private/worker.py``, or ``(raylet)``-prefixed), ``The actor died
unexpectedly before finishing this task`` (``ActorDiedError`` / ``RayActorError``, often inside a
traceback, which ``parsers/traceback.py`` classifies), ``The actor is dead because its worker
process has died`` (the reason that follows), and the raylet's memory monitor ``N Workers (tasks
/ actors) killed due to memory pressure (OOM)``. The cause Ray gives for a lost connection is a
guess ("(1) … OOM killer … (2) ray stop --force … (3) … SIGSEGV"), so those are
``ray_worker_died`` (generic: a specific line of the same burst names the root cause); the
memory monitor's kill is ``host_oom``.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.failure_rule import FailureRule, fixed

PARSER_NAME = "ray"
"""``Event.parser`` of the events of these rules."""

_SOURCE = "ray python/ray/exceptions.py ActorDiedError, _private/worker.py, raylet node_manager.cc"

RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "ray_memory_monitor",
        " killed due to memory pressure (OOM)",
        re.compile(r"\d+ Workers \(tasks / actors\) killed due to memory pressure \(OOM\)"),
        fixed("host_oom"),
        "[2023-04-19 16:22:19,798 E 329 329] (raylet) node_manager.cc:3069: 13 Workers (tasks / "
        "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons",
        "ray raylet node_manager.cc (memory monitor, Ray >= 2.2); public/ray/ray_34695_*",
    ),
    FailureRule(
        "ray_worker_died",
        "A worker died or was killed while executing a task",
        re.compile(r"A worker died or was killed while executing a task by an unexpected"),
        fixed("ray_worker_died"),
        "(raylet) A worker died or was killed while executing a task by an unexpected system "
        "error. To troubleshoot the problem, check the logs for the dead worker.",
        f"{_SOURCE}; public/ray/searchr1_45_raylet_worker_died.log",
    ),
    FailureRule(
        "ray_actor_died",
        "The actor died unexpectedly before finishing",
        re.compile(r"The actor died unexpectedly before finishing this task"),
        fixed("ray_worker_died"),
        "(TaskRunner pid=892962) ray.exceptions.ActorDiedError: The actor died unexpectedly "
        "before finishing this task.",
        f"{_SOURCE}; public/ray/verl_2987_actor_died.log",
    ),
    FailureRule(
        "ray_actor_dead_reason",
        "The actor is dead because its worker process has died",
        re.compile(r"The actor is dead because its worker process has died"),
        fixed("ray_worker_died"),
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
        "Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
        f"{_SOURCE}: the reason printed after the ActorDiedError, an echo of the same death",
    ),
)
