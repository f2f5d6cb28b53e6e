"""parsers.selection: which lines of a buffer a reader feeds a parser under its LineFilter."""

from __future__ import annotations

import random

import pytest

from ckpt_advisor.parsers import make_parser, selection
from ckpt_advisor.parsers.events import Event
from ckpt_advisor.parsers.stream import LineFilter, StreamParser

FILTER = LineFilter(keywords=(b"Saving", b"\x1b"), progress=(b"it/s",))


class _Recorder(StreamParser):
    """Records what it is fed; after a line holding ``every_line_after`` it needs every line for
    the next ``lines`` lines (its filter is None), as a parser inside a traceback does."""

    def __init__(
        self, *, every_line_after: str | None = None, lines: int = 0, wants: LineFilter = FILTER
    ) -> None:
        super().__init__("recorder")
        self.fed: list[tuple[int, str]] = []
        self._wants = wants
        self._trigger, self._every_for, self._left = every_line_after, lines, 0

    @property
    def line_filter(self) -> LineFilter | None:
        return None if self._left else self._wants

    def _feed(self, line: str, lineno: int) -> list[Event]:
        self.fed.append((lineno, line))
        if self._left:
            self._left -= 1
        elif self._trigger is not None and self._trigger in line:
            self._left = self._every_for
        return []

    def _finish(self) -> list[Event]:
        return []


def _select(parser: _Recorder, text: str, start: int = 0, step_wanted_before: int = 0) -> int:
    """Select and feed; a fed line numbered below ``step_wanted_before`` answers that the bar's
    next state is still wanted (as one after a resume that shows no step yet)."""
    data = text.encode()

    def on_line(line_start: int, stop: int, number: int, how: int) -> bool:
        parser.feed(data[line_start:stop].decode(), number)
        return number < step_wanted_before

    return selection.select_lines(parser, data, start, len(data), on_line)


def test_keyword_lines_and_the_progress_lines_around_them_are_selected() -> None:
    """Every keyword line is fed (an ANSI escape counts as one) with its real line number, and
    of each run of bar lines the first and the last; plain lines are only counted."""
    text = (
        "plain\n"
        + "".join(f" {n}/9 [00:0{n}<00:09, 1.00it/s]\n" for n in range(1, 5))
        + "Saving model checkpoint\n"
        + "plain again\n"
        + "\x1b[31mred\x1b[0m\n"
    )
    parser = _Recorder()
    assert _select(parser, text) == 8
    assert [n for n, _ in parser.fed] == [2, 5, 6, 8]
    assert parser.fed[2] == (6, "Saving model checkpoint")


def test_a_filter_of_none_selects_every_line_until_it_is_back() -> None:
    """While the parser's filter is None (inside a traceback) every line is fed; after it the
    keyword selection resumes; numbers count from ``start``."""
    text = "skip me\nSaving Traceback\na\nb\nc\nd\n"
    parser = _Recorder(every_line_after="Traceback", lines=2)
    assert _select(parser, text, start=len("skip me\n")) == 5
    assert parser.fed == [(1, "Saving Traceback"), (2, "a"), (3, "b")]


@pytest.mark.parametrize("sample_bytes", [64, 1 << 20])
def test_a_long_bar_is_sampled_once_per_step_sample_bytes(
    monkeypatch: pytest.MonkeyPatch, sample_bytes: int
) -> None:
    """A stretch of bar lines with no keyword gives its first and last line and one line per
    STEP_SAMPLE_BYTES between, never a line twice."""
    monkeypatch.setattr(selection, "STEP_SAMPLE_BYTES", sample_bytes)
    bars = [f" {n}/99 [00:01<00:09, 1.00it/s]\n" for n in range(1, 100)]
    parser = _Recorder()
    assert _select(parser, "".join(bars)) == 99
    numbers = [n for n, _ in parser.fed]
    assert numbers[0] == 1
    assert numbers[-1] == 99
    assert numbers == sorted(set(numbers))
    expected = 2 if sample_bytes > len("".join(bars)) else len("".join(bars)) // sample_bytes
    assert len(numbers) >= expected
    if sample_bytes > len("".join(bars)):
        assert numbers == [1, 99]


def test_more_keywords_than_one_prefilter_takes_select_every_line_holding_one() -> None:
    """With 150 keywords (three searchers of at most PREFILTER_MAX_KEYWORDS) the lines fed are
    exactly the lines holding a keyword, wherever in the line and however many it holds."""
    rng = random.Random(5)
    keywords = [f"kw{i:03d}!".encode() for i in range(150)]
    assert len(selection._search(tuple(keywords)).parts) == 3
    lines = []
    for _ in range(2000):
        held = rng.sample(keywords, rng.choice([0, 0, 0, 1, 2]))
        words = [rng.choice(["step", "loss", "kw", "!"]) for _ in range(rng.randint(0, 6))]
        words += [k.decode() for k in held]
        rng.shuffle(words)
        lines.append(" ".join(words))
    parser = _Recorder(wants=LineFilter(keywords=tuple(keywords), progress=()))
    assert _select(parser, "".join(f"{line}\n" for line in lines)) == len(lines)
    want = [
        (n, line) for n, line in enumerate(lines, 1) if any(k.decode() in line for k in keywords)
    ]
    assert parser.fed == want


