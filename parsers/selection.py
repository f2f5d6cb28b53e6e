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
import itertools
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
    :func:`_matchers`), and so are the lines holding a ``whole_line`` literal; line numbers
    from the buffer's newlines (:class:`_Lines`).
    """
    lines = _Lines(data, start, end)
    stops, count = lines.stops, len(lines.stops)
    i = 0  # index of the next line to look at
    line_filter = parser.line_filter
    last_filter: LineFilter | None = None
    first_wanted = True
    while i < count:
        if line_filter is None:  # every line, one at a time
            first_wanted = on_line(lines.start(i), stops[i], i + 1, FEED)
            i += 1
            line_filter = parser.line_filter
            continue
        if line_filter is not last_filter:
            keywords, last_filter = lines.held(line_filter.keywords), line_filter
        k = keywords.next(i)
        if k > i:  # progress lines may lie before the keyword line (a save's lines: none)
            markers = line_filter.progress
            gap_end = lines.start(k) if k < count else end
            progress = _sampled_progress_lines(markers, data, lines.start(i), gap_end)
            if not first_wanted and len(progress) > 1:
                del progress[0]
            j = 0
            while j < len(progress):
                at = lines.index_of(progress[j])
                first_wanted = on_line(progress[j], stops[at], at + 1, PROGRESS)
                j += 1
                if first_wanted:  # this redraw showed no step yet: the next one is wanted too
                    hi = progress[j] if j < len(progress) else gap_end
                    found = _nearest(markers, data, stops[at] + 1, hi, last=False)
                    if found >= 0:
                        progress.insert(j, lines.start(lines.index_of(found)))
        if k < count:
            first_wanted = on_line(lines.start(k), stops[k], k + 1, _how(lines, line_filter, k))
            line_filter = parser.line_filter
        i = k + 1
    return count


def _how(lines: _Lines, line_filter: LineFilter, k: int) -> int:
    """:data:`RECORD` for the keyword line ``k`` if the filter allows it, else :data:`FEED`."""
    if line_filter.whole_line is None:
        return FEED
    data, start, stop = lines.data, lines.start(k), lines.stops[k]
    # bytes.find, not ``in``: ``literal in line`` first tries the literal as an int and
    # raises and clears a TypeError (~2,400 instructions a test, CPython 3.11
    # ``_Py_bytes_contains``), and no slice of the line is copied
    for literal in _RECORD_BREAKERS:
        if data.find(literal, start, stop) >= 0:
            return FEED
    for literal in line_filter.progress:
        if data.find(literal, start, stop) >= 0:
            return FEED
    return FEED if k in lines.held(line_filter.whole_line).lines else RECORD


class _Lines:
    """The lines of ``data[start:end]`` (whole lines): their newlines (a numpy mask of the
    buffer, ~4 GB/s) and, per literal set, the lines holding one (one search of the whole
    buffer per set, see :func:`_matchers`), as line indices in order."""

    def __init__(self, data: bytes, start: int, end: int) -> None:
        import numpy as np  # loaded already wherever there is a reader: the estimator needs it

        self._np = np
        self.data, self._start, self._end = data, start, end
        mask = np.frombuffer(data, np.uint8, count=end - start, offset=start) == ord("\n")
        self._newlines = np.flatnonzero(mask) + start
        self.stops: list[int] = self._newlines.tolist()
        """Offset of each line's ``\\n``."""
        self._holding: dict[tuple[bytes, ...], _Held] = {}
        self._asked: tuple[tuple[bytes, ...], _Held] | None = None
        """The set asked for last and its lines: the same tuple is answered again without
        hashing its ~65 literals (asked for at every keyword line :func:`_how` reads)."""

    def start(self, i: int) -> int:
        """Offset of line ``i``'s first byte."""
        return self.stops[i - 1] + 1 if i else self._start

    def index_of(self, offset: int) -> int:
        """Index of the line holding buffer ``offset``."""
        return bisect.bisect_left(self.stops, offset)

    def held(self, literals: tuple[bytes, ...]) -> _Held:
        """The lines holding one of ``literals``, searched once per buffer."""
        asked = self._asked
        if asked is not None and asked[0] is literals:
            return asked[1]
        found = self._holding.get(literals)
        if found is None:
            data, start, end = self.data, self._start, self._end
            starts = [
                s
                for matcher in _matchers(literals)
                for _, s, _ in matcher.find_matches_as_indexes(data)
                if start <= s < end
            ]
            for byte in (k for k in literals if len(k) == 1):
                starts.extend(s for s in _byte_hits(data, byte, end) if s >= start)
            np = self._np
            held = np.unique(np.searchsorted(self._newlines, np.asarray(starts, np.int64)))
            found = self._holding[literals] = _Held(held.tolist(), len(self.stops))
        self._asked = (literals, found)
        return found


