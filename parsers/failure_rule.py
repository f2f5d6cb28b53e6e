"""One line that tells a job was interrupted (or restarted, or launched): the table entry of a
failure rule.

Rule tables live in ``parsers/launcher.py`` (torchrun), ``parsers/nccl.py`` (c10d, NCCL, C++
aborts), ``parsers/slurm.py``, ``parsers/kernel.py`` (NVIDIA Xid, Linux OOM killer),
``parsers/shell.py`` (deaths the shell or a supervisor reports), ``parsers/ray.py`` and
``parsers/error_records.py`` (any logger's ERROR record carrying a known failure text);
``parsers/failures.py`` runs them over every log line whatever the training stack.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo

from ckpt_advisor.parsers.events import EventKind


@dataclass(frozen=True, slots=True)
class FailureRule:
    """One message, searched anywhere in a record piece (after any prefix).

    Attributes:
        name: short identifier, unique over all tables.
        keyword: a literal present in every line the regex matches (prefilter).
        regex: searched in the piece; an optional ``time`` group is the event's time, read
            with ``parse_time``.
        classify: the match to a ``failure_class`` (see ``parsers/vocabulary.py``), or ``None``
            when this match is not the rule's message after all (the piece goes on).
        sample: a real line with this message (docs/FORMATS.md, a capture under
            tests/parsers/fixtures/ or a public paste under tests/parsers/fixtures/public/).
        source: the file and version that prints it.
        kind: ``FAILURE``, ``RESTART``, ``RUN_START`` (a launcher starting the job: torchrun's
            launch banner), or ``None`` for a line that is recognised but is a consequence of
            an earlier failure (``Sending process … closing signal SIGTERM``): it gives no
            event.
        parse_time: ``parse_time(time_text, tz)`` → aware UTC datetime, raising ValueError.
        restarts: the line also says the job is being restarted (torchrun's ``Worker group
            FAILED. 2/3 attempts left; will restart worker group``): a ``restart`` event follows
            its failure.
        incident: the part of a match that tells two incidents of one class apart on nearby
            lines (an Xid's ``pid``): failures of one family with different values are not
            echoes of each other (``parsers/failures.py``).
        echo_after_failure: ``True`` for a match that, printed right after an unplanned
            failure, is its consequence rather than a cause of its own (Slurm's ``*** STEP …
            CANCELLED AT …`` with no reason, after ``srun: error: …: task 4: Out Of Memory``):
            it then gives no event.
    """

    name: str
    keyword: str
    regex: re.Pattern[str]
    classify: Callable[[re.Match[str]], str | None]
    sample: str
    source: str
    kind: EventKind | None = EventKind.FAILURE
    parse_time: Callable[[str, tzinfo], datetime] | None = None
    restarts: bool = False
    incident: Callable[[re.Match[str]], str] | None = None
    echo_after_failure: Callable[[re.Match[str]], bool] | None = None


def fixed(failure_class: str) -> Callable[[re.Match[str]], str]:
    """A ``classify`` that always gives ``failure_class``."""
    return lambda _m: failure_class
