"""Notifier: Slack message formatting (pure) and delivery with the real slack-sdk client against a
loopback fake of Slack's Web API (docs/RELIABILITY.md scenarios 18-21, 23)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from ckpt_advisor.agent.notify.base import Notifier, NotifyError, NotifyErrorKind
from ckpt_advisor.agent.notify.log import LogNotifier
from ckpt_advisor.agent.notify.message import (
    MAX_BLOCKS,
    MAX_FALLBACK_CHARS,
    MAX_HEADER_CHARS,
    MAX_SECTION_CHARS,
    escape_slack,
    format_log_line,
    format_message,
    truncate_slack,
    unescape_slack,
)
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.rules.model import Action, AlertState, Decision, Note, NoteCode
from tests.agent.fake_slack import FakeSlack
from tests.agent.helpers import ON_64_GPUS
from tests.samples import drifting_estimate

HOSTILE = "<!channel> <!here> <@U123> <http://x|y> & done"
_BROKEN_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")


NOTIFY = Decision(Action.NOTIFY, "interval is 4.0x the optimum", AlertState(in_drift=True))
RESOLVE = Decision(Action.RESOLVE, "back under 1.5x", AlertState())


def _texts(message: dict[str, Any]) -> list[str]:
    """Every text string a Slack client would render: each block's text and the fallback."""
    return [block["text"]["text"] for block in message["blocks"]] + [message["text"]]


def _notifier(slack: FakeSlack, **kwargs: Any) -> SlackNotifier:
    return SlackNotifier(slack.token, "#training-alerts", base_url=slack.base_url, **kwargs)


# --- formatting (pure) ---------------------------------------------------------------------


def test_escape_slack_neutralises_mentions_and_links() -> None:
    """Only &, < and > are entity-encoded, & first, so control sequences cannot fire."""
    assert escape_slack("<!here> & <@U1|x> 'ok'") == "&lt;!here&gt; &amp; &lt;@U1|x&gt; 'ok'"


@given(st.text(alphabet="&<>ab;", max_size=60), st.integers(min_value=1, max_value=40))
def test_truncate_never_splits_an_entity(text: str, limit: int) -> None:
    """Truncating escaped text respects the limit, keeps whole entities and a true prefix."""
    escaped = escape_slack(text)
    cut = truncate_slack(escaped, limit)
    assert len(cut) <= limit
    assert not _BROKEN_ENTITY.search(cut)
    assert text.startswith(unescape_slack(cut.removesuffix("…")))


def test_format_message_numbers() -> None:
    """Intervals show in human units, seconds and steps; C, M, the setting and savings appear."""
    estimate = drifting_estimate(recommended_setting="save_steps=450", **ON_64_GPUS)
    message = format_message(estimate, NOTIFY)
    body = "\n".join(_texts(message)[1:-1])
    assert message["blocks"][0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Checkpoint interval off for llama-70b"},
    }
    assert "*Current interval:* 4h 00m (14,400 s, 1,800 steps)" in body
    assert "*Recommended interval:* 1h 00m (3,600 s, 450 steps of 8s); set save_steps=450" in body
    assert "5m 00s (300 s; CI 4m 40s to 5m 20s; from timing file, 12 saves)" in body
    assert "6h 00m (21,600 s; 90% CI 3h 20m to 13h 53m; 4 failures in 1d 0h of run time)" in body
    assert "nccl_timeout ×3, xid_79 ×1" in body
    # (0.35 - 0.15) × 64 GPUs × 24 h = 307.2 GPU-hours per day.
    assert "35.0% of run time now, 15.0% at the recommended interval" in body
    assert "saves 20.0% of run time = 307.2 GPU-hours/day on 64 GPUs" in body
    assert "interval is 4.0x the optimum" in body
    assert "• checkpoint cost changed from 4m 00s to 5m 00s over the last 3 saves" in body


def test_format_message_unknown_numbers() -> None:
    """An estimate without C, M or steps renders ``unknown`` instead of failing or showing 0."""
    estimate = drifting_estimate(
        checkpoint_cost_s=None,
        mtbf_s=None,
        mtbf_ci_s=None,
        recommended_interval_s=None,
        current_interval_steps=None,
        recommended_interval_steps=None,
        waste_fraction_current=None,
        drift_ratio=None,
    )
    body = "\n".join(_texts(format_message(estimate, NOTIFY)))
    assert "*Recommended interval:* unknown" in body
    assert "*Checkpoint cost C:* unknown (12 saves seen)" in body
    assert "*MTBF M:* unknown (4 failures in 1d 0h of run time)" in body
    assert "*Waste:* unknown" in body
    assert "GPU-hours" not in body


def test_resolve_message_is_short() -> None:
    """A RESOLVE decision says the job is back within range, without the C/M breakdown."""
    message = format_message(drifting_estimate(notes=()), RESOLVE)
    assert message["blocks"][0]["text"]["text"] == (
        "Checkpoint interval back within range for llama-70b"
    )
    assert len(message["blocks"]) == 2
    assert "MTBF" not in message["text"]


