"""Notifier: the Slack messages (pure: action first, evidence, context; the detail in a thread)
and delivery with the real slack-sdk client against a loopback fake of Slack's Web API
(docs/RELIABILITY.md scenarios 18-21, 23)."""

from __future__ import annotations

import dataclasses
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
    check_limits,
    escape_slack,
    format_details,
    format_message,
    format_resolve,
    truncate_slack,
    unescape_slack,
)
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.agent.notify.wording import Sent
from ckpt_advisor.rules.model import (
    Action,
    AlertState,
    Decision,
    JobEstimate,
    Note,
    NoteCode,
    Reason,
    ReasonCode,
)
from tests.agent.fake_slack import FakeSlack
from tests.agent.helpers import ON_64_GPUS
from tests.samples import drifting_estimate

HOSTILE = "<!channel> <!here> <@U123> <http://x|y> & done"
_BROKEN_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")

DRIFT = Reason(ReasonCode.DRIFT, {"ratio": 4.0, "drift_ratio": 1.5})
NOTIFY = Decision(Action.NOTIFY, DRIFT, AlertState(in_drift=True))
REPEAT = Decision(Action.REPEAT, Reason(ReasonCode.REPEAT_DUE, {"ratio": 4.0}), AlertState(True))
RESOLVE = Decision(
    Action.RESOLVE, Reason(ReasonCode.RESOLVED, {"ratio": 1.1, "resolve_ratio": 1.3}), AlertState()
)


def _texts(message: dict[str, Any]) -> list[str]:
    """Every text string a Slack client would render: each block's text (a context block's
    elements) and the fallback."""
    texts = []
    for block in message["blocks"]:
        if block["type"] == "context":
            texts += [element["text"] for element in block["elements"]]
        else:
            texts.append(block["text"]["text"])
    return [*texts, message["text"]]


def _notifier(slack: FakeSlack, **kwargs: Any) -> SlackNotifier:
    return SlackNotifier(slack.token, "#training-alerts", base_url=slack.base_url, **kwargs)


def _lower_bound(upper_s: float | None, **changes: Any) -> JobEstimate:
    """The drifting job with C read from log lines: 43 s, a lower bound (open above without
    ``upper_s``), the interval range over it, and its note."""
    values = {"cost_s": 43.0} if upper_s is None else {"cost_s": 43.0, "upper_s": upper_s}
    base = drifting_estimate(recommended_setting="save_steps=450", **ON_64_GPUS)
    return dataclasses.replace(
        base,
        checkpoint_cost_s=43.0,
        checkpoint_cost_source="log",
        checkpoint_cost_ci_s=None,
        checkpoint_cost_is_lower_bound=True,
        checkpoint_cost_range_s=(43.0, upper_s),
        recommended_interval_range_s=(2_400.0, None if upper_s is None else 7_200.0),
        recommended_interval_steps_range=(300, None if upper_s is None else 900),
        excess_gpu_hours_per_day_range=None if upper_s is None else (150.0, 310.0),
        notes=(Note(NoteCode.COST_LOWER_BOUND, values), *base.notes),
        **changes,
    )


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


