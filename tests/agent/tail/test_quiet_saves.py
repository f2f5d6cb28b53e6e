"""A followed file that goes quiet mid-save: the live reader stores the events ``ingest`` and
``parse`` give for the whole file, however its writes are spaced in time (docs/RELIABILITY.md
scenario 8). The reader's idle flush ends what a quiet file ends (a pending traceback), never a
save whose end line may still come. Real fixtures, real files and SQLite in a temp dir; the
reader's clock is moved by hand, so no test sleeps."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from ckpt_advisor import parsers
from ckpt_advisor.agent.app import build_daemon
from ckpt_advisor.agent.config import parse_config
from ckpt_advisor.agent.daemon.loop import Daemon
from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.parsers.events import Event, EventKind
from tests.agent.processes import until
from tests.agent.tail.helpers import FIXTURES, Clock, live_tailer

PARSER_FIXTURES = Path(__file__).parents[2] / "parsers" / "fixtures"
HF_CRASH = FIXTURES / "hf_trainer_crash.log"

Row = tuple[object, ...]


def _rows(events: Iterable[Event]) -> list[Row]:
    """What must agree between live and backfill, in line order (the store gives time order):
    every event but the ``step`` samples of a progress bar (which redraws are fed depends on
    where reads end, by the ``LineFilter`` contract), without a time the reader dated (a live
    line is dated when read, a backfilled one by the file's mtime)."""
    rows = [
        (
            ev.kind,
            ev.line,
            ev.step,
            None if ev.time_estimated else ev.time,
            ev.duration_s,
            ev.failure_class,
            ev.persist_s,
        )
        for ev in events
        if ev.kind is not EventKind.STEP
    ]
    return sorted(rows, key=lambda r: r[1])


def _stored(store: Store) -> list[Row]:
    return _rows(e.event for e in store.events(job="j"))


def _parse(lines: list[bytes]) -> list[Event]:
    """What ``ckpt-advisor parse`` finds in ``lines``: every line fed, then ``finish()``."""
    parser = parsers.make_parser("auto", tz=UTC)
    texts = (line.removesuffix(b"\n").decode("utf-8", "replace") for line in lines)
    events = [ev for n, text in enumerate(texts, 1) for ev in parser.feed(text, n)]
    return events + parser.finish()


def _parsed(data: bytes) -> list[Row]:
    return _rows(_parse(_lines(data)))


def _backfilled(tmp_path: Path, name: str, data: bytes) -> list[Row]:
    """What ``ingest`` stores for ``data`` written at once."""
    (tmp_path / "ingest").mkdir()
    path = tmp_path / "ingest" / name
    path.write_bytes(data)
    store = open_store(tmp_path / "ingest.db")
    live_tailer(store, str(path), Clock(), backfill=True).scan()
    return _stored(store)


def _lines(data: bytes) -> list[bytes]:
    """The ``\n``-ended lines of ``data`` (a tqdm ``\r`` does not end a line)."""
    return [line + b"\n" for line in data.split(b"\n")[:-1]]


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut after each of the 1-based line numbers ``cuts``."""
    lines = _lines(data)
    bounds = [0, *cuts, len(lines)]
    return [b"".join(lines[a:b]) for a, b in itertools.pairwise(bounds) if b > a]


def _live(
    tmp_path: Path, name: str, pieces: list[bytes], *, restart_after: set[int] | None = None
) -> tuple[Store, list[Row]]:
    """Write ``pieces`` one by one into a followed file; after each the file stays quiet for
    longer than the idle flush (and the reader flushes it), and after the pieces numbered in
    ``restart_after`` the daemon stops and starts again (its replay flushes where it flushed)."""
    (tmp_path / "live").mkdir()
    store, clock = open_store(tmp_path / "live.db"), Clock()
    pattern = str(tmp_path / "live" / "*.log")
    tailer = live_tailer(store, pattern, clock)
    tailer.scan()
    path = tmp_path / "live" / name
    for i, piece in enumerate(pieces):
        with path.open("ab") as fh:
            fh.write(piece)
        tailer.scan()
        clock.now += timedelta(seconds=3)
        tailer.scan()
        [state] = store.files("j")
        assert state.finished, "the quiet file was flushed"
        if restart_after and i in restart_after:
            tailer.close()
            tailer = live_tailer(store, pattern, clock)
            tailer.scan()
    tailer.close()
    return store, _stored(store)


def _hf_paused_save() -> tuple[bytes, bytes]:
    """The user's reproduction: the crash log's first 30 lines (a save of step 25 through its
    ``Configuration saved in`` lines), then lines 31-34, whose ``Model weights saved in`` is
    stamped 45 s later (a save whose weights take 45 s), and the bar moving past step 25."""
    lines = _lines(HF_CRASH.read_bytes())
    later = b"".join(lines[30:34]).replace(b"22:11:38,555", b"22:12:23,555")
    return b"".join(lines[:30]), later


def _ends(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r[0] is EventKind.CHECKPOINT_END]


@pytest.mark.parametrize("restart", [False, True], ids=["quiet", "quiet-then-restart"])
def test_an_hf_save_quiet_past_the_idle_flush_ends_at_its_weights_line(
    tmp_path: Path, restart: bool
) -> None:
    """A save quiet for longer than the idle flush after its config lines is not cut there: its
    end is the weights line 45 s later (line 33), as ``parse`` of the whole file says, and
    also when the daemon restarts during the pause."""
    first, later = _hf_paused_save()
    _store, live = _live(tmp_path, "t.log", [first, later], restart_after={0} if restart else None)
    [end] = _ends(live)
    assert end[:3] == (EventKind.CHECKPOINT_END, 33, 25)
    assert end[4] == pytest.approx(45.072)
    assert live == _parsed(first + later) == _backfilled(tmp_path, "t.log", first + later)


def test_the_daemon_stores_the_save_a_quiet_pause_splits_as_parse_does(
    tmp_path: Path, running: Callable[[Daemon], threading.Thread]
) -> None:
    """The reproduction through the running daemon (its idle flush is ``poll_every``): the
    first part is flushed while quiet, and the save still ends at line 33 after 45 s."""
    (tmp_path / "logs").mkdir()
    raw = {
        "store": {"path": str(tmp_path / "s.db")},
        "schedule": {"poll_every": "0.1s", "estimate_every": "1h"},
        "jobs": [{"name": "j", "logs": [f"{tmp_path}/logs/*.log"]}],
    }
    daemon = build_daemon(parse_config(raw))
    running(daemon)
    first, later = _hf_paused_save()
    path = tmp_path / "logs" / "t.log"
    path.write_bytes(first)
    assert until(lambda: any(state.finished for state in daemon.store.files("j")))
    assert _ends(_stored(daemon.store)) == []
    with path.open("ab") as fh:
        fh.write(later)
    assert until(lambda: len(_ends(_stored(daemon.store))) == 1)
    assert until(lambda: all(s.finished and s.lineno == 34 for s in daemon.store.files("j")))
    assert _stored(daemon.store) == _parsed(first + later)


def test_a_megatron_save_quiet_before_its_timer_line_takes_the_timer(tmp_path: Path) -> None:
    """Megatron: quiet after "successfully saved" (the save's last barrier across ranks), the
    save waits for its timer line: its cost is the timer's max over ranks (4.3115 s at line
    4), not the stamps' 4.311 s at line 2."""
    data = (PARSER_FIXTURES / "megatron" / "megatron_2026.log").read_bytes()
    _, live = _live(tmp_path, "m.log", _pieces(data, [1, 2, 3]))
    assert [(*r[:3], r[4]) for r in _ends(live)] == [
        (EventKind.CHECKPOINT_END, 4, 300, pytest.approx(4.3115)),
        (EventKind.CHECKPOINT_END, 7, 320, pytest.approx(2.5)),
    ]
    assert live == _parsed(data) == _backfilled(tmp_path, "m.log", data)


def test_a_nemo_save_quiet_before_its_async_scheduling_stays_one_async_save(
    tmp_path: Path,
) -> None:
    """NeMo: quiet after a ``Global Checkpoint Save`` line, the save is not taken as
    synchronous; the ``Scheduled async`` line after the pause makes it the async save that its
    finalize ends (one start, one end with its persist time), as in the whole file."""
    data = (PARSER_FIXTURES / "nemo" / "nemo.log").read_bytes()
    _, live = _live(tmp_path, "n.log", _pieces(data, [1, 2, 5]), restart_after={2})
    assert [r[:3] for r in live if r[0] is EventKind.CHECKPOINT_START] == [
        (EventKind.CHECKPOINT_START, 1, 500),
        (EventKind.CHECKPOINT_START, 5, 9),
    ]
    assert [(*r[:3], r[6]) for r in _ends(live)] == [
        (EventKind.CHECKPOINT_END, 2, 500, None),
        (EventKind.CHECKPOINT_END, 8, 9, pytest.approx(0.942, abs=1e-3)),
    ]
    assert live == _parsed(data) == _backfilled(tmp_path, "n.log", data)


def test_a_failure_ending_a_quiet_file_is_stored_once_promptly_and_across_a_restart(
    tmp_path: Path,
) -> None:
    """The crash log written with a pause inside its step-50 save: the save is not cut at the
    pause, and the traceback that ends the file is stored as soon as the file is quiet, once,
    across a restart and later lines; the events are ``ingest``'s."""
    data = HF_CRASH.read_bytes()
    _store, live = _live(tmp_path, "t.log", _pieces(data, [41]), restart_after={1})
    assert [r[:2] for r in live if r[0] is EventKind.FAILURE] == [(EventKind.FAILURE, 46)]
    assert live == _parsed(data) == _backfilled(tmp_path, "t.log", data)


def _stack_fixtures() -> list[Path]:
    """Every fixture of a stack whose parser holds a save open across lines (HF Trainer,
    Megatron, NeMo), and the demo's real logs."""
    found = [*FIXTURES.glob("*.log")]
    for pattern in ("hf_trainer/*.log", "megatron/*.log", "nemo/*.log"):
        found += PARSER_FIXTURES.glob(pattern)
        found += PARSER_FIXTURES.glob(f"public/{pattern}")
    found += PARSER_FIXTURES.glob("real_pasted/megatron_*.log")
    found += PARSER_FIXTURES.glob("real_pasted/nemo_*.log")
    return sorted(found)


def _outside_tracebacks(data: bytes) -> list[int]:
    """The lines after which a flush ends no failure and releases no event held for the file's
    first printed time: a traceback (or a launcher's banner) still open there is what a quiet
    file ends, by design, even if more of it came later, and events before the first stamp
    go out untimed, reported ``no_timestamps`` (a stamp later gives ``dated_at_first_time``)."""
    lines = _lines(data)
    whole = _parse(lines)
    flushed = (EventKind.FAILURE, EventKind.NO_TIMESTAMPS)
    return [
        n
        for n in range(1, len(lines))
        if not any(
            ev.kind in flushed and ev.line <= n and ev not in whole for ev in _parse(lines[:n])
        )
    ]


@pytest.mark.parametrize("fixture", _stack_fixtures(), ids=lambda p: p.name)
def test_every_line_written_apart_gives_the_events_of_the_whole_file(
    tmp_path: Path, fixture: Path
) -> None:
    """A file whose every line arrives after a pause longer than the idle flush (and a restart
    after every third), but inside a traceback, gives the stored events of ``ingest`` and the
    events of ``parse`` of it whole."""
    data = fixture.read_bytes()
    pieces = _pieces(data, _outside_tracebacks(data)[:-1])
    _, live = _live(tmp_path, "f.log", pieces, restart_after=set(range(2, len(pieces), 3)))
    assert live == _backfilled(tmp_path, "f.log", data) == _parsed(data)
