"""Line clean-up: ANSI escapes, carriage returns, records glued after tqdm bars."""

from __future__ import annotations

from ckpt_advisor.parsers.text import Bar, last_bar, records, strip_ansi


def test_strip_ansi_removes_colours_and_cursor_moves() -> None:
    """Colour codes (also 24-bit) and cursor moves vanish; other text stays."""
    text = "\x1b[38;2;180;60;0mstep: 800\x1b[39m  loss: 4.7\x1b[A"
    assert strip_ansi(text) == "step: 800  loss: 4.7"


def test_records_split_on_carriage_returns_and_drop_bars() -> None:
    """Bars and blank redraws go; the tqdm.write line and a glued record stay."""
    line = "\r  4%|▍         | 5/120 [00:00<00:12,  9.12it/s]\r" + " " * 40 + "\r{'loss': '8.433'}"
    assert records(line) == ["{'loss': '8.433'}"]


def test_records_find_a_record_glued_to_a_bar_without_its_bracket() -> None:
    """A bar cut before its ``]`` still releases the record glued to it."""
    line = "\r 50%|█████     | 5/10 [00:19<00:19,  3.84s/it[INFO|trainer.py:3850] 2025-02-07 x"
    assert records(line) == ["[INFO|trainer.py:3850] 2025-02-07 x"]


def test_last_bar_reads_only_the_last_redraw() -> None:
    """The last bar state on a line is read, with seconds per iteration from either unit."""
    line = "\r 1%| | 1/120 [00:00<00:16,  4.00it/s]\r 2%| | 2/120 [00:04<08:00,  2.50s/it]{'a': 1}"
    bar = last_bar(line)
    assert bar == Bar(None, 2, 120, 2.5, line.index("{"), elapsed_s=4.0)


def test_last_bar_keeps_the_description_and_unknown_rate() -> None:
    """A described bar keeps its description; ``?it/s`` gives no rate."""
    line = "Writing model shards:   0%|          | 0/1 [00:00<?, ?it/s]"
    assert last_bar(line) == Bar("Writing model shards", 0, 1, None, len(line))


def test_last_bar_ignores_a_rate_outside_a_bar() -> None:
    """Text that mentions ``it/s`` but is no bar gives no bar."""
    assert last_bar("throughput 12.5 it/s over the last epoch") is None
