"""The outbox and alert hygiene with the real slack-sdk client against the loopback Slack:
in order, never twice, bounded in time, one clear error for bad credentials, silences
(docs/RELIABILITY.md, scenarios 17-19, 22, 23); the store under them on both backends."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckpt_advisor.agent.advisor import Advisor
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.notify.base import NotifyError, NotifyErrorKind
from ckpt_advisor.agent.notify.outbox import Outbox
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate, Reason, ReasonCode
from ckpt_advisor.rules.policy import EstimationPolicy
from tests.agent.fake_slack import FakeSlack

_DRIFT = Reason(ReasonCode.DRIFT, {"ratio": 2.0, "drift_ratio": 1.5})
"""The reason a scripted rule gives for its NOTIFY."""


def _posted(state: AlertState) -> Reason:
    """The reason a scripted rule gives for staying quiet after its NOTIFY."""
    sent_s = state.last_sent_s or 0.0
    values = {"last_sent_s": sent_s, "next_repeat_s": sent_s + 86_400.0, "change_fraction": 0.2}
    return Reason(ReasonCode.ALREADY_POSTED, values)


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _outbox(store: Store, notifier: Any, **kwargs: Any) -> Outbox:
    return Outbox(store, notifier, clock=lambda: NOW, **kwargs)


def _queue(store: Store, *texts: str) -> None:
    for i, text in enumerate(texts):
        store.record_decision(
            f"job{i}",
            AlertState(True, 1.0, 60.0),
            message={"text": text, "blocks": []},
            action="notify",
            now_s=NOW.timestamp(),
        )


def _slack(fake: FakeSlack, **kwargs: Any) -> SlackNotifier:
    return SlackNotifier(fake.token, "#alerts", base_url=fake.base_url, **kwargs)


def test_outage_queues_then_delivers_in_order_once(
    store_target: str | Path, store_password: str | None, fake_slack: FakeSlack
) -> None:
    """Scenario 19: Slack unreachable, then 5xx: messages stay in the outbox; once Slack is back
    they arrive in queue order, each exactly once."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one", "two", "three")
    down = SlackNotifier(fake_slack.token, "#alerts", base_url="http://127.0.0.1:9/api/")
    outbox = _outbox(store, down)
    assert outbox.deliver() == 0
    assert [m["state"] for m in store.messages()] == ["queued"] * 3
    outbox.notifier = _slack(fake_slack)
    fake_slack.script(503)
    assert outbox.deliver() == 0  # 5xx: maybe landed, look before resending
    assert [m["state"] for m in store.messages()] == ["unsure", "queued", "queued"]
    assert outbox.deliver() == 3
    assert [m["text"] for m in fake_slack.messages] == ["one", "two", "three"]
    assert [m["state"] for m in store.messages()] == ["sent"] * 3


def test_send_that_timed_out_but_landed_is_not_sent_again(
    store_target: str | Path, store_password: str | None, fake_slack: FakeSlack
) -> None:
    """Scenario 19: a post whose answer timed out had landed; the next delivery finds it by its
    metadata key in the channel history and records it as sent instead of posting twice."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one", "two")
    fake_slack.script(delay_s=2.0)
    outbox = _outbox(store, _slack(fake_slack, timeout_s=0.3))
    assert outbox.deliver() == 0
    assert store.messages()[0]["state"] == "unsure"
    outbox._inflight.join(timeout=5)  # type: ignore[union-attr]
    assert outbox.deliver() == 2
    assert [m["text"] for m in fake_slack.messages if m.get("text")] == ["one", "two"]
    assert len([r for r in fake_slack.requests if r.path.endswith("chat.postMessage")]) == 2
    assert [m["state"] for m in store.messages()] == ["sent", "sent"]


def test_unsure_send_that_cannot_be_checked_is_never_repeated(
    store_target: str | Path, store_password: str | None, fake_slack: FakeSlack
) -> None:
    """When the channel history cannot be read (missing scope), a maybe-sent message is marked
    failed with a clear reason rather than risk a second copy; the next one goes out."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one", "two")
    outbox = _outbox(store, _slack(fake_slack))
    fake_slack.script(500)
    outbox.deliver()
    fake_slack.script(error="missing_scope")
    assert outbox.deliver() == 1
    [first, second] = store.messages()
    assert first["state"] == "failed" and "cannot be checked" in first["error"]
    assert second["state"] == "sent"
    assert [m["text"] for m in fake_slack.messages] == ["two"]


def test_invalid_auth_gives_one_error_and_keeps_messages(
    store_target: str | Path,
    store_password: str | None,
    fake_slack: FakeSlack,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scenario 19: a rejected token gives one clear error across many delivery runs, one
    request, and the messages stay queued for after the fix."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one", "two")
    bad = SlackNotifier("xoxb-wrong", "#alerts", base_url=fake_slack.base_url)
    outbox = _outbox(store, bad)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            assert outbox.deliver() == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "invalid_auth" in errors[0] and "token" in errors[0]
    assert len(fake_slack.requests) == 1
    assert [m["state"] for m in store.messages()] == ["queued", "queued"]


class _HungNotifier:
    """A notifier whose send never answers until released (a hung connection)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        self.calls += 1
        self.release.wait(30)
        raise NotifyError(NotifyErrorKind.TRANSIENT, "connection dropped", maybe_sent=True)

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        return None


def test_hung_notifier_times_out_and_the_next_run_still_happens(
    store_target: str | Path, store_password: str | None
) -> None:
    """Scenario 17: a send that never returns is abandoned after the deadline; the estimate run
    finishes, and the next run runs (without sending again while the hung call may land)."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one")
    hung = _HungNotifier()
    advisor = Advisor(store, estimator=Estimator(), clock=lambda: NOW)
    outbox = _outbox(store, hung, send_deadline_s=0.3)
    for _ in range(2):
        advisor.run(["job0"])
        outbox.deliver()
    assert len(store.estimate_history(job="job0")) == 2
    assert hung.calls == 1
    assert store.messages()[0]["state"] == "unsure"
    hung.release.set()


