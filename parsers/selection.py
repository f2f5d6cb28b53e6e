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
from typing import TYPE_CHECKING

import ahocorasick_rs

from ckpt_advisor.parsers.stream import LineFilter, StreamParser

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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
    :class:`_Search`), and so are the lines holding a ``whole_line`` literal; line numbers
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
    return FEED if k in lines.held(line_filter.whole_line, line_filter.keywords).lines else RECORD


class _Lines:
    """The lines of ``data[start:end]`` (whole lines): their newlines (a numpy mask of the
    buffer, ~4 GB/s) and, per literal set, the lines holding one (one search of the whole
    buffer per set, see :class:`_Search`), as line indices in order."""

    def __init__(self, data: bytes, start: int, end: int) -> None:
        import numpy as np  # loaded already wherever there is a reader: the estimator needs it

        self._np = np
        self.data, self._start, self._end = data, start, end
        mask = np.frombuffer(data, np.uint8, count=end - start, offset=start) == ord("\n")
        self._newlines = np.flatnonzero(mask) + start
        self.stops: list[int] = self._newlines.tolist()
        """Offset of each line's ``\\n``."""
        self._holding: dict[tuple[tuple[bytes, ...], tuple[bytes, ...] | None], _Held] = {}
        self._asked: tuple[tuple[bytes, ...], tuple[bytes, ...] | None, _Held] | None = None
        """The set asked for last and its lines: the same tuple is answered again without
        hashing its ~65 literals (asked for at every keyword line :func:`_how` reads)."""

    def start(self, i: int) -> int:
        """Offset of line ``i``'s first byte."""
        return self.stops[i - 1] + 1 if i else self._start

    def index_of(self, offset: int) -> int:
        """Index of the line holding buffer ``offset``."""
        return bisect.bisect_left(self.stops, offset)

    def held(self, literals: tuple[bytes, ...], within: tuple[bytes, ...] | None = None) -> _Held:
        """The lines holding one of ``literals``, searched once per buffer; with ``within``,
        of the lines holding one of ``within`` only (the others are not searched: the
        ``whole_line`` literals of the keyword lines, a few of a sparse log's bytes)."""
        asked = self._asked
        if asked is not None and asked[0] is literals and asked[1] is within:
            return asked[2]
        found = self._holding.get((literals, within))
        if found is None:
            np = self._np
            if within is None:
                starts = _starts(self.data, self._start, self._end, literals)
                held = np.unique(np.searchsorted(self._newlines, starts))
            else:
                among = self.held(within).indices
                data, stops = self.data, self.stops
                pieces = [data[self.start(i) : stops[i]] for i in among]
                joined = b"\n".join(pieces)  # no literal holds a newline: same lines found
                offsets = np.cumsum([len(p) + 1 for p in pieces], dtype=np.int64)
                hits = np.searchsorted(offsets, _starts(joined, 0, len(joined), literals), "right")
                held = np.asarray(among, np.int64)[np.unique(hits)]
            found = self._holding[(literals, within)] = _Held(held.tolist(), len(self.stops))
        self._asked = (literals, within, found)
        return found


class _Held:
    """The indices of a buffer's lines that hold one of some literals (:meth:`_Lines.held`)."""

    def __init__(self, indices: list[int], count: int) -> None:
        self.indices, self._count, self._cursor = indices, count, 0
        self.lines = set(indices)

    def next(self, i: int) -> int:
        """The first such line at or after line ``i`` (asked at growing ``i``), else the
        buffer's line count."""
        indices = self.indices
        at = self._cursor = bisect.bisect_left(indices, i, self._cursor)
        return indices[at] if at < len(indices) else self._count


CORE_TRIMMED = b" ;:[]*-'\""
"""Bytes trimmed off both ends of a literal to make the core that is searched for
(:func:`_core`)."""


def _core(literal: bytes) -> bytes:
    """The part of ``literal`` searched for: without the spaces and punctuation of
    :data:`CORE_TRIMMED` at its ends, unless fewer than three bytes would be left.

    The prefilter looks for the first bytes of each literal; a space then a letter (``" saved
    in "``, ``" closing signal "``) is so common in a log that 56 HF literals searched 32 MB of
    the bench's sparse log in 37 ms, their cores in 6 ms (8 MB of its dense log: 21 ms, 6 ms).
    A core found where its literal is not is checked (:meth:`_Search.starts`)."""
    core = literal.strip(CORE_TRIMMED)
    return core if len(core) >= 3 else literal


