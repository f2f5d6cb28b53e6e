"""One drift episode in one Slack thread, through the real slack-sdk client against the loopback
Slack: the message (action first, within Block Kit's limits), its detail and its waste-curve
plot (files_upload_v2) as replies, and the resolve as a reply when the job is back in band; a
token without files:write still gets the message and the detail (issue 16)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from ckpt_advisor.agent.advisor import Advisor
from ckpt_advisor.agent.notify.message import MAX_BLOCKS, MAX_HEADER_CHARS
from ckpt_advisor.agent.notify.outbox import Outbox
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.agent.store import Store, StoreReader, open_store
from ckpt_advisor.rules.model import JobEstimate, Reason, ReasonCode, Status
from ckpt_advisor.rules.policy import DEFAULT_POLICY
from tests.agent.fake_slack import FakeSlack
from tests.agent.helpers import ON_64_GPUS
from tests.samples import drifting_estimate

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class _Estimates:
    """An estimator that gives the estimates it holds, one per run (the rules' own decide then
    judges them): a drifting job, then the same job back in band."""

    policy = DEFAULT_POLICY

    def __init__(self, *estimates: JobEstimate) -> None:
        self.queue = list(estimates)

    def estimate(self, store: StoreReader, job: str, now_s: float) -> JobEstimate:
        return self.queue.pop(0)


def _episode() -> _Estimates:
    drifting = drifting_estimate(
        job="llama-8b",
        recommended_setting="save_steps=450",
        goodput_current=0.648,
        goodput_recommended=0.851,
        **ON_64_GPUS,
    )
    back = dataclasses.replace(
        drifting,
        current_interval_s=3_900.0,
        current_interval_steps=488,
        drift_ratio=3_900.0 / 3_600.0,
        status=Status.OK,
        reason=Reason(ReasonCode.WITHIN_BAND, {"ratio": 3_900.0 / 3_600.0, "drift_ratio": 1.5}),
        computed_at_s=drifting.computed_at_s + 86_400.0,
    )
    return _Estimates(drifting, back)


def _parts(tmp_path: Path, slack: FakeSlack) -> tuple[Store, Advisor, Outbox]:
    store = open_store(tmp_path / "s.db")
    estimator: Any = _episode()
    advisor = Advisor(store, estimator=estimator, clock=lambda: NOW, plots=True)
    notifier = SlackNotifier(slack.token, "#training-alerts", base_url=slack.base_url)
    return store, advisor, Outbox(store, notifier, clock=lambda: NOW)


def test_message_detail_plot_and_resolve_share_one_thread(
    tmp_path: Path, fake_slack: FakeSlack
) -> None:
    """The payload slack-sdk sends leads with the header and the action (the setting, the
    interval in seconds, goodput now → recommended, GPU-hours at stake), then the evidence and
    the context, and passes Block Kit's limits; the detail and the PNG plot follow as replies
    under its ts, and the resolve a day later is a reply in the same thread."""
    store, advisor, outbox = _parts(tmp_path, fake_slack)
    advisor.run_job("llama-8b")
    assert outbox.deliver() == 3
    top, detail, plot = fake_slack.posted
    assert "thread_ts" not in top
    assert detail["thread_ts"] == plot["thread_ts"] == top["ts"]
    request = next(r for r in fake_slack.requests if r.path.endswith("/chat.postMessage"))
    blocks = request.body["blocks"]
    assert [b["type"] for b in blocks] == ["header", "section", "section", "context"]
    assert len(blocks) <= MAX_BLOCKS and len(blocks[0]["text"]["text"]) <= MAX_HEADER_CHARS
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()  # raises on any Block Kit limit
    assert blocks[1]["text"]["text"] == (
        "*Set* `save_steps=450` (1h 00m = 3,600 s; now 1,800 steps = 4h 00m): goodput 64.8% → "
        "85.1%, 307 GPU-h/day at stake"
    )
    assert request.body["text"].startswith(
        "Checkpoint interval off for llama-8b: Set save_steps=450 (1h 00m = 3,600 s"
    )
    assert detail["text"].startswith("Details for llama-8b: ")
    [png] = fake_slack.uploads.values()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    [shared] = plot["files"]
    assert shared["name"].startswith("waste-curve-")

    advisor.run_job("llama-8b")
    assert outbox.deliver() == 1
    resolve = fake_slack.posted[-1]
    assert resolve["thread_ts"] == top["ts"]
    assert resolve["text"].startswith(
        "Checkpoint interval back within range for llama-8b: Back within range: 1.08× the optimum"
    )
    assert [m["state"] for m in store.messages()] == ["sent"] * 4


def test_without_files_write_the_message_and_detail_still_go_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A token without files:write: the message and its detail are posted, the plot is marked
    failed naming the missing scope, with one warning, and nothing is retried."""
    with FakeSlack(scopes=("chat:write", "channels:history")) as slack:
        store, advisor, outbox = _parts(tmp_path, slack)
        advisor.run_job("llama-8b")
        with caplog.at_level(logging.WARNING, logger="ckpt_advisor.agent.notify.outbox"):
            assert outbox.deliver() == 2
            assert outbox.deliver() == 0
        posted = slack.posted
    assert [("files" in m, "thread_ts" in m) for m in posted] == [(False, False), (False, True)]
    states = [(m["action"], m["state"]) for m in store.messages()]
    assert states == [("notify", "sent"), ("detail", "sent"), ("plot", "failed")]
    assert "files:write" in store.messages()[-1]["error"]
    warnings = [r.getMessage() for r in caplog.records if "files:write" in r.getMessage()]
    assert len(warnings) == 1