def test_while_the_bar_state_is_wanted_the_next_progress_lines_are_fed() -> None:
    """After a line that wants the bar's next state (a resume) the progress lines after it are
    fed one by one until one answers it showed a step; then only the last of the run."""
    text = "Saving\n" + "".join(f" {n}/20 [00:0{n}<00:09, 1.00it/s]\n" for n in range(1, 10))
    parser = _Recorder()
    assert _select(parser, text, step_wanted_before=4) == 10
    assert [n for n, _ in parser.fed] == [1, 2, 3, 4, 10]


@pytest.mark.parametrize("fmt", ["hf_trainer", "lightning", "nemo", "deepspeed", "composer"])
def test_keywords_holding_another_are_not_searched_yet_the_same_lines_are_held(fmt: str) -> None:
    """A stack's keyword and whole-line literal sets are searched without the literals that
    hold another (the HF sets in one searcher each, not two), and the lines found holding
    one are exactly the lines holding any literal of the full set: each literal planted alone
    in a line, in pairs, and beside lines holding none."""
    parser = make_parser(fmt)
    parser.feed("starting", 1)  # the first line tells a log from a timing file
    line_filter = parser.line_filter
    assert line_filter is not None and line_filter.whole_line is not None
    for literals in (line_filter.keywords, line_filter.whole_line):
        searched = selection._searched(literals)
        contained = {k for k in literals if any(o != k and o in k for o in literals)}
        assert contained and not contained & set(searched)
        if fmt == "hf_trainer":
            assert len(selection._search(literals).parts) == 1
        rng = random.Random(fmt)
        lines = [b"x" + k + b"y" for k in literals]
        lines += [b" ".join(rng.sample(literals, 2)) for _ in range(200)]
        lines += [b"nothing to see %d" % i for i in range(200)]
        rng.shuffle(lines)
        data = b"".join(line + b"\n" for line in lines)
        held = selection._Lines(data, 0, len(data)).held(literals).lines
        assert held == {i for i, line in enumerate(lines) if any(k in line for k in literals)}


@pytest.mark.parametrize("fmt", ["hf_trainer", "megatron", "lightning", "nemo"])
def test_a_core_found_without_its_literal_holds_no_line_nor_hides_one(fmt: str) -> None:
    """Each literal is searched as its core, without the spaces and punctuation at its ends
    (``" saved in "`` as ``saved in``); lines holding a core without the rest of its literal
    are not held, and neither is a line where cores overlap one another, unless it holds a
    literal, even one that an unchecked core's match overlaps: the lines held are exactly those
    holding a literal of the set, as a plain ``in`` test says."""
    parser = make_parser(fmt)
    parser.feed("starting", 1)  # the first line tells a log from a timing file
    line_filter = parser.line_filter
    assert line_filter is not None
    rng = random.Random(fmt)
    for literals in (line_filter.keywords, line_filter.whole_line or ()):
        long = [k for k in literals if len(k) > 1]
        cores = [selection._core(k) for k in long]
        assert any(c != k for c, k in zip(cores, long, strict=True))
        lines = [c for c in cores if c not in long]  # a core alone
        lines += [b"x" + c[: len(c) // 2] + k for c, k in zip(cores, long, strict=True)]
        lines += [c + k[len(k) // 2 :] for c, k in zip(cores, long, strict=True)]
        for _ in range(300):
            parts = rng.sample(cores, 2) + rng.sample(long, rng.choice([0, 0, 1]))
            rng.shuffle(parts)
            lines.append(b"".join(parts))
        lines += [b"nothing here %d" % i for i in range(100)]
        rng.shuffle(lines)
        data = b"".join(line + b"\n" for line in lines)
        held = selection._Lines(data, 0, len(data)).held(literals).lines
        want = {i for i, line in enumerate(lines) if any(k in line for k in literals)}
        assert held == want
        assert len(want) < len(lines) - 100  # cores alone are among the lines not held


def test_a_line_whose_core_matches_all_lack_their_literal_is_searched_whole() -> None:
    """``b" ab cd "`` is searched as ``ab cd``; in ``ab cd ef`` that match (no space before
    it) overlaps the literal ``cd ef`` and hides it from the leftmost-first search: the line,
    holding ``cd ef``, is held all the same, while ``ab cd`` and ``xab cd`` are not."""
    literals = (b" ab cd ", b"cd ef")
    lines = [b"ab cd ef", b"ab cd", b"xab cd", b"x ab cd y", b"zz"]
    data = b"".join(line + b"\n" for line in lines)
    assert selection._Lines(data, 0, len(data)).held(literals).lines == {0, 3}
