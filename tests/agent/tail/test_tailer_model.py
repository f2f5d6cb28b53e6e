"""The tailer against a model, with random write / rotate / truncate / delete / restart / kill
sequences on real files and a real SQLite store (the way Vector tests its file source).

The invariant (docs/RELIABILITY.md): after every scan, the store holds each complete line ever
written exactly once, and nothing else. A kill is a store commit that never happens (the process
dies before or after the transaction): the tailer is thrown away and a new one starts from the
store.
A store failure is the same commit failing with a StoreError while the process lives on.

Writers may keep their descriptor across renames and deletes (scenario 29: logrotate
``create``, a rotated stdout): what they write afterwards must be stored too, while the file is
within reach. Out of reach, by nature, is a deleted file once no tailer that held it open is
alive: after a clean restart it was read to its end; after a kill, what was not committed is
gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from ckpt_advisor.agent.store import FileState, StoreError
from ckpt_advisor.agent.store.sqlite.writer import SqliteStore
from ckpt_advisor.agent.tail import Tailer, WatchSpec, reader

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ROTATED_IDLE_S = 3600.0
NAMES = ("a.jsonl", "b.jsonl", "c.csv")
CSV_HEADER = "step,start,end\n"
_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None  # RAM: thousands of small stores


class Killed(BaseException):
    """The process died (SIGKILL) at this point."""


class CrashingStore(SqliteStore):
    """A real store whose n-th commit raises ``error`` before or after its transaction."""

    crash_at: int | None = None
    after_commit = False
    commits = 0
    error: BaseException = Killed()

    def commit_read(self, file: FileState, **kwargs: Any) -> FileState:
        self.commits += 1
        if self.commits == self.crash_at and not self.after_commit:
            raise self.error
        state = super().commit_read(file, **kwargs)
        if self.commits == self.crash_at:
            raise self.error
        return state


def _line(name: str, step: int, pad: int) -> str:
    if name.endswith(".csv"):
        return f"{step},2026-11-01T00:00:00,2026-11-01T00:00:{30 + pad % 29:02d}\n"
    return (
        f'{{"step": {step}, "start": "2026-11-01T00:00:00Z", '
        f'"end": "2026-11-01T00:00:30Z", "path": "{"x" * pad}"}}\n'
    )


def _in_globs(name: str | None) -> bool:
    """Whether a file of this name (None: deleted) is under the model's globs."""
    return name is not None and name.endswith((".jsonl", ".csv"))


@dataclass
class _File:
    name: str  # its name when created (it gives the format); ``where`` is where it is now
    partial: str = ""  # the rest of a line whose start was written
    opened: bool = False  # a completed scan has seen it (so the tailer and the store know it)
    partial_step: int | None = None
    steps: list[int] = field(default_factory=list)
    fd: int | None = None  # a writer's descriptor, kept across renames and deletes
    where: str | None = None  # its present name under logs/; None once deleted
    reachable: bool = True  # what is written to it now will be stored