def test_log_derived_text_is_escaped_everywhere() -> None:
    """Job, notes, failure classes, setting and reason from logs arrive escaped in every block
    and in the fallback text, so no mention or link fires."""
    estimate = drifting_estimate(
        job=HOSTILE,
        notes=(Note(NoteCode.PLANNED_ENDS, by_name={HOSTILE: 1}),),
        failure_classes={HOSTILE: 1},
        recommended_setting=HOSTILE,
    )
    decision = Decision(Action.NOTIFY, HOSTILE, AlertState())
    message = format_message(estimate, decision)
    escaped = escape_slack(HOSTILE)
    for text in _texts(message):
        assert "<" not in text and ">" not in text
        assert not _BROKEN_ENTITY.search(text)
    assert escaped in message["blocks"][0]["text"]["text"]
    assert message["text"].count(escaped) == 5


def test_log_line_is_one_unescaped_line() -> None:
    """The log line carries the same facts, unescaped, and newlines in log text cannot split it."""
    planned = Note(NoteCode.PLANNED_ENDS, by_name={"a\nFAKE 2nd line": 1})
    estimate = drifting_estimate(notes=(planned,), recommended_setting="save_steps=450")
    line = format_log_line(estimate, NOTIFY)
    assert "\n" not in line
    assert "Recommended interval: 1h 00m (3,600 s, 450 steps of 8s); set save_steps=450" in line
    assert "Note: planned ends (a FAKE 2nd line: 1) censor" in line


def test_huge_message_stays_within_slack_limits() -> None:
    """Thousands of long notes with entities give ≤50 blocks, sections ≤3,000 characters, a header
    ≤150, and no entity cut in half."""
    notes = tuple(
        Note(NoteCode.PLANNED_ENDS, by_name={f"note {i}\n" + "&<>" * 700: 1}) for i in range(2_000)
    )
    message = format_message(drifting_estimate(job="j&" * 200, notes=notes), NOTIFY)
    blocks = message["blocks"]
    assert len(blocks) <= MAX_BLOCKS
    assert len(blocks[0]["text"]["text"]) <= MAX_HEADER_CHARS
    assert all(len(b["text"]["text"]) <= MAX_SECTION_CHARS for b in blocks[1:])
    assert len(message["text"]) <= MAX_FALLBACK_CHARS
    for text in _texts(message):
        assert not _BROKEN_ENTITY.search(text)
    shown = sum(b["text"]["text"].count("• ") for b in blocks[4:-1])
    assert blocks[-1]["text"]["text"] == f"_…and {len(notes) - shown} more notes not shown_"


# --- delivery to the fake Slack ------------------------------------------------------------


def test_fake_slack_answers_the_real_client(fake_slack: FakeSlack) -> None:
    """The fake serves slack-sdk's auth.test, plays a scripted error, and rejects a wrong token."""
    assert WebClient(token=fake_slack.token, base_url=fake_slack.base_url).auth_test()["ok"]
    fake_slack.script(error="channel_not_found")
    wrong = WebClient(token="xoxb-wrong", base_url=fake_slack.base_url)
    errors = []
    for _ in range(2):
        with pytest.raises(SlackApiError) as info:
            wrong.chat_postMessage(channel="#x", text="t")
        errors.append(info.value.response["error"])
    assert errors == ["channel_not_found", "invalid_auth"]
    assert [r.ok for r in fake_slack.requests] == [True, False, False]


def test_send_posts_once_with_token_channel_text_and_blocks(fake_slack: FakeSlack) -> None:
    """One send is one chat.postMessage with the bearer token, channel, text and blocks; it
    returns Slack's ts."""
    message = format_message(drifting_estimate(), NOTIFY)
    ts = _notifier(fake_slack).send(message)
    (request,) = fake_slack.requests
    assert request.path == "/api/chat.postMessage"
    assert request.headers["authorization"] == f"Bearer {fake_slack.token}"
    assert request.body["channel"] == "#training-alerts"
    assert request.body["text"] == message["text"]
    assert request.body["blocks"] == message["blocks"]
    assert re.fullmatch(r"\d+\.\d{6}", ts)


def test_rate_limit_waits_retry_after_then_sends_once(fake_slack: FakeSlack) -> None:
    """A 429 with Retry-After: 1 is waited out (≥1 s) and retried exactly once; the message lands
    once."""
    fake_slack.script(429, retry_after=1)
    _notifier(fake_slack).send(format_message(drifting_estimate(), NOTIFY))
    first, second = fake_slack.requests
    assert (first.status, second.status) == (429, 200)
    assert second.received_s - first.received_s >= 1.0
    assert len(fake_slack.messages) == 1


