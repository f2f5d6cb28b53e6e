"""A loopback stand-in for Slack's Web API, for tests that drive the real slack-sdk client.

It speaks just enough of the API (https://api.slack.com/web) for this project:
``POST /api/chat.postMessage``, ``POST /api/conversations.history`` (messages posted here,
newest first, with their metadata) and ``POST /api/auth.test``, with JSON or form-encoded bodies and
``Authorization: Bearer <token>``. Every request is recorded; the answer to each request can be
scripted in advance (rate limit, server error, slow answer, Slack error code)::

    with FakeSlack() as slack:
        slack.script(429, retry_after=1)           # the next request is rate limited
        client = WebClient(token=slack.token, base_url=slack.base_url)
        client.chat_postMessage(channel="#x", text="hi")   # retried by a retry handler
        assert [r.status for r in slack.wait_for(2)] == [429, 200]
        assert slack.messages[0]["text"] == "hi"

Slack answers API errors with HTTP 200 and ``{"ok": false, "error": "<code>"}``; rate limits with
HTTP 429 and a ``Retry-After`` header in seconds
(https://api.slack.com/apis/rate-limits). Both are mimicked here.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl

DEFAULT_TOKEN = "xoxb-fake-0000-token-for-tests"
_JSON_FIELDS = frozenset({"blocks", "attachments", "metadata"})


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: HTTP ``status``, optional ``Retry-After`` seconds, a delay before
    answering, and for status 200 an optional Slack ``error`` code (``ok: false``)."""

    status: int = 200
    retry_after: int | None = None
    delay_s: float = 0.0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server saw it.

    Attributes:
        method: HTTP method (slack-sdk always POSTs).
        path: URL path, e.g. ``/api/chat.postMessage``.
        headers: request headers, names lower-cased.
        body: parsed body: JSON object, or form fields (JSON-valued fields such as ``blocks``
            decoded), or ``{}``.
        status: the HTTP status answered.
        ok: the ``ok`` value answered (True only when the call succeeded).
        received_s: ``time.monotonic()`` when the request arrived.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    ok: bool
    received_s: float


class FakeSlack:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) answering like Slack's Web API.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Thread-safe: requests are
    served on their own threads while the test reads :attr:`requests`.
    """

    def __init__(self, token: str = DEFAULT_TOKEN) -> None:
        self.token = token
        self._lock = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._ts_counter = 0
        self._posted: list[dict[str, Any]] = []  # what is in the channels, even if unanswered
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-slack", daemon=True
        )

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The value for slack-sdk's ``WebClient(base_url=...)``, ending in ``/api/``."""
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Bodies of the ``chat.postMessage`` calls that were answered ``ok: true``."""
        return [r.body for r in self.requests if r.ok and r.path.endswith("/chat.postMessage")]

    def script(
        self,
        status: int = 200,
        *,
        retry_after: int | None = None,
        delay_s: float = 0.0,
        error: str | None = None,
    ) -> None:
        """Queue the answer to the next unscripted request (first in, first out).

        ``script(429, retry_after=1)``, ``script(503)``, ``script(delay_s=2)``,
        ``script(error="invalid_auth")``. Requests beyond the script are answered normally.
        """
        with self._lock:
            self._script.append(Reply(status, retry_after, delay_s, error))

    def wait_for(self, n: int, timeout_s: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``n`` requests arrived; return them.

        Raises:
            TimeoutError: fewer than ``n`` requests within ``timeout_s`` seconds.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= n, timeout_s):
                raise TimeoutError(
                    f"fake Slack saw {len(self._requests)} request(s), wanted {n}, "
                    f"within {timeout_s} s"
                )
            return list(self._requests)

    def start(self) -> FakeSlack:
        """Start serving on a background thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; a scripted delay still running is cut short."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._script.popleft() if self._script else Reply()

    def _next_ts(self) -> str:
        with self._lock:
            self._ts_counter += 1
            return f"{int(time.time())}.{self._ts_counter:06d}"

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def _answer(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[Reply, dict[str, Any]]:
        """Decide the reply and the JSON payload for one request (no I/O)."""
        reply = self._next_reply()
        if reply.status != HTTPStatus.OK:
            error = "ratelimited" if reply.status == HTTPStatus.TOO_MANY_REQUESTS else "fatal_error"
            return reply, {"ok": False, "error": error}
        if reply.error is not None:
            return reply, {"ok": False, "error": reply.error}
        auth = headers.get("authorization", "")
        if not auth:
            return reply, {"ok": False, "error": "not_authed"}
        if auth != f"Bearer {self.token}":
            return reply, {"ok": False, "error": "invalid_auth"}
        method = path.rsplit("/", 1)[-1]
        if method == "chat.postMessage":
            channel = body.get("channel")
            if not channel:
                return reply, {"ok": False, "error": "channel_not_found"}
            if not body.get("text") and not body.get("blocks"):
                return reply, {"ok": False, "error": "no_text"}
            ts = self._next_ts()
            with self._lock:
                self._posted.append(
                    {"channel": channel, "ts": ts, "text": body.get("text"), **_meta(body)}
                )
            return reply, {"ok": True, "channel": channel, "ts": ts}
        if method == "conversations.history":
            oldest = float(body.get("oldest") or 0)
            with self._lock:
                found = [
                    m
                    for m in reversed(self._posted)
                    if m["channel"] == body.get("channel") and float(m["ts"]) >= oldest
                ]
            return reply, {"ok": True, "messages": found, "has_more": False}
        if method == "auth.test":
            return reply, {
                "ok": True,
                "url": "https://fake.slack.test/",
                "team": "Fake",
                "user": "ckpt-advisor",
                "team_id": "T00000000",
                "user_id": "U00000000",
                "bot_id": "B00000000",
            }
        return reply, {"ok": False, "error": "unknown_method"}


def _meta(body: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": body["metadata"]} if body.get("metadata") else {}


def _parse_body(content_type: str, raw: bytes) -> dict[str, Any]:
    """Parse a JSON or form-encoded body; JSON-valued form fields (``blocks``) are decoded."""
    if not raw:
        return {}
    text = raw.decode("utf-8")
    if content_type.startswith("application/json"):
        parsed = json.loads(text)
        return parsed if isinstance(parsed, dict) else {"_": parsed}
    fields: dict[str, Any] = dict(parse_qsl(text, keep_blank_values=True))
    for name in _JSON_FIELDS & fields.keys():
        fields[name] = json.loads(fields[name])
    return fields


def _handler_for(slack: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            received_s = time.monotonic()
            headers = {k.lower(): v for k, v in self.headers.items()}
            raw = self.rfile.read(int(headers.get("content-length", "0") or 0))
            body = _parse_body(headers.get("content-type", ""), raw)
            reply, payload = slack._answer(self.path, headers, body)
            slack._record(
                RecordedRequest(
                    "POST", self.path, headers, body, reply.status, payload["ok"], received_s
                )
            )
            if reply.delay_s and slack._stopping.wait(reply.delay_s):
                return
            data = json.dumps(payload).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                if reply.retry_after is not None:
                    self.send_header("Retry-After", str(reply.retry_after))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a scripted delay outlived its timeout)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet (the default writes every request to stderr)."""

    return Handler
