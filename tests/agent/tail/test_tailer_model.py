"""The tailer against a model, with random write / rotate / truncate / delete / restart / kill
sequences on real files and a real SQLite store (the way Vector tests its file source).

The invariant (RELIABILITY.md): after every scan, the store holds each complete line ever written
exactly once, and nothing else. A kill is a store commit that never happens (the process dies
before or after the transaction): the tailer is thrown away and a new one starts from the store.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from ckpt_advisor.agent.store import FileState, Store
from ckpt_advisor.agent.tail import Tailer, WatchSpec, reader

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NAMES = ("a.jsonl", "b.jsonl", "c.csv")
CSV_HEADER = "step,start,end\n"
_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None  # RAM: thousands of small stores


class Killed(BaseException):
    """The process died (SIGKILL) at this point."""


class CrashingStore(Store):
    """A real store whose n-th commit dies before or after its transaction."""

    crash_at: int | None = None
    after_commit = False
    commits = 0

    def commit_read(self, file: FileState, **kwargs: Any) -> FileState:
        self.commits += 1
        if self.commits == self.crash_at and not self.after_commit:
            raise Killed
        state = super().commit_read(file, **kwargs)
        if self.commits == self.crash_at:
            raise Killed
        return state


def _line(name: str, step: int, pad: int) -> str:
    if name.endswith(".csv"):
        return f"{step},2026-11-01T00:00:00,2026-11-01T00:00:{30 + pad % 29:02d}\n"
    return (
        f'{{"step": {step}, "start": "2026-11-01T00:00:00Z", '
        f'"end": "2026-11-01T00:00:30Z", "path": "{"x" * pad}"}}\n'
    )


@dataclass
class _File:
    partial: str = ""  # the rest of a line whose start was written
    opened: bool = False  # a completed scan has seen it (so the store knows it)
    partial_step: int | None = None
    steps: list[int] = field(default_factory=list)


class TailerModel(RuleBasedStateMachine):
    """Real files in a temp dir, the tailer, and what should be stored."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tailer-model-", dir=_TMP))
        self.store = CrashingStore(self.dir / "s.db")
        self.logs = self.dir / "logs"
        self.logs.mkdir()
        self.files: dict[str, _File] = {}
        self.expected: Counter[int] = Counter()
        self.next_step = 1
        self.renamed = 0
        self.tailer = self._new_tailer()

    def _new_tailer(self) -> Tailer:
        return Tailer(
            self.store,
            [
                WatchSpec("j", (str(self.logs / "*.jsonl"),), timing=True),
                WatchSpec("j", (str(self.logs / "*.csv"),), timing=True),
            ],
            clock=lambda: NOW,
            tz=UTC,
        )

    def teardown(self) -> None:
        self.tailer.close()
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _scan(self) -> None:
        self.tailer.scan()
        for name, f in self.files.items():
            path = self.logs / name
            f.opened = f.opened or (path.exists() and path.stat().st_size > 0)

    # -- actions ---------------------------------------------------------------------------

    @rule(
        name=st.sampled_from(NAMES),
        n=st.integers(0, 6),
        pad=st.integers(0, 120),
        split=st.one_of(st.none(), st.integers(1, 40)),
    )
    def write(self, name: str, n: int, pad: int, split: int | None) -> None:
        f = self.files.setdefault(name, _File())
        text = f.partial
        if f.partial_step is not None:
            self.expected[f.partial_step] += 1
            f.steps.append(f.partial_step)
        f.partial, f.partial_step = "", None
        path = self.logs / name
        if name.endswith(".csv") and (not path.exists() or path.stat().st_size == 0):
            text = CSV_HEADER + text
        for _ in range(n):
            step, self.next_step = self.next_step, self.next_step + 1
            line = _line(name, step, pad)
            if split is not None and _ == n - 1:
                cut = min(split, len(line) - 1)
                text += line[:cut]
                f.partial, f.partial_step = line[cut:], step
            else:
                text += line
                self.expected[step] += 1
                f.steps.append(step)
        with path.open("a") as fh:
            fh.write(text)

    def _drop(self, name: str) -> None:
        """The name no longer holds this file: its unfinished line can never complete."""
        self.files.pop(name, None)

    @precondition(lambda self: self.files)
    @rule(data=st.data(), out=st.booleans())
    def rotate(self, data: st.DataObject, out: bool) -> None:
        """Rename the file away (out of the globs) or to another watched name."""
        name = data.draw(st.sampled_from(sorted(self.files)))
        if not (self.logs / name).exists():
            return
        if not self.files[name].opened:
            self._scan()  # a file never seen cannot be found once it left the globs
        self.renamed += 1
        stem, ext = name.split(".")
        new = f"{stem}.{ext}.{self.renamed}" if out else f"{stem}-{self.renamed}.{ext}"
        os.rename(self.logs / name, self.logs / new)
        self._drop(name)

    @precondition(lambda self: self.files)
    @rule(data=st.data(), rewrite=st.integers(0, 4))
    def truncate(self, data: st.DataObject, rewrite: int) -> None:
        """copytruncate: everything is read, then the file is emptied (and maybe rewritten
        before the next poll)."""
        name = data.draw(st.sampled_from(sorted(self.files)))
        self._scan()
        path = self.logs / name
        if path.exists():
            os.truncate(path, 0)
        self._drop(name)
        if rewrite:
            path.unlink(missing_ok=True)
            self.write(name, rewrite, 0, None)

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        """Everything is read, then the file is deleted (its inode may come back)."""
        name = data.draw(st.sampled_from(sorted(self.files)))
        self._scan()
        (self.logs / name).unlink(missing_ok=True)
        self._drop(name)

    @rule()
    def scan(self) -> None:
        self._scan()

    @rule()
    def restart(self) -> None:
        self.tailer.close()
        self.tailer = self._new_tailer()

    @rule(at=st.integers(1, 6), after=st.booleans())
    def kill(self, at: int, after: bool) -> None:
        """SIGKILL during a scan: the ``at``-th commit dies before or after its transaction."""
        self.store.commits = 0
        self.store.crash_at, self.store.after_commit = at, after
        try:
            self.tailer.scan()
        except Killed:
            pass
        finally:
            self.store.crash_at = None
        self.tailer.close()  # the process is gone: only the store survives
        self.tailer = self._new_tailer()


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
    """A few hundred random sequences of write/rotate/truncate/delete/restart/kill: every
    complete line is stored exactly once after every scan."""
    _run(200)


@pytest.mark.slow
def test_ten_thousand_fault_sequences_lose_and_double_nothing(small_commits: None) -> None:
    """The same model over 10,000 sequences (the release check)."""
    _run(10_000)