def test_long_retry_after_is_handed_back(fake_slack: FakeSlack) -> None:
    """A Retry-After longer than max_retry_after_s is not slept through: transient error at once,
    carrying the wait."""
    fake_slack.script(429, retry_after=120)
    start = time.monotonic()
    with pytest.raises(NotifyError) as info:
        _notifier(fake_slack).send(format_message(drifting_estimate(), NOTIFY))
    assert time.monotonic() - start < 1.0
    assert (info.value.kind, info.value.slack_error) == (NotifyErrorKind.TRANSIENT, "ratelimited")
    assert info.value.retry_after_s == 120
    assert len(fake_slack.requests) == 1


@pytest.mark.parametrize("status", [500, 503, 504])
def test_server_error_is_not_resent_inside_send(fake_slack: FakeSlack, status: int) -> None:
    """HTTP 5xx is one attempt only, transient and marked maybe-sent (Slack may have posted it),
    so the outbox checks the channel before sending again instead of posting twice."""
    fake_slack.script(status)
    with pytest.raises(NotifyError) as info:
        _notifier(fake_slack).send(format_message(drifting_estimate(), NOTIFY))
    assert (info.value.transient, info.value.maybe_sent) == (True, True)
    assert len(fake_slack.requests) == 1


def test_timeout_is_transient_and_bounded(fake_slack: FakeSlack) -> None:
    """A Slack that does not answer within timeout_s gives a transient NotifyError, not a hang,
    and is not retried (the post may have landed)."""
    fake_slack.script(delay_s=3.0)
    start = time.monotonic()
    with pytest.raises(NotifyError) as info:
        _notifier(fake_slack, timeout_s=0.3).send(format_message(drifting_estimate(), NOTIFY))
    assert time.monotonic() - start < 2.0
    assert info.value.kind is NotifyErrorKind.TRANSIENT
    assert info.value.maybe_sent
    assert len(fake_slack.requests) == 1


def test_unreachable_slack_is_transient() -> None:
    """A refused connection (Slack down) is retried once, then a transient NotifyError."""
    with FakeSlack() as slack:
        notifier = _notifier(slack)
    with pytest.raises(NotifyError) as info:
        notifier.send(format_message(drifting_estimate(), NOTIFY))
    assert info.value.kind is NotifyErrorKind.TRANSIENT


@pytest.mark.parametrize("code", ["invalid_auth", "channel_not_found", "token_revoked"])
def test_permanent_errors_never_show_the_token(
    fake_slack: FakeSlack, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack's permanent errors map to a permanent NotifyError, sent once, and the token is in no
    exception text, repr, chained cause or log record, even at DEBUG."""
    fake_slack.script(error=code)
    notifier = _notifier(fake_slack)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(NotifyError) as info:
        notifier.send(format_message(drifting_estimate(), NOTIFY))
    exc = info.value
    assert (exc.kind, exc.slack_error) == (NotifyErrorKind.PERMANENT, code)
    assert code in str(exc)
    assert exc.__cause__ is None and exc.__suppress_context__
    assert len(fake_slack.requests) == 1
    for text in (str(exc), repr(exc), repr(notifier), caplog.text):
        assert fake_slack.token not in text


def test_log_notifier_logs_unescaped_fallback(caplog: pytest.LogCaptureFixture) -> None:
    """Without a token the fallback text goes to the log at WARNING, with Slack escaping undone."""
    notifier: Notifier = LogNotifier(logging.getLogger("ckpt_advisor.test"))
    message = format_message(drifting_estimate(job=HOSTILE), NOTIFY)
    with caplog.at_level(logging.WARNING, logger="ckpt_advisor.test"):
        notifier.send(message)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == unescape_slack(message["text"])
    assert HOSTILE in record.getMessage()


def test_format_message_shows_money_classes_weibull_and_persist() -> None:
    """Money per day, M per class, the Weibull shape, M per node, a changed C and a persist
    slower than the interval all appear in the message."""
    estimate = drifting_estimate(
        excess_cost_per_day=768.0,
        mtbf_by_class_s={"nccl_timeout": 28_800.0, "xid_79": 86_400.0},
        weibull_shape=0.71,
        weibull_shape_ci=(0.6, 0.82),
        mtbf_source="weibull",
        units=8,
        mtbf_per_unit_s=172_800.0,
        checkpoint_cost_previous_s=120.0,
        persist_latency_s=20_000.0,
        **ON_64_GPUS,
    )
    message = format_message(estimate, NOTIFY, currency="€")
    body = "\n".join(_texts(message)[1:-1])
    assert "= 307.2 GPU-hours/day on 64 GPUs ≈ €768/day" in body
    assert "*Failures by class:* nccl_timeout ×3 (M 8h 00m), xid_79 ×1 (M 1d 0h)" in body
    assert "*Weibull shape:* 0.71 (0.60 to 0.82); widens M's interval" in body
    assert "*M per node:* 2d 0h (8 nodes in the job)" in body
    assert "*C changed:* from 2m 00s to 5m 00s recently" in body
    assert "longer than the interval, saves queue up" in body