class _Held:
    """The indices of a buffer's lines that hold one of some literals (:meth:`_Lines.held`)."""

    def __init__(self, indices: list[int], count: int) -> None:
        self._indices, self._count, self._cursor = indices, count, 0
        self.lines = set(indices)

    def next(self, i: int) -> int:
        """The first such line at or after line ``i`` (asked at growing ``i``), else the
        buffer's line count."""
        indices = self._indices
        at = self._cursor = bisect.bisect_left(indices, i, self._cursor)
        return indices[at] if at < len(indices) else self._count


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
    start in some part: the union of the parts' starts finds the same lines as one searcher.
    Only :func:`_searched` keywords are searched."""
    long = _searched(keywords)
    parts = -(-len(long) // PREFILTER_MAX_KEYWORDS)
    size = -(-len(long) // parts) if parts else 0
    return tuple(
        ahocorasick_rs.BytesAhoCorasick(
            long[i : i + size], matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
        )
        for i in range(0, len(long), size or 1)
    )


def _searched(keywords: tuple[bytes, ...]) -> list[bytes]:
    """The keywords of two bytes or more that :func:`_matchers` searches: not one holding
    another keyword, since a line holding the longer one holds the shorter one too, so the
    same lines are found (the HF parser's 75 keywords are 49 searched in one part, its 65
    whole-line literals 40, where each set took two parts and two passes over the buffer).

    Found by one ``bytes.find`` walk per keyword over all of them joined by newlines (which no
    keyword holds): ~0.3 ms for 135 keywords, where comparing every pair took ~5 ms of each
    start-up."""
    long = list(dict.fromkeys(k for k in keywords if len(k) > 1))
    joined = b"\n".join(long)
    starts = list(itertools.accumulate((len(k) + 1 for k in long[:-1]), initial=0))
    holding = set()
    for i, other in enumerate(long):
        at = joined.find(other)
        while at >= 0:
            holder = bisect.bisect_right(starts, at) - 1
            if holder != i:
                holding.add(holder)
            at = joined.find(other, at + 1)
    return [k for i, k in enumerate(long) if i not in holding]


PREFILTER_MAX_KEYWORDS = 64
"""Most literals one searcher takes with its SIMD prefilter on (the aho-corasick crate's packed
Teddy searcher; measured: 64 at ~2.4 GB/s, 74 at ~160 MB/s)."""


def _byte_hits(data: bytes, byte: bytes, end: int) -> Iterator[int]:
    """Offsets of ``byte`` in ``data[:end]``: ``bytes.find`` is memchr, ~10 GB/s."""
    at = data.find(byte, 0, end)
    while at >= 0:
        yield at
        at = data.find(byte, at + 1, end)


SHORT_GAP_BYTES = 16 << 10
"""Up to this many bytes, a stretch of progress lines is scanned whole for its first and last
marker (:func:`_sampled_progress_lines`); longer ones from their ends outwards."""


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

    if hi - lo <= min(SHORT_GAP_BYTES, STEP_SAMPLE_BYTES):  # a few lines: two direct scans
        first, last = hi, -1
        for marker in markers:
            at = data.find(marker, lo, hi)
            if at >= 0:
                first = min(first, at)
                last = max(last, data.rfind(marker, at, hi))
        if last < 0:
            return []
        first_start, last_start = line_start(first), line_start(last)
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