def test_message_leads_with_the_action_then_evidence_then_context() -> None:
    """Header, then one action line (what to set in the job's setting and in seconds, from
    what, the goodput it buys and the GPU-hours at stake), then C and M in two
    lines with their ranges and counts, then as-of, news and the silence command; the fallback
    says the same action first."""
    estimate = drifting_estimate(
        recommended_setting="save_steps=450",
        goodput_current=0.648,
        goodput_recommended=0.851,
        **ON_64_GPUS,
    )
    message = format_message(estimate, NOTIFY)
    header, action, evidence, context = message["blocks"]
    assert header == {
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": "Checkpoint interval off for llama-70b",
            "emoji": False,
        },
    }
    # goodput simulated at both intervals; (0.35 - 0.15) waste × 64 GPUs × 24 h = 307 GPU-h/day
    assert action["text"]["text"] == (
        "*Set* `save_steps=450` (1h 00m = 3,600 s; now 1,800 steps = 4h 00m): goodput 64.8% → "
        "85.1%, 307 GPU-h/day at stake"
    )
    assert evidence["text"]["text"] == (
        "*C* 5m 00s (90% CI 4m 40s–5m 20s) from the timing file, 12 saves\n"
        "*M* 6h 00m (90% CI 3h 20m–13h 53m) from 4 failures in 1d 0h of run time"
    )
    [context_text] = [e["text"] for e in context["elements"]]
    assert context_text.startswith("As of <!date^1700000000^{date_short_pretty} at {time}|")
    assert "first message about this job" in context_text
    assert context_text.endswith("silence: `ckpt-advisor silence --job llama-70b --for 24h`")
    assert message["text"].startswith(
        "Checkpoint interval off for llama-70b: Set save_steps=450 (1h 00m = 3,600 s; now 1,800 "
        "steps = 4h 00m): goodput 64.8% → 85.1%, 307 GPU-h/day at stake. C 5m 00s"
    )
    assert "MTBF" not in message["text"] and "nccl_timeout" not in message["text"]


def test_a_repeat_says_what_changed_since_the_last_message() -> None:
    """Against the last message (250 steps, C 4 min, M 5h 33m) the context names the moves."""
    estimate = drifting_estimate(recommended_setting="save_steps=450")
    previous = Sent(1_699_900_000.0, 2_000.0, 250, 240.0, 20_000.0)
    message = format_message(estimate, REPEAT, previous=previous)
    assert message["blocks"][0]["text"]["text"] == "Checkpoint interval still off for llama-70b"
    assert (
        "since the message as of 2023-11-13 18:26 UTC: advice from 250 to 450 steps, C rose from "
        "4m 00s to 5m 00s, M rose from 5h 33m to 6h 00m"
    ) in message["blocks"][-1]["elements"][0]["text"]
    same = Sent(1_699_900_000.0, 3_600.0, 450, 300.0, 21_600.0)
    unchanged = format_message(estimate, REPEAT, previous=same)["text"]
    assert "unchanged since the message as of" in unchanged


def test_a_lower_bound_of_c_is_shown_as_one_and_says_first_how_to_get_it_exactly() -> None:
    """C from log lines with no upper bound: the action says "or more" and "≥" the interval,
    the next line says C is a lower bound and how to add a timing file, the evidence says
    "C ≥ 43s", and the goodput and GPU-hours are given at that C; with an upper bound the
    setting, the interval and the GPU-hours are ranges over the plausible C, the goodput is at
    its bound, and C is "43s–2m 01s"."""
    message = format_message(_lower_bound(None), NOTIFY)
    _, action, bound, evidence, _ = message["blocks"]
    assert action["text"]["text"] == (
        "*Set* `save_steps=450 or more` (≥ 1h 00m = 3,600 s; now 1,800 steps = 4h 00m): goodput "
        "+20.0 points, 307 GPU-h/day at stake if C is 43s"
    )
    assert bound["text"]["text"].startswith(
        ":warning: C ≥ 43s is a lower bound (log lines miss part of a save"
    )
    assert "a timing file gives the exact value: add hf_trainer_callback" in bound["text"]["text"]
    assert evidence["text"]["text"].startswith("*C* ≥ 43s from log lines (a lower bound)")
    assert "C ≥ 43s is a lower bound" in message["text"]
    bounded = format_message(_lower_bound(121.0), NOTIFY)
    _, action, bound, evidence, _ = bounded["blocks"]
    assert action["text"]["text"] == (
        "*Set* `save_steps=300–900` (40m 00s–2h 00m; now 1,800 steps = 4h 00m): goodput +20.0 "
        "points if C is 43s; 150–310 GPU-h/day at stake"
    )
    assert "at most 2m 01s where the progress bar keeps time" in bound["text"]["text"]
    assert evidence["text"]["text"].startswith("*C* 43s–2m 01s from log lines")


