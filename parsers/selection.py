"""Which lines of a buffer a parser must see: the reader's side of :class:`LineFilter`.

Most of a training log is progress-bar redraws that no event comes from. A reader holding a
large buffer of complete lines finds the lines a parser asks for (its
:attr:`StreamParser.line_filter`) with one multi-literal search of the whole buffer, feeds
those, and only counts the rest. :func:`select_lines` implements the contract of
:class:`LineFilter` (parsers/stream.py); it is pure (bytes in, offsets out), the agent does the
reading and the feeding.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterator

import ahocorasick_rs

from ckpt_advisor.parsers.stream import LineFilter, StreamParser

STEP_SAMPLE_BYTES = 256 << 10
"""In a stretch of progress lines (tqdm redraws) with no keyword line, one progress line per this
many bytes is selected, besides the first and the last (see :class:`LineFilter`): the store
keeps a sample of the bar (a step event every few minutes of training), not all of it."""


FEED, RECORD, PROGRESS = 0, 1, 2
"""How :func:`select_lines` asks for a line to be fed: :meth:`StreamParser.feed`,
:meth:`~StreamParser.feed_record` (a keyword line holding none of the filter's ``whole_line``
literals and no ``\\r``, ``\\x1b``, ``%|`` or progress literal) or
:meth:`~StreamParser.feed_progress` (a progress line holding no keyword)."""

_RECORD_BREAKERS = (b"\r", b"\x1b", b"%|")
"""Bytes that keep a keyword line off :meth:`StreamParser.feed_record` whatever the filter:
several pieces, escapes the parser strips, a bar the parser cuts off."""


def select_lines(
    parser: StreamParser,
    data: bytes,
    start: int,
    end: int,
    on_line: Callable[[int, int, int, int], bool],
) -> int:
    """Call ``on_line(line_start, line_stop, number, how)`` for each line of ``data[start:end]``
    that ``parser`` must be fed, in order; return how many lines ``data[start:end]`` holds.
    ``on_line`` returns whether the bar's next state is wanted: an event other than a step (a
    save, a failure, a resume) came after the last ``step`` event (the rules read the first
    step after a save and after an interruption, :func:`parsers.buffers.thin_steps`).

    ``data[start:end]`` is whole lines (``start`` is a line start, ``data[end - 1]`` a
    ``\\n``). ``line_stop`` is the offset of the line's ``\\n``; ``number`` is the line's
    1-based number counted from ``start``; ``how`` is :data:`FEED`, :data:`RECORD` or
    :data:`PROGRESS`. ``on_line`` is expected to feed the line to ``parser`` as ``how`` says:
    the filter is asked again after every keyword line and every line read while the filter is
    ``None`` (then every line is selected, as :data:`FEED`), as :class:`LineFilter` requires.
    Selected are: every line holding a keyword, and of the progress lines between two keyword
    lines the last before every :data:`STEP_SAMPLE_BYTES` boundary, the last, and the first
    while the bar's next state is wanted (and the next ones while it still is: a redraw that
    shows no new step, another bar).

    Keyword lines are found by one search of the whole buffer per keyword set (~3 GB/s, see
    :func:`_matchers`), and so are the lines holding a ``whole_line`` literal; line numbers by
    a mask of the buffer's newlines (:class:`_LineCounter`).
    """
    hits: dict[tuple[bytes, ...], _KeywordLines] = {}
    counter: _LineCounter | None = None
    number, pos = 0, start
    line_filter = parser.line_filter
    first_wanted = True
    while pos < end:
        if line_filter is None:  # every line, one at a time
            stop = data.index(b"\n", pos, end)
            number += 1
            first_wanted = on_line(pos, stop, number, FEED)
            pos = stop + 1
            line_filter = parser.line_filter
            continue
        keywords = _lines_of(hits, line_filter.keywords, data, end)
        if counter is None:
            counter = _LineCounter(data, start, end)
        keyword_line = keywords.next_line(pos)
        markers = line_filter.progress
        progress = _sampled_progress_lines(markers, data, pos, keyword_line)
        if not first_wanted and len(progress) > 1:
            del progress[0]
        i = 0
        while i < len(progress):
            line_start = progress[i]
            pos = data.index(b"\n", line_start, end)
            number = counter.before(line_start) + 1
            first_wanted = on_line(line_start, pos, number, PROGRESS)
            pos += 1
            i += 1
            if first_wanted:  # this redraw showed no step yet: the next one is wanted too
                at = _nearest(
                    markers,
                    data,
                    pos,
                    progress[i] if i < len(progress) else keyword_line,
                    last=False,
                )
                if at >= 0:
                    progress.insert(i, data.rfind(b"\n", pos, at) + 1 or pos)
        pos = keyword_line
        number = counter.before(pos)
        if pos < end:
            stop = data.index(b"\n", pos, end)
            number += 1
            first_wanted = on_line(pos, stop, number, _how(hits, line_filter, data, pos, stop, end))
            pos = stop + 1
            line_filter = parser.line_filter
    return number


def _lines_of(
    hits: dict[tuple[bytes, ...], _KeywordLines], literals: tuple[bytes, ...], data: bytes, end: int
) -> _KeywordLines:
    """The lines of ``data[:end]`` holding one of ``literals``, searched once per buffer."""
    found = hits.get(literals)
    if found is None:
        found = hits[literals] = _KeywordLines(literals, data, end)
    return found


def _how(
    hits: dict[tuple[bytes, ...], _KeywordLines],
    line_filter: LineFilter,
    data: bytes,
    pos: int,
    stop: int,
    end: int,
) -> int:
    """:data:`RECORD` for the keyword line ``data[pos:stop]`` if the filter allows it, else
    :data:`FEED`."""
    if line_filter.whole_line is None:
        return FEED
    line = data[pos:stop]
    if any(b in line for b in _RECORD_BREAKERS) or any(m in line for m in line_filter.progress):
        return FEED
    whole = _lines_of(hits, line_filter.whole_line, data, end)
    return FEED if whole.holds(pos, stop) else RECORD


@functools.lru_cache(maxsize=64)
def _matchers(keywords: tuple[bytes, ...]) -> tuple[ahocorasick_rs.BytesAhoCorasick, ...]:
    """Multi-literal searchers for the keywords of two bytes or more, together holding each
    once (none if there is none).

    Leftmost-first matching lets the library use its SIMD prefilter (Teddy), ~3 GB/s where
    ``re`` with an alternation does ~70 MB/s. That prefilter takes at most
    :data:`PREFILTER_MAX_KEYWORDS` literals: the HF parser's 74 in one searcher ran at ~160
    MB/s, in two of 37 at ~700 MB/s (64 MB of the bench's log, a loaded machine), so the
    keywords are dealt into as few even parts as keep each within it. One single-byte keyword
    (``b"\x1b"``) among them turns the prefilter off (~450 MB/s), so those are searched apart
    (:func:`_byte_hits`). Keywords hold no newline, so every line holding one gets a match
    start in some part: the union of the parts' starts finds the same lines as one searcher."""
    long = [k for k in keywords if len(k) > 1]
    parts = -(-len(long) // PREFILTER_MAX_KEYWORDS)
    size = -(-len(long) // parts) if parts else 0
    return tuple(
        ahocorasick_rs.BytesAhoCorasick(
            long[i : i + size], matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
        )
        for i in range(0, len(long), size or 1)
    )


PREFILTER_MAX_KEYWORDS = 64
"""Most literals one searcher takes with its SIMD prefilter on (the aho-corasick crate's packed
Teddy searcher; measured: 64 at ~2.4 GB/s, 74 at ~160 MB/s)."""


def _byte_hits(data: bytes, byte: bytes, end: int) -> Iterator[int]:
    """Offsets of ``byte`` in ``data[:end]``: ``bytes.find`` is memchr, ~10 GB/s."""
    at = data.find(byte, 0, end)
    while at >= 0:
        yield at
        at = data.find(byte, at + 1, end)


class _KeywordLines:
    """The keyword lines of one buffer, found by one search of the whole buffer per kind of
    keyword (multi-byte ones in a few searchers, :func:`_matchers`; each single byte apart)."""

    def __init__(self, keywords: tuple[bytes, ...], data: bytes, end: int) -> None:
        self._data, self._end = data, end
        starts = [
            s
            for matcher in _matchers(keywords)
            for _, s, _ in matcher.find_matches_as_indexes(data)
            if s < end
        ]
        for byte in (k for k in keywords if len(k) == 1):
            starts.extend(_byte_hits(data, byte, end))
        starts.sort()
        self._starts = starts
        self._next = 0

    def holds(self, pos: int, stop: int) -> bool:
        """Whether a keyword starts in ``data[pos:stop]`` (asked at growing ``pos``, after
        :meth:`next_line` or alone)."""
        starts = self._starts
        i = bisect.bisect_left(starts, pos, self._next)
        self._next = i
        return i < len(starts) and starts[i] < stop

    def next_line(self, pos: int) -> int:
        """Start of the first keyword line at or after line start ``pos``, else the end."""
        starts = self._starts
        i = bisect.bisect_left(starts, pos, self._next)
        self._next = i
        if i == len(starts):
            return self._end
        return self._data.rfind(b"\n", pos, starts[i]) + 1 or pos


SHORT_COUNT_BYTES = 16 << 10
"""Up to this many bytes, :meth:`_LineCounter.before` counts newlines with ``bytes.count``."""


class _LineCounter:
    """Line numbers in ``data[start:end]``: a numpy mask of its newlines (~4 GB/s), counted
    between offsets that only grow (~16 GB/s), where ``bytes.count`` goes at ~1.3 GB/s."""

    def __init__(self, data: bytes, start: int, end: int) -> None:
        import numpy as np  # loaded already wherever there is a reader: the estimator needs it

        self._data = data
        self._mask = np.frombuffer(data, np.uint8, count=end - start, offset=start) == ord("\n")
        self._count = np.count_nonzero
        self._start = start
        self._pos = self._before = 0

    def before(self, offset: int) -> int:
        """How many lines end between ``start`` and buffer ``offset`` (fastest for offsets in
        growing order). A short step is counted by ``bytes.count`` (memchr, no numpy call:
        ~0.3 µs where slicing the mask costs ~2 µs; an event-dense log asks every few lines)."""
        pos = offset - self._start
        if pos < self._pos:
            self._pos = self._before = 0
        if pos - self._pos <= SHORT_COUNT_BYTES:
            self._before += self._data.count(b"\n", self._start + self._pos, offset)
        else:
            self._before += int(self._count(self._mask[self._pos : pos]))
        self._pos = pos
        return self._before


def _nearest(markers: tuple[bytes, ...], data: bytes, lo: int, hi: int, *, last: bool) -> int:
    """Offset of the first (or, with ``last``, the last) marker in ``data[lo:hi]``, else -1.

    The window grows from the near end, so a marker a line away costs a short scan even when
    another marker (``it/s`` where the bar shows ``s/it``) is nowhere in the buffer."""
    width = 4096
    while True:
        w_lo, w_hi = (max(lo, hi - width), hi) if last else (lo, min(hi, lo + width))
        found = [at for at in (_find(data, m, w_lo, w_hi, last) for m in markers) if at >= 0]
        if found:
            return max(found) if last else min(found)
        if w_hi - w_lo == hi - lo:
            return -1
        width *= 4


def _find(data: bytes, marker: bytes, lo: int, hi: int, last: bool) -> int:
    return data.rfind(marker, lo, hi) if last else data.find(marker, lo, hi)


def _sampled_progress_lines(markers: tuple[bytes, ...], data: bytes, lo: int, hi: int) -> list[int]:
    """Starts of the progress lines to select in ``data[lo:hi]`` (whole lines, none holding a
    keyword): the first, the last before every :data:`STEP_SAMPLE_BYTES` boundary, the last."""
    if not markers or lo >= hi:
        return []

    def line_start(at: int) -> int:
        return data.rfind(b"\n", lo, at) + 1 or lo

    if hi - lo <= min(SHORT_COUNT_BYTES, STEP_SAMPLE_BYTES):  # a few lines: two direct scans
        firsts = [at for at in (data.find(m, lo, hi) for m in markers) if at >= 0]
        if not firsts:
            return []
        first_start = line_start(min(firsts))
        last_start = line_start(max(data.rfind(m, lo, hi) for m in markers))
        return [first_start] if last_start == first_start else [first_start, last_start]
    first = _nearest(markers, data, lo, hi, last=False)
    if first < 0:
        return []
    starts = [line_start(first)]
    bound = lo + STEP_SAMPLE_BYTES
    while True:
        bound = min(bound, hi)
        at = _nearest(markers, data, starts[-1], bound, last=True)
        if at >= 0 and (start := line_start(at)) > starts[-1]:
            starts.append(start)
        if bound == hi:
            return starts
        bound += STEP_SAMPLE_BYTES