class TailerModel(RuleBasedStateMachine):
    """Real files in a temp dir, the tailer, and what should be stored."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tailer-model-", dir=_TMP))
        self.store = CrashingStore(self.dir / "s.db")
        self.logs = self.dir / "logs"
        self.logs.mkdir()
        self.files: dict[str, _File] = {}  # by the watched name that leads to them
        self.held: list[_File] = []  # files a writer holds open, wherever they are now
        self.expected: Counter[int] = Counter()
        self.next_step = 1
        self.renamed = 0
        self.now = NOW
        self.tailer = self._new_tailer()

    def _new_tailer(self) -> Tailer:
        return Tailer(
            self.store,
            [
                WatchSpec("j", (str(self.logs / "*.jsonl"),)),
                WatchSpec("j", (str(self.logs / "*.csv"),)),
            ],
            clock=lambda: self.now,
            tz=UTC,
            rotated_idle_s=ROTATED_IDLE_S,
        )

    def teardown(self) -> None:
        self.tailer.close()
        self.store.close()
        for f in self.held:
            assert f.fd is not None
            os.close(f.fd)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _scan(self) -> None:
        self.tailer.scan()
        for name, f in self.files.items():
            f.opened = f.opened or (self.logs / name).exists()

    def _append(self, f: _File, n: int, pad: int, split: int | None) -> None:
        """Complete ``f``'s partial line and append ``n`` lines to it (the last one cut at
        ``split``): by its name, or through its writer's descriptor if it has one."""
        text = f.partial
        if f.partial_step is not None:
            self._wrote(f, f.partial_step)
        f.partial, f.partial_step = "", None
        if f.fd is not None:
            empty = os.fstat(f.fd).st_size == 0
        else:
            path = self.logs / str(f.where)
            empty = not path.exists() or path.stat().st_size == 0
        if f.name.endswith(".csv") and empty:
            text = CSV_HEADER + text
        for i in range(n):
            step, self.next_step = self.next_step, self.next_step + 1
            line = _line(f.name, step, pad)
            if split is not None and i == n - 1:
                cut = min(split, len(line) - 1)
                text += line[:cut]
                f.partial, f.partial_step = line[cut:], step
            else:
                text += line
                self._wrote(f, step)
        if f.fd is not None:
            os.write(f.fd, text.encode())
        else:
            with (self.logs / str(f.where)).open("a") as fh:
                fh.write(text)

    def _wrote(self, f: _File, step: int) -> None:
        f.steps.append(step)
        if f.reachable:
            self.expected[step] += 1

    def _tailer_gone(self, *, killed: bool) -> None:
        """The tailer is gone: a deleted file it held open is out of reach from now on. A clean
        stop read it to its end, so every line written so far stays expected; after a kill,
        of its lines only those stored already ever will be."""
        stored = Counter(e.event.step for e in self.store.events(job="j"))
        for f in self.held:
            if f.where is None and f.reachable:
                f.reachable = False
                for step in f.steps if killed else ():
                    if not stored[step]:
                        del self.expected[step]

    # -- actions ---------------------------------------------------------------------------

    @rule(
        name=st.sampled_from(NAMES),
        n=st.integers(0, 6),
        pad=st.integers(0, 120),
        split=st.one_of(st.none(), st.integers(1, 40)),
    )
    def write(self, name: str, n: int, pad: int, split: int | None) -> None:
        """Append by name (a writer that opens the file for each write)."""
        self._append(self.files.setdefault(name, _File(name, where=name)), n, pad, split)

    @precondition(lambda self: any(f.fd is None for f in self.files.values()))
    @rule(data=st.data())
    def hold(self, data: st.DataObject) -> None:
        """A trainer opens the file and keeps its descriptor from now on."""
        name = data.draw(st.sampled_from(sorted(n for n, f in self.files.items() if f.fd is None)))
        f = self.files[name]
        f.fd = os.open(self.logs / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self.held.append(f)

    @precondition(lambda self: self.held)
    @rule(
        data=st.data(),
        n=st.integers(1, 6),
        pad=st.integers(0, 120),
        split=st.one_of(st.none(), st.integers(1, 40)),
    )
    def write_held(self, data: st.DataObject, n: int, pad: int, split: int | None) -> None:
        """A trainer writes through its descriptor, wherever its file is now."""
        self._append(data.draw(st.sampled_from(self.held)), n, pad, split)

    def _drop(self, name: str) -> None:
        """The name no longer holds this file: by name, its unfinished line can never complete
        (through a writer's descriptor, it can)."""
        self.files.pop(name, None)

    @precondition(lambda self: self.files)
    @rule(data=st.data(), out=st.booleans())
    def rotate(self, data: st.DataObject, out: bool) -> None:
        """Rename the file away (out of the globs) or to another watched name."""
        name = data.draw(st.sampled_from(sorted(self.files)))
        if not (self.logs / name).exists():
            return
        f = self.files[name]
        if not f.opened:
            self._scan()  # a file never seen cannot be found once it left the globs
        self.renamed += 1
        stem, ext = name.split(".")
        new = f"{stem}.{ext}.{self.renamed}" if out else f"{stem}-{self.renamed}.{ext}"
        os.rename(self.logs / name, self.logs / new)
        f.where = new
        self._drop(name)

    @precondition(lambda self: self.files)
    @rule(data=st.data(), rewrite=st.integers(0, 4))
    def truncate(self, data: st.DataObject, rewrite: int) -> None:
        """copytruncate: everything is read, then the file is emptied (and maybe rewritten
        before the next poll)."""
        name = data.draw(st.sampled_from(sorted(self.files)))
        self._scan()
        path = self.logs / name
        f = self.files[name]
        if path.exists():
            os.truncate(path, 0)
        f.partial, f.partial_step = "", None  # its start is gone: no line can complete it
        self._drop(name)
        if rewrite:
            self._unlink(f)
            self.write(name, rewrite, 0, None)
        elif f.fd is not None:
            self.files[name] = f  # the writer goes on at the start of the emptied file

    def _unlink(self, f: _File) -> None:
        (self.logs / str(f.where)).unlink(missing_ok=True)
        f.where = None

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        """Everything is read, then the file is deleted (its inode may come back)."""
        name = data.draw(st.sampled_from(sorted(self.files)))
        self._scan()
        self._unlink(self.files[name])
        self._drop(name)

    @precondition(lambda self: any(not _in_globs(f.where) for f in self.held))
    @rule()
    def idle(self) -> None:
        """The trainers writing to renamed or deleted files exit, and the files stay quiet
        for longer than rotated_idle_s: the tailer reads them to their end and lets them go."""
        for f in [f for f in self.held if not _in_globs(f.where)]:
            assert f.fd is not None
            os.close(f.fd)
            f.fd = None
            self.held.remove(f)
        self.now += timedelta(seconds=ROTATED_IDLE_S + 1)
        self._scan()

    @rule()
    def scan(self) -> None:
        self._scan()

    @rule()
    def restart(self) -> None:
        """SIGTERM and start again: files that left their globs are read to their end."""
        self.tailer.drain()
        self.tailer.close()
        self._tailer_gone(killed=False)
        self.tailer = self._new_tailer()

    @rule(at=st.integers(1, 6), after=st.booleans())
    def kill(self, at: int, after: bool) -> None:
        """SIGKILL during a scan: the ``at``-th commit dies before or after its transaction."""
        self.store.commits = 0
        self.store.crash_at, self.store.after_commit = at, after
        self.store.error = Killed()
        try:
            self.tailer.scan()
        except Killed:
            pass
        finally:
            self.store.crash_at = None
        self.tailer.close()  # the process is gone: only the store survives
        self._tailer_gone(killed=True)
        self.tailer = self._new_tailer()

    @rule(at=st.integers(1, 6), after=st.booleans())
    def store_fails(self, at: int, after: bool) -> None:
        """The ``at``-th commit of a scan fails (a full disk) before or after its transaction;
        the daemon lives on and scans again later."""
        self.store.commits = 0
        self.store.crash_at, self.store.after_commit = at, after
        self.store.error = StoreError("database or disk is full")
        try:
            self.tailer.scan()
        except StoreError:
            pass
        finally:
            self.store.crash_at = None


class CheckedModel(TailerModel):
    """The model, with the full check after every scan."""

    def _scan(self) -> None:
        super()._scan()
        stored = Counter(e.event.step for e in self.store.events(job="j"))
        assert stored == self.expected, (
            f"missing {sorted((self.expected - stored).elements())}, "
            f"extra {sorted((stored - self.expected).elements())}"
        )

    def teardown(self) -> None:
        try:
            self._scan()
        finally:
            super().teardown()


@pytest.fixture
def small_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commit every few lines, so a kill can fall between commits of one scan."""
    monkeypatch.setattr(reader, "COMMIT_EVERY_BYTES", 150)


def _run(examples: int) -> None:
    CheckedModel.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    CheckedModel.TestCase().runTest()


def test_random_fault_sequences_lose_and_double_nothing(small_commits: None) -> None:
    """A few hundred random sequences of write (by name, or by writers that keep their
    descriptor) / rotate / truncate / delete / idle / restart / kill / store failure: every
    complete line within reach is stored exactly once after every scan."""
    _run(200)


@pytest.mark.slow
def test_ten_thousand_fault_sequences_lose_and_double_nothing(small_commits: None) -> None:
    """The same model over 10,000 sequences (the release check)."""
    _run(10_000)
