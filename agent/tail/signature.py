"""Is a parser's state at a line the same as another's? The check that lets a backfill on
several cores keep a range parsed by a parser that did not read the whole file before it.

A parser is a deterministic function of its state and the lines it is fed, so two parsers of
one file with equal states at a line give the same events from there on. :func:`state_signature`
makes the whole state a value that can be compared across processes.
"""

from __future__ import annotations

import enum
import os
import re
import types
from collections import deque
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

import ahocorasick_rs

from ckpt_advisor.agent.tail.followed import OpenFile
from ckpt_advisor.parsers.failures import DEDUP_LINES, FailureLines
from ckpt_advisor.parsers.logs import LogParser
from ckpt_advisor.parsers.registry import StackCandidate
from ckpt_advisor.parsers.stream import Diagnostics
from ckpt_advisor.parsers.timestamps import LocalZone
from ckpt_advisor.parsers.traceback import TracebackTracker

_OPAQUE = (ahocorasick_rs.AhoCorasick, ahocorasick_rs.BytesAhoCorasick)
"""Objects a signature takes by type alone: immutable searchers, each built from literals that
are themselves part of the state (``LogParser._keywords``)."""


def state_signature(f: OpenFile) -> object:
    """Every field reachable from ``f``'s parser and file clock, as nested tuples: two readers of
    one file whose signatures are equal at a line give the same events from there on.

    Left out, since no event depends on them: the miss counters and recent-error lists
    (:class:`parsers.stream.Diagnostics`, write-only), the file clock's mtime function and the
    mtime it last read (the file's, whatever its descriptor), and memory that can no longer
    act after this line (:func:`_live`). Objects are walked through ``__dict__`` and
    ``__slots__``, functions through their closure and bound instance, so a field added to any
    parser is compared without being named here; an object of a kind not known here makes the
    signature unique (never equal): the range falls back to a sequential read."""
    return (_canon(f.parser, {}, f.lineno), f.clock.last_stamp, f.clock.ahead_reported)


def _live(obj: object, lineno: int) -> tuple[set[str], object]:
    """The fields of ``obj`` replaced in its signature at line ``lineno`` (the last line fed),
    and what replaces them: the part that can still act on a later line, as a value.

    * A failure recogniser with no traceback or banner open dates every later failure at a
      later line; a remembered family (``_seen``: its last line) or unplanned failure
      (``_last_failure``) only acts on a failure within ``DEDUP_LINES`` of its line, one
      further back acts as if absent (the next failure of the family is reported and takes
      its place) (``parsers/failures.py``, "One interruption, few events").
    * A traceback tracker's ``_tail_until`` (a bare exception line is not a new failure up to
      that line) acts only on a later line up to it.

    Both are only looked up by key: their order is not state.

    A log parser's memo of lines that change nothing (``LogParser._remember_inert``) is left
    out: with or without an entry, a line gives the same events. So is a stack candidate's
    built stack (``StackCandidate._stack``): until it is detected it has only been asked
    whether it detects a piece, which reads no state, and a reader that started later may not
    have needed it yet. So is a local zone's memo of the last whole second it read
    (``LocalZone._second``): a stamp reads the same with or without it."""
    if isinstance(obj, LogParser):
        return {"_inert"}, None
    if isinstance(obj, StackCandidate):
        return {"_stack"}, None
    if isinstance(obj, LocalZone):
        return {"_second"}, None
    if isinstance(obj, FailureLines) and not obj.active:
        horizon = lineno + 1 - DEDUP_LINES
        seen = sorted((k, v) for k, v in obj._seen.items() if v[0] >= horizon)
        last = obj._last_failure
        return {"_seen", "_last_failure"}, (seen, last if last and last[0] >= horizon else None)
    if isinstance(obj, TracebackTracker):
        return {"_tail_until"}, sorted((k, v) for k, v in obj._tail_until.items() if v > lineno)
    return set(), None


def _canon(obj: Any, memo: dict[int, int], lineno: int) -> object:
    if obj is None or isinstance(obj, bool | int | float | str | bytes | enum.Enum):
        return obj
    if isinstance(obj, datetime | date | timedelta):
        return (type(obj).__name__, obj, str(getattr(obj, "tzinfo", None)))
    if isinstance(obj, re.Pattern):
        return ("re", obj.pattern, obj.flags)
    if isinstance(obj, Diagnostics):
        return "diagnostics"
    if id(obj) in memo:
        return ("ref", memo[id(obj)])
    memo[id(obj)] = len(memo)
    if isinstance(obj, list | tuple | deque):
        return (type(obj).__name__, *(_canon(x, memo, lineno) for x in obj))
    if isinstance(obj, dict):
        items = ((_canon(k, memo, lineno), _canon(v, memo, lineno)) for k, v in obj.items())
        return ("dict", *items)
    if isinstance(obj, set | frozenset):
        return ("set", frozenset(_canon(x, memo, lineno) for x in obj))
    if isinstance(obj, types.MethodType):
        return ("method", obj.__func__.__qualname__, _canon(obj.__self__, memo, lineno))
    if isinstance(obj, types.FunctionType):
        cells = tuple(_canon(c.cell_contents, memo, lineno) for c in obj.__closure__ or ())
        return ("function", obj.__module__, obj.__qualname__, cells)
    kind = type(obj)
    if isinstance(obj, _OPAQUE):
        return ("opaque", kind.__qualname__)
    if isinstance(obj, type):
        return ("class", obj.__module__, obj.__qualname__)
    if kind.__module__.split(".")[0] != "ckpt_advisor":
        if isinstance(obj, tzinfo):  # a ZoneInfo, UTC: immutable, known by name
            return ("tz", str(obj))
        return ("unknown", id(obj), os.getpid())  # equal to nothing from another process
    skip, extra = _live(obj, lineno)
    skip.add("__weakref__")
    names = {*getattr(obj, "__dict__", {})}
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    fields = sorted(n for n in names if n not in skip and hasattr(obj, n))
    walked = ((n, _canon(getattr(obj, n), memo, lineno)) for n in fields)
    return (kind.__module__, kind.__qualname__, extra, *walked)
