"""One buffer of a log file's complete lines to events: the reader's parsing, backfill and live.

:func:`parse_buffer` feeds a parser the lines of a buffer that its :class:`LineFilter` asks for
(:func:`parsers.selection.select_lines`), each the way the selection says (whole, as a record
the stack takes alone, as a bar redraw), and thins the bar's ``step`` samples
(:func:`thin_steps`). The daemon's tail and ``ingest`` both read through it
(``agent/tail/reader.py``), so a live file and its backfill give the same events; pure (bytes
in, events out).
"""

from __future__ import annotations

from collections.abc import Callable

from ckpt_advisor.parsers import selection
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.selection import FEED, PROGRESS, RECORD, select_lines
from ckpt_advisor.parsers.stream import StreamParser


def parse_buffer(
    parser: StreamParser,
    data: bytes,
    start: int,
    end: int,
    first_line: int,
    *,
    max_line_bytes: int,
    on_skipped: Callable[[int, int, int], None],
) -> tuple[int, list[tuple[int, list[Event]]]]:
    """Feed ``parser`` the lines of ``data[start:end]`` (whole lines) that it asks for; return
    how many lines that is and ``(line_start, events)`` for the lines that gave events, in
    order, with the bar's steps thinned (:func:`thin_steps`).

    ``first_line``: the number of the line before ``data[start]`` (lines are numbered from it
    plus one). A selected line longer than ``max_line_bytes`` is not fed: ``on_skipped(
    line_start, line_stop, lineno)`` is called instead (offsets in ``data``).
    """
    parser = parser.target  # an auto parser's chosen one: a call less per line, same events
    feeds = {FEED: parser.feed, RECORD: parser.feed_record, PROGRESS: parser.feed_progress}
    fed: list[tuple[int, bool, list[Event]]] = []
    step_wanted = True  # a buffer's first bar state is taken: what came before is not known

    def feed(line_start: int, stop: int, number: int, how: int) -> bool:
        nonlocal step_wanted
        lineno = first_line + number
        if stop - line_start > max_line_bytes:
            on_skipped(line_start, stop, lineno)
            return step_wanted
        events = feeds[how](data[line_start:stop].decode("utf-8", "replace"), lineno)
        if events:
            fed.append((line_start, how == PROGRESS, events))
            step_wanted = events[-1].kind is not EventKind.STEP
        return step_wanted

    lines = select_lines(parser, data, start, end, feed)
    return lines, thin_steps(fed)


_PROGRESS_KINDS = frozenset((EventKind.STEP, EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END))
"""Events that show training advancing (``rules.timeline.PROGRESS_KINDS``)."""


def thin_steps(fed: list[tuple[int, bool, list[Event]]]) -> list[tuple[int, list[Event]]]:
    """The events of one buffer's fed lines with the bar's ``step`` events thinned.

    ``fed`` is ``(line_start, progress, events)`` per fed line, in order; ``progress`` marks a
    line fed as :data:`PROGRESS` (a bar redraw), whose ``step`` event is a sample of the bar.
    Such a step is kept when it is what the rules read from the bar: the first step after any
    other event (after a save: its cost's upper bound, ``rules/bounds.py``; after a failure or
    a resume: the restart's end, ``rules/progress.py``), the last step before an event other
    than a save (progress before a failure: ``rules/interruptions.py``); or when it is the
    first or the last step of the buffer, or at least
    :data:`~parsers.selection.STEP_SAMPLE_BYTES` after the last step kept. Every other event
    is kept. Returns ``(line_start, events)`` for the lines left with events.
    """
    sample_bytes = selection.STEP_SAMPLE_BYTES
    keep: set[int] = set()
    last_step: int | None = None
    after_other = True  # the buffer's first step is kept
    kept_at = -sample_bytes
    for i, (line_start, progress, events) in enumerate(fed):
        for event in events:
            if event.kind is EventKind.STEP:
                if not progress or after_other or line_start - kept_at >= sample_bytes:
                    keep.add(i)
                    kept_at = line_start
                after_other, last_step = False, i
                continue
            after_other = True
            if event.kind not in _PROGRESS_KINDS and last_step is not None:
                keep.add(last_step)
    if last_step is not None:
        keep.add(last_step)
    out: list[tuple[int, list[Event]]] = []
    for i, (line_start, progress, events) in enumerate(fed):
        if progress and i not in keep:
            events = [event for event in events if event.kind is not EventKind.STEP]
        if events:
            out.append((line_start, events))
    return out
