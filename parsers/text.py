"""Physical log lines to logical records: ANSI escapes, carriage returns and tqdm bars.

A physical line (as the tailer hands it over, without its ``\\n``) is rarely one record:

* tqdm redraws its bar with ``\\r`` and never ends it with ``\\n``, so a raw line holds many
  ``\\r``-separated redraws, and the next log record is glued onto the last bar:
  ``\\r 21%|██        | 25/120 [00:03<00:15,  6.24it/s][INFO|trainer.py:4149] 2026-11-29 ...``
  (transformers 5.24.0 ``ProgressCallback`` + explicit logging format, docs/FORMATS.md §0.7);
* colour codes (``\\x1b[31m``, ``\\x1b[38;2;180;60;0m``) and cursor moves (``\\x1b[A``, written by
  nested tqdm bars) sit inside the text (docs/FORMATS.md §0.9).

:func:`records` cuts a line into the pieces that can be log records; :func:`last_bar` reads the
last tqdm bar state on a line without looking at the earlier redraws.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from ahocorasick_rs import AhoCorasick

T = TypeVar("T")

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""CSI sequences: colours (``\\x1b[31m``, ``\\x1b[38;2;r;g;bm``), cursor moves (``\\x1b[A``)."""

TQDM_BAR = re.compile(
    r"[ \t]*(?:(?P<desc>[^\r|]*?): *)?"
    r"(?P<percent>\d+)%\|[^|\r]*\| *"
    r"(?P<n>\d{1,15})/(?P<total>\d{1,15}) "
    r"\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:?]+), *"
    r"(?P<rate>\d{1,15}(?:\.\d{1,15})?|\?)(?P<unit>it/s|s/it)"
    r"(?P<postfix>[^\]\[\r]*)\]?"
)
"""A tqdm bar with a known total, from its start to its closing ``]``.

tqdm's default ``bar_format`` (tqdm 4.x ``tqdm/std.py`` ``format_meter``):
``'{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]'``,
e.g. ``  21%|██        | 25/120 [00:03<00:15,  6.24it/s]`` (fixtures/real/hf_trainer_crash.log
line 28) or ``Writing model shards: 100%|██████████| 1/1 [00:00<00:00, 37.80it/s]`` (with a
``desc``). The postfix stops at ``[`` so that a record glued without the closing ``]`` is not
swallowed (``…3.84s/it[INFO|trainer.py:3850] …``, docs/FORMATS.md §0.7).
"""

RATE_MARKERS = ("it/s", "s/it")
"""One of these is in every tqdm redraw that shows a rate (a progress line)."""


class Bar(NamedTuple):
    """State of one tqdm bar redraw.

    Attributes:
        desc: the bar's description (``"Writing model shards"``), ``None`` when it has none.
        n: iterations done (for the HF Trainer training bar: the global step).
        total: iterations in the bar.
        seconds_per_it: tqdm's smoothed seconds per iteration, ``None`` while unknown (``?it/s``).
        end: offset in the line just past the bar; text from there on is a glued record.
        elapsed_s: seconds since the bar was created (tqdm ``format_interval``: ``MM:SS`` or
            ``H:MM:SS``, hours unbounded).
    """

    desc: str | None
    n: int
    total: int
    seconds_per_it: float | None
    end: int
    elapsed_s: float = 0.0


def strip_ansi(line: str) -> str:
    """Return ``line`` without CSI escape sequences (``\\x1b[…m`` colours, ``\\x1b[A`` moves)."""
    return ANSI_ESCAPE.sub("", line) if "\x1b" in line else line


def records(line: str) -> list[str]:
    """Split a physical line into the pieces that can hold log records, dropping tqdm bars.

    The line is cut at every ``\\r``; in each piece a leading tqdm bar is removed and what
    follows it (a record glued after the bar) is kept. Blank pieces are dropped.

    >>> records("\\r 21%|██  | 25/120 [00:03<00:15,  6.24it/s]Traceback (most recent call last):")
    ['Traceback (most recent call last):']
    """
    pieces = line.split("\r") if "\r" in line else [line]
    out: list[str] = []
    for piece in pieces:
        if "%|" in piece:
            bar = TQDM_BAR.match(piece)
            if bar is not None:
                piece = piece[bar.end() :]
        if piece and not piece.isspace():
            out.append(piece)
    return out


def last_bar(line: str) -> Bar | None:
    """Return the state of the last tqdm bar drawn on ``line``, or ``None`` if it has none.

    Only the redraw that holds the last rate (``it/s`` or ``s/it``) is parsed, so a line of
    thousands of redraws costs two reverse scans and one anchored match.
    """
    rate_at = max(line.rfind("it/s"), line.rfind("s/it"))  # RATE_MARKERS, unrolled
    if rate_at < 0:
        return None
    start = line.rfind("\r", 0, rate_at) + 1
    m = TQDM_BAR.match(line, start)
    if m is None:
        return None
    return bar_of(m, m["desc"], int(m["total"]))


def bar_of(m: re.Match[str], desc: str | None, total: int) -> Bar:
    """The :class:`Bar` of a match with the groups ``n``, ``rate`` (a number or ``?``),
    ``unit`` (``it/s`` or ``s/it``) and ``elapsed`` (``MM:SS`` or ``H:MM:SS``)."""
    n, rate, unit, elapsed = m.group("n", "rate", "unit", "elapsed")  # one call: a line each
    seconds_per_it: float | None = None
    if rate != "?":
        value = float(rate)
        if value > 0:
            seconds_per_it = value if unit == "s/it" else 1.0 / value
    elapsed_s = 0.0
    for part in elapsed.split(":"):
        elapsed_s = elapsed_s * 60 + (int(part) if part.isdigit() else 0)
    return Bar(desc, int(n), total, seconds_per_it, m.end(), elapsed_s)


class KeywordTable(Generic[T]):
    """A table of entries (patterns, rules), each with a literal that every text it matches
    holds: which entries are worth trying on a text, in table order.

    One multi-literal search of the text (Aho-Corasick, all overlapping matches) replaces one
    ``keyword in text`` scan per entry: ~1 µs for a typical log record where 30 scans took ~7 µs.
    """

    def __init__(self, entries: Sequence[T], keyword: Callable[[T], str]) -> None:
        literals = list(dict.fromkeys(keyword(entry) for entry in entries))
        index = {literal: i for i, literal in enumerate(literals)}
        self._entries = [(index[keyword(entry)], entry) for entry in entries]
        self._search = AhoCorasick(literals)

    def candidates(self, text: str) -> list[T]:
        """The entries whose keyword occurs in ``text``, in table order (often none)."""
        found = self._search.find_matches_as_indexes(text, overlapping=True)
        if not found:
            return []
        present = {i for i, _, _ in found}
        return [entry for i, entry in self._entries if i in present]