def test_the_detail_is_a_reply_with_the_numbers_classes_weibull_and_notes() -> None:
    """The thread reply carries what the message leaves out: intervals in seconds and steps,
    money per day, the simulated goodput, M per class, the Weibull shape, M per node, a changed
    C, a persist slower than the interval, the reason and the notes."""
    estimate = drifting_estimate(
        recommended_setting="save_steps=450",
        excess_cost_per_day=768.0,
        mtbf_by_class_s={"nccl_timeout": 28_800.0, "xid_79": 86_400.0},
        weibull_shape=0.71,
        weibull_shape_ci=(0.6, 0.82),
        mtbf_source="weibull",
        units=8,
        mtbf_per_unit_s=172_800.0,
        checkpoint_cost_previous_s=120.0,
        persist_latency_s=20_000.0,
        goodput_current=0.648,
        goodput_recommended=0.851,
        **ON_64_GPUS,
    )
    assert "(€768/day)" in format_message(estimate, NOTIFY, currency="€")["text"]
    body = "\n".join(_texts(format_details(estimate, NOTIFY)))
    assert "*Current interval:* 4h 00m (14,400 s, 1,800 steps)" in body
    assert "*Recommended interval:* 1h 00m (3,600 s, 450 steps of 8s); set save_steps=450" in body
    assert "*Failures by class:* nccl_timeout ×3 (M 8h 00m), xid_79 ×1 (M 1d 0h)" in body
    assert "*Weibull shape:* 0.71 (0.60–0.82); widens M's interval" in body
    assert "*M per node:* 2d 0h (8 nodes in the job)" in body
    assert "*C changed:* from 2m 00s to 5m 00s recently" in body
    assert (
        "*Goodput:* 64.8% now, 85.1% at the recommended interval (of wall time, restarts "
        "included: simulated" in body
    )
    assert "longer than the interval, saves queue up" in body
    assert "*Why:* drift: 4.00× the optimum (beyond 1.5×)" in body
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
    assert "*Recommended interval unknown* (now 4h 00m)" in body
    assert "*C* unknown (12 saves seen)" in body
    assert "*M* unknown (4 failures in 1d 0h of run time)" in body
    assert "GPU-h" not in body
    assert "*Waste:* unknown" in "\n".join(_texts(format_details(estimate, NOTIFY)))


def test_a_confidence_interval_that_reads_as_c_is_left_out() -> None:
    """C of 4 min from a timing file whose CI is 239.8–240.2 s reads "C 4m 00s", not
    "(90% CI 4m 00s–4m 00s)"; a CI that reads differently is kept."""
    tight = drifting_estimate(checkpoint_cost_s=240.0, checkpoint_cost_ci_s=(239.8, 240.2))
    evidence = format_message(tight, NOTIFY)["blocks"][2]["text"]["text"]
    assert evidence.startswith("*C* 4m 00s from the timing file, 12 saves\n")
    wide = dataclasses.replace(tight, checkpoint_cost_ci_s=(238.0, 242.0))
    evidence = format_message(wide, NOTIFY)["blocks"][2]["text"]["text"]
    assert evidence.startswith("*C* 4m 00s (90% CI 3m 58s–4m 02s) from the timing file")


def test_each_interval_is_labelled_with_the_estimates_level() -> None:
    """M's and C's intervals carry the estimate's own level (``[estimation] confidence``):
    "80% CI" at 0.8, "90% CI" at 0.9, and a bare "CI" for an estimate that recorded none."""
    for confidence, label in ((0.8, "80% CI"), (0.9, "90% CI"), (None, "CI")):
        e = drifting_estimate(confidence=confidence, checkpoint_cost_ci_s=(238.0, 242.0))
        evidence = format_message(e, NOTIFY)["blocks"][2]["text"]["text"]
        c_line, m_line = evidence.splitlines()[:2]
        assert f"({label} 3m 58s–4m 02s)" in c_line, c_line
        assert m_line.startswith(f"*M* 6h 00m ({label} 3h 20m–13h 53m)"), m_line