def test_rate_limit_is_waited_out_and_sent_once(
    store_target: str | Path, store_password: str | None, fake_slack: FakeSlack
) -> None:
    """Scenario 18: 429 with Retry-After: 1 inside the bound: the client waits and sends once."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one")
    fake_slack.script(429, retry_after=1)
    assert _outbox(store, _slack(fake_slack)).deliver() == 1
    assert [r.status for r in fake_slack.requests] == [429, 200]
    assert fake_slack.requests[1].received_s - fake_slack.requests[0].received_s >= 1.0
    assert [m["text"] for m in fake_slack.messages] == ["one"]


class _AlwaysNotify:
    def __call__(
        self, est: JobEstimate, state: AlertState, now_s: float, policy: EstimationPolicy
    ) -> Decision:
        return Decision(Action.NOTIFY, _DRIFT, AlertState(True, now_s, 60.0))


def test_silenced_job_queues_nothing_until_the_silence_ends(
    store_target: str | Path, store_password: str | None
) -> None:
    """Scenario 22: `silence --job` stops messages for that job until the time given without
    recording them as told, so the recommendation still due is posted when the silence ends."""
    store = open_store(store_target, password=store_password)
    now = {"t": NOW}
    advisor = Advisor(store, estimator=Estimator(), rule=_AlwaysNotify(), clock=lambda: now["t"])
    store.silence("llama", NOW.timestamp() + 3600)
    advisor.run_job("llama")
    assert store.messages() == []
    assert not store.alert_state("llama").in_drift  # nothing was told: the episode is still due
    now["t"] = datetime(2026, 11, 29, 13, 0, 1, tzinfo=UTC)
    advisor.run_job("llama")
    assert [m["action"] for m in store.messages()] == ["notify", "detail"]  # detail: its thread


def test_token_never_in_logs_or_errors(
    store_target: str | Path,
    store_password: str | None,
    fake_slack: FakeSlack,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scenario 23: with slack-sdk logging at DEBUG, a successful send, a rate limit and a
    rejected token leave no trace of the token in any log record or stored error."""
    store = open_store(store_target, password=store_password)
    _queue(store, "one", "two")
    fake_slack.script(429, retry_after=0)
    with caplog.at_level(logging.DEBUG):
        _outbox(store, _slack(fake_slack)).deliver()
        fake_slack.script(error="invalid_auth")
        _queue(store, "three")
        _outbox(store, _slack(fake_slack)).deliver()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "chat.postMessage" in text or "Sending a request" in text
    assert fake_slack.token not in text
    assert all(fake_slack.token not in str(m) for m in store.messages())


def test_silence_command_sets_the_silence(tmp_path: Path) -> None:
    """`ckpt-advisor silence --job J --for 24h` records a silence ending 24 h from now; an
    unknown job (a typo: exit 1, as every command's) or a silence longer than a year (exit 2)
    is refused."""
    from click.testing import CliRunner

    from ckpt_advisor.agent.cli import main

    db = tmp_path / "s.db"
    store = open_store(db)
    store.save_estimate("llama", 1.0, "ok", {"job": "llama"})
    typo = CliRunner().invoke(main, ["silence", "--job", "lama", "--for", "1h", "--db", str(db)])
    assert typo.exit_code == 1
    assert "no job 'lama' here; known: llama" in typo.stderr
    forever = ["silence", "--job", "llama", "--for", "99999999d", "--db", str(db)]
    assert CliRunner().invoke(main, forever).exit_code == 2
    result = CliRunner().invoke(
        main, ["silence", "--job", "llama", "--for", "24h", "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    until_s = open_store(db).silenced_until("llama", datetime.now(UTC).timestamp())
    assert until_s is not None
    assert abs(until_s - datetime.now(UTC).timestamp() - 86400) < 60


class _NotifyOutOfDrift:
    """The drift rule's core: notify when the job is not already in drift; slow to decide, so
    an unguarded second run reads the same state while the first is still deciding."""

    def __call__(
        self, est: JobEstimate, state: AlertState, now_s: float, policy: EstimationPolicy
    ) -> Decision:
        time.sleep(0.2)
        if state.in_drift:
            return Decision(Action.NONE, _posted(state), state)
        return Decision(Action.NOTIFY, _DRIFT, AlertState(True, now_s, 60.0))


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[str | None] = []
        self.threads: list[str | None] = []

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        self.sent.append(key)
        self.threads.append(thread_ts)
        return f"{len(self.sent)}.0"

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        return None


def test_concurrent_runs_queue_and_send_one_notification(
    store_target: str | Path, store_password: str | None
) -> None:
    """Two estimate runs at once (the interval job and the after-failure job) decide one after
    the other, each then delivering: one notify (with its detail reply) in the outbox and one
    message sent, then its reply."""
    store = open_store(store_target, password=store_password)
    notifier = _Recorder()
    advisor = Advisor(store, estimator=Estimator(), rule=_NotifyOutOfDrift(), clock=lambda: NOW)
    outbox = _outbox(store, notifier)
    start = threading.Barrier(2)

    def run() -> None:
        start.wait()
        advisor.run(["llama"])
        outbox.deliver()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert [m["action"] for m in store.messages()] == ["notify", "detail"]
    assert notifier.threads == [None, "1.0"]  # the detail went under the message