class _Search:
    """One search of a buffer for a set of literals (two bytes or more, no newline) that finds
    each line holding one: the cores of the :func:`_searched` literals (:func:`_core`) in as
    few searchers as the prefilter takes, then each core found checked for its literal around
    it; a line where no core found is its literal's (a core alone, or one hiding another
    literal it overlaps) is searched whole for the literals themselves.

    Leftmost-first matching lets the library use its SIMD prefilter (Teddy), ~3 GB/s where
    ``re`` with an alternation does ~70 MB/s. That prefilter takes at most
    :data:`PREFILTER_MAX_KEYWORDS` literals: the HF parser's 74 in one searcher ran at ~160
    MB/s, in two of 37 at ~700 MB/s (64 MB of the bench's log, a loaded machine), so the
    cores are dealt into as few even parts as keep each within it. Literals hold no newline,
    so every line holding one holds its core, and gets a match start in some part (a match
    cannot run into the next line)."""

    def __init__(self, literals: tuple[bytes, ...]) -> None:
        searched = _searched(literals)
        by_core: dict[bytes, list[tuple[int, bytes]]] = {}
        for literal in searched:
            core = _core(literal)
            by_core.setdefault(core, []).append((literal.index(core), literal))
        cores = list(by_core)
        count = -(-len(cores) // PREFILTER_MAX_KEYWORDS)
        size = -(-len(cores) // count) if count else 0
        chunks = [cores[i : i + size] for i in range(0, len(cores), size or 1)]
        self.parts = tuple(_searcher(chunk) for chunk in chunks)
        self._contexts = tuple(
            tuple(None if by_core[c] == [(0, c)] else tuple(by_core[c]) for c in chunk)
            for chunk in chunks
        )
        """Per part, per core: None where the core is its literal, else each ``(offset of
        the core in the literal, literal)`` it stands for."""
        self._whole = tuple(
            _searcher(searched[i : i + PREFILTER_MAX_KEYWORDS])
            for i in range(0, len(searched), PREFILTER_MAX_KEYWORDS)
        )

    def starts(self, data: bytes, start: int, end: int) -> list[int]:
        """Offsets in ``data[start:end]`` inside the lines holding a literal, at least one
        per such line and none elsewhere, unordered."""
        found: list[int] = []
        unsure: list[int] = []
        for matcher, contexts in zip(self.parts, self._contexts, strict=True):
            for core, at, _ in matcher.find_matches_as_indexes(data):
                if not start <= at < end:
                    continue
                options = contexts[core]
                if options is None or any(
                    at >= lead and data.startswith(literal, at - lead) for lead, literal in options
                ):
                    found.append(at)
                else:
                    unsure.append(at)
        if unsure:
            checked: set[int] = set()
            for at in unsure:
                line_start = data.rfind(b"\n", 0, at) + 1
                if line_start in checked:
                    continue
                checked.add(line_start)
                line_stop = data.find(b"\n", at)
                line = data[line_start : line_stop if line_stop >= 0 else len(data)]
                if any(m.find_matches_as_indexes(line) for m in self._whole):
                    found.append(at)
        return found


def _searcher(literals: list[bytes]) -> ahocorasick_rs.BytesAhoCorasick:
    return ahocorasick_rs.BytesAhoCorasick(
        literals, matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
    )


@functools.lru_cache(maxsize=64)
def _search(literals: tuple[bytes, ...]) -> _Search:
    """The :class:`_Search` of ``literals``' literals of two bytes or more (made once)."""
    return _Search(literals)


def _starts(
    data: bytes, start: int, end: int, literals: tuple[bytes, ...]
) -> npt.NDArray[np.int64]:
    """Offsets in ``data[start:end]`` inside the lines holding one of ``literals``, at least
    one per such line and none elsewhere (:class:`_Search`; single bytes by
    :func:`_byte_hits`: one among the others turns the prefilter off, ~450 MB/s), unordered."""
    import numpy as np

    starts = _search(literals).starts(data, start, end)
    for byte in (k for k in literals if len(k) == 1):
        starts.extend(s for s in _byte_hits(data, byte, end) if s >= start)
    return np.asarray(starts, np.int64)


def _searched(keywords: tuple[bytes, ...]) -> list[bytes]:
    """The keywords of two bytes or more that :class:`_Search` searches: not one holding
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