def test_resolve_is_a_short_reply() -> None:
    """A RESOLVE says the job is back within range, how close, and the interval; no C/M."""
    message = format_resolve(drifting_estimate(notes=()), RESOLVE)
    assert message["blocks"][0]["text"]["text"] == (
        ":white_check_mark: *Checkpoint interval back within range for llama-70b*"
    )
    assert message["text"] == (
        "Checkpoint interval back within range for llama-70b: Back within range: 1.10× the "
        "optimum (inside 1.3×); the interval is 4h 00m (14,400 s, 1,800 steps)"
    )
    assert "MTBF" not in message["text"]


def test_log_derived_text_is_escaped_everywhere() -> None:
    """Job, notes, failure classes and setting from logs arrive escaped in every mrkdwn text
    and in the fallback, so no mention or link fires; the header is plain text and shows them
    as written (no ``&lt;``)."""
    estimate = drifting_estimate(
        job=HOSTILE,
        notes=(Note(NoteCode.PLANNED_ENDS, by_name={HOSTILE: 1}),),
        failure_classes={HOSTILE: 1},
        recommended_setting=HOSTILE,
    )
    message, details = format_message(estimate, NOTIFY), format_details(estimate, NOTIFY)
    header = message["blocks"][0]["text"]
    assert header == {"type": "plain_text", "text": f"Checkpoint interval off for {HOSTILE}",
                      "emoji": False}  # fmt: skip
    for text in _texts(message)[1:] + _texts(details):
        assert "<" not in text.replace("<!date^", "") and ">" not in text.split("|")[-1][:-1]
        assert not _BROKEN_ENTITY.search(text)
    escaped = escape_slack(HOSTILE)
    assert message["text"].count(escaped) == 3  # the title, the setting, the silence command
    assert details["text"].count(escaped) == 4  # the job, the setting, the class, the note


def test_huge_message_stays_within_slack_limits() -> None:
    """Thousands of long notes with entities and a huge job name give ≤50 blocks, sections
    ≤3,000 characters, a header ≤150, no entity cut in half, and pass slack-sdk's own Block Kit
    checks."""
    notes = tuple(
        Note(NoteCode.PLANNED_ENDS, by_name={f"note {i}\n" + "&<>" * 700: 1}) for i in range(2_000)
    )
    estimate = drifting_estimate(job="j&" * 200, notes=notes)
    message, details = format_message(estimate, NOTIFY), format_details(estimate, NOTIFY)
    for payload in (message, details):
        check_limits(payload)
        blocks = payload["blocks"]
        assert len(blocks) <= MAX_BLOCKS
        assert all(len(t) <= MAX_SECTION_CHARS for t in _texts(payload)[:-1])
        assert len(payload["text"]) <= MAX_FALLBACK_CHARS
        mrkdwn = _texts(payload)[1:] if payload is message else _texts(payload)  # not the header
        for text in mrkdwn:
            assert not _BROKEN_ENTITY.search(text)
    assert len(message["blocks"][0]["text"]["text"]) == MAX_HEADER_CHARS
    blocks = details["blocks"]
    shown = sum(b["text"]["text"].count("• ") for b in blocks[4:-1])
    assert blocks[-1]["text"]["text"] == f"_…and {len(notes) - shown} more notes not shown_"
    with pytest.raises(ValueError, match="150"):
        check_limits({"text": "t", "blocks": [{"type": "header", "text": {"type": "plain_text",
                      "text": "x" * 151}}]})  # fmt: skip


def test_log_notifier_logs_unescaped_fallback(caplog: pytest.LogCaptureFixture) -> None:
    """Without a token the fallback text goes to the log at WARNING, with Slack escaping undone:
    one line with the action and a lower bound shown as one."""
    notifier: Notifier = LogNotifier(logging.getLogger("ckpt_advisor.test"))
    message = format_message(_lower_bound(None, job=HOSTILE), NOTIFY)
    with caplog.at_level(logging.WARNING, logger="ckpt_advisor.test"):
        notifier.send(message)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == unescape_slack(message["text"])
    assert "\n" not in record.getMessage()
    assert f"Checkpoint interval off for {HOSTILE}: Set save_steps=450 or more" in (
        record.getMessage()
    )
    assert "C ≥ 43s from log lines" in record.getMessage()


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
