"""torchrun / torch.distributed.elastic: launches, restarts, worker deaths and the ChildFailedError
banner.

A launch gives a ``run_start`` (its first start line only: the banner and the launch configs of
one launch are one start, ``parsers/failures.py``): ``Setting OMP_NUM_THREADS environment
variable for each process to be 1 in default, …`` (``torch/distributed/run.py``, at WARNING:
the line a default torchrun prints) or ``Starting elastic_operator with launch configs:``
(``torch/distributed/launcher/api.py``, at INFO). A restart of the same launch prints neither:
its ``Worker group FAILED. … will restart`` line gives the ``restart``.

Messages from ``torch/distributed/elastic/agent/server/api.py`` and
``multiprocessing/api.py`` (docs/FORMATS.md §10), in every prefix generation: torch ≤2.1
``WARNING:torch.distributed.elastic.multiprocessing.api:``, 2.2–2.3
``[2024-05-08 08:47:31,261] torch.distributed.elastic…: [WARNING]``, ≥2.4
``W1129 23:02:56.390000 15009 torch/distributed/elastic/multiprocessing/api.py:1028]`` (real,
tests/parsers/fixtures/torch/). The prefix gives the time (``parsers/failures.py``).

The banner that ``ChildFailedError`` prints (``multiprocessing/errors/__init__.py``) is read by
:class:`ChildFailedBanner`: one failure, at the ``ChildFailedError`` line, timed by the Root
Cause's ``time :`` field, classified by its ``traceback :`` field (``Signal 6 (SIGABRT)
received by PID …``, or the worker's own traceback when ``@record`` wrote ``error.json``), else
``child_failed``.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.failure_rule import FailureRule, fixed
from ckpt_advisor.parsers.timestamps import parse_elastic_time
from ckpt_advisor.parsers.traceback import classify_failure
from ckpt_advisor.parsers.vocabulary import GENERIC_CLASSES, exit_code_class, signal_class

PARSER_NAME = "torchrun"

RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "launch_threads_banner",
        "Setting OMP_NUM_THREADS environment variable for each process to be ",
        re.compile(
            r"(?<!Warning: )Setting OMP_NUM_THREADS environment variable for each process to be "
            r"\S+ in default"
        ),
        fixed("run_start"),
        "W1129 23:02:42.256000 15009 torch/distributed/run.py:874] Setting OMP_NUM_THREADS "
        "environment variable for each process to be 1 in default, to avoid your system being "
        "overloaded, please further tune the variable for optimal performance in your "
        "application as needed. ",
        "torch/distributed/run.py config_from_args, torch 1.9-2.13 (torch.distributed.launch "
        "≤1.8 print()ed it): once a launch, at WARNING, when nproc_per_node > 1 and "
        "OMP_NUM_THREADS is unset (fixtures/torch/); mmcv's copy is a worker's UserWarning",
        kind=EventKind.RUN_START,
    ),
    FailureRule(
        "launch_configs",
        "Starting elastic_operator with launch configs:",
        re.compile(r"Starting elastic_operator with launch configs:"),
        fixed("run_start"),
        "I1129 23:14:45.671000 23141 torch/distributed/launcher/api.py:254] Starting "
        "elastic_operator with launch configs:",
        "torch/distributed/launcher/api.py launch_agent, torch 1.9-2.13: once a launch, at INFO "
        "(fixtures/torch/torchrun_restart.log)",
        kind=EventKind.RUN_START,
    ),
    FailureRule(
        "worker_group_restart",
        "attempts left; will restart worker group",
        re.compile(r"Worker group (?:FAILED|UNHEALTHY)\. \d+/\d+ attempts left; will restart"),
        fixed("child_failed"),
        "W1129 23:04:27.003000 16649 torch/distributed/elastic/agent/server/api.py:725] [default] "
        "Worker group FAILED. 1/1 attempts left; will restart worker group",
        "torch/distributed/elastic/agent/server/api.py, torch 1.9-2.13: a worker died (an "
        "interruption, even when the worker's own output is elsewhere) and the group restarts",
        restarts=True,
    ),
    FailureRule(
        "worker_group_failed",
        "] Worker group failed",
        re.compile(r"\] Worker group failed\s*$"),
        fixed("child_failed"),
        "ERROR:torch.distributed.elastic.agent.server.local_elastic_agent:[default] Worker group "
        "failed",
        "torch/distributed/elastic/agent/server/local_elastic_agent.py, torch 1.9-2.0 "
        "(public/torchrun/pseco_15_worker_group_failed.log)",
    ),
    FailureRule(
        "group_finished_failed",
        "worker group finished (FAILED)",
        re.compile(r"[Ll]ocal worker group finished \((?:WorkerState\.)?FAILED\)"),
        fixed("child_failed"),
        "INFO:torch.distributed.elastic.agent.server.api:Local worker group finished (FAILED). "
        "Waiting 300 seconds for other agents to finish",
        "torch/distributed/elastic/agent/server/api.py _exit_barrier: a consequence",
        kind=None,
    ),
    FailureRule(
        "membership_restart",
        "; will restart worker group",
        re.compile(r"Detected \d+ new nodes from group_rank=\d+; will restart worker group"),
        fixed("restart"),
        "[default] Detected 1 new nodes from group_rank=0; will restart worker group",
        "torch/distributed/elastic/agent/server/api.py (docs/FORMATS.md §10)",
        kind=EventKind.RESTART,
    ),
    FailureRule(
        "worker_failed",
        "failed (exitcode: ",
        re.compile(r"failed \(exitcode: (?P<code>-?\d{1,4})\) local_rank: \d+"),
        lambda m: exit_code_class(int(m["code"])),
        "E1129 23:03:27.364000 15650 torch/distributed/elastic/multiprocessing/api.py:1002] "
        "failed (exitcode: -9) local_rank: 1 (pid: 15670) of binary: /opt/venv/bin/python3",
        "torch/distributed/elastic/multiprocessing/api.py, torch 2.13 (fixtures/torch/)",
    ),
    FailureRule(
        "death_signal",
        " death signal, shutting down workers",
        re.compile(r"Received (?:Signals\.)?(?P<sig>SIG[A-Z]+|\d+) death signal, shutting down"),
        lambda m: signal_class(int(m["sig"]) if m["sig"].isdigit() else m["sig"]),
        "W0801 13:23:17.366000 32974 torch/distributed/elastic/agent/server/api.py:704] "
        "Received 15 death signal, shutting down workers",
        "torch/distributed/elastic/agent/server/api.py (docs/FORMATS.md §10); ``%s`` of a"
        " signal.Signals prints ``Signals.SIGTERM`` before Python 3.11, ``15`` since",
    ),
    FailureRule(
        "closing_signal",
        " closing signal ",
        re.compile(r"Sending process \d+ closing signal SIG[A-Z]+"),
        fixed("terminated"),
        "W1129 23:03:27.249000 15650 torch/distributed/elastic/multiprocessing/api.py:1028] "
        "Sending process 15668 closing signal SIGTERM",
        "torch/distributed/elastic/multiprocessing/api.py, torch 2.13: the launcher stopping "
        "the surviving workers, a consequence",
        kind=None,
    ),
    FailureRule(
        "forced_exit",
        "forcefully exiting via",
        re.compile(r"Unable to shutdown process \d+ via \S+, forcefully exiting via"),
        fixed("killed"),
        "Unable to shutdown process 5938 via Signals.SIGTERM, forcefully exiting via "
        "Signals.SIGKILL",
        "torch/distributed/elastic/multiprocessing/api.py (docs/FORMATS.md §10): a consequence",
        kind=None,
    ),
)


def is_launch(event: Event) -> bool:
    """Whether ``event`` is a launch start of this table (``launch_threads_banner``,
    ``launch_configs``). Its stamp dates the launch only: the job's own lines after it may run
    for days before the next printed time, so no reader dates an untimed line by it (not the
    file's clock, ``parsers/logs.py``, nor the store's, ``agent/tail/dating.py``)."""
    return event.kind is EventKind.RUN_START and event.parser == PARSER_NAME


BANNER_START = "ChildFailedError"
_ROOT_CAUSE = "Root Cause (first observed failure):"
_FIELD = re.compile(r"\s+(?P<name>time|exitcode|traceback)\s*: (?P<value>.*)")
_SIGNAL = re.compile(r"Signal (?P<n>\d+) \(SIG[A-Z]+\) received by PID")
_RULE = re.compile(r"={20,}")
MAX_BANNER_LINES = 400
"""A banner longer than this is taken as cut short and reported as read so far."""


class ChildFailedBanner:
    """State machine over the lines after ``ChildFailedError:`` (see the module docstring)."""

    def __init__(self, lineno: int, step: int | None) -> None:
        self.line = lineno
        self.step = step
        self._rules_seen = 0
        self._in_root = False
        self._in_traceback = False
        self._time_text: str | None = None
        self._exitcode: int | None = None
        self._traceback: list[str] = []

    def feed(self, body: str, lineno: int) -> bool:
        """Take one line of the banner; return True when the banner is over."""
        if _RULE.fullmatch(body.strip()):
            self._rules_seen += 1
            return self._rules_seen >= 2 or (self._in_root and bool(self._time_text))
        if body.strip() == _ROOT_CAUSE:
            self._in_root = True
            return False
        if not self._in_root:
            return lineno - self.line > MAX_BANNER_LINES
        field = _FIELD.match(body)
        if field is not None:
            self._in_traceback = field["name"] == "traceback"
            value = field["value"].strip()
            if field["name"] == "time":
                self._time_text = value
            elif field["name"] == "exitcode":
                code = value.split(" ", 1)[0]
                self._exitcode = int(code) if code.lstrip("-").isdigit() else None
            else:
                self._traceback.append(value)
        elif self._in_traceback:
            self._traceback.append(body.strip())
        return lineno - self.line > MAX_BANNER_LINES

    def event(self, tz: tzinfo) -> Event:
        """The root cause as one failure event."""
        time: datetime | None = None
        if self._time_text:
            try:
                time = parse_elastic_time(self._time_text, tz)
            except ValueError:
                time = None
        return Event(
            EventKind.FAILURE,
            self.line,
            PARSER_NAME,
            time=time,
            step=self.step,
            failure_class=self._class(),
            detail=" ".join(self._traceback)[:200] or None,
        )

    def _class(self) -> str:
        text = " ".join(self._traceback)
        signal = _SIGNAL.search(text)
        if signal is not None:
            return signal_class(int(signal["n"]))
        found = [c.name for c in map(classify_failure, self._traceback) if c is not None]
        specific = [name for name in found if name not in GENERIC_CLASSES]
        if specific or found:
            return (specific or found)[0]
        if self._exitcode is not None and self._exitcode < 0:
            return exit_code_class(self._exitcode)
        return "child_failed"
