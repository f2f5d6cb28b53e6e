"""A loopback stand-in for Slack's Web API, for tests that drive the real slack-sdk client.

It speaks just enough of the API (https://api.slack.com/web) for this project:
``POST /api/chat.postMessage`` (with ``thread_ts``: a reply), ``POST
/api/conversations.history`` (the channel's messages posted here, newest first, with their
metadata; replies are not in it), ``POST /api/conversations.replies`` (a thread: its parent,
then its replies), ``POST /api/auth.test``, and the three steps of slack-sdk's
``files_upload_v2``: ``files.getUploadURLExternal`` (needs the ``files:write`` scope, else
``missing_scope``), the upload itself (``POST /upload/<file id>``, the raw bytes) and
``files.completeUploadExternal`` (shares the file: a message with ``files`` in the channel, or
in the thread of ``thread_ts``). Bodies are JSON or form-encoded (query parameters too), with
``Authorization: Bearer <token>``; every answer carries the token's scopes in
``x-oauth-scopes``, as Slack's do. Every request is recorded; the answer to each request can be
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
from urllib.parse import parse_qsl, urlsplit

DEFAULT_TOKEN = "xoxb-fake-0000-token-for-tests"
DEFAULT_SCOPES = ("chat:write", "channels:history", "files:write")
_JSON_FIELDS = frozenset({"blocks", "attachments", "metadata", "files"})


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

    def __init__(
        self, token: str = DEFAULT_TOKEN, scopes: tuple[str, ...] = DEFAULT_SCOPES
    ) -> None:
        self.token = token
        self.scopes = scopes
        self.uploads: dict[str, bytes] = {}  # file id -> the bytes uploaded for it
        self._files: dict[str, dict[str, Any]] = {}  # file id -> its name (not shared yet)
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

    @property
    def posted(self) -> list[dict[str, Any]]:
        """What is in the channels, in the order it arrived: ``channel``, ``ts``, ``text``,
        ``thread_ts`` (for a reply), ``metadata`` and ``files`` (a shared upload) when set."""
        with self._lock:
            return [dict(m) for m in self._posted]

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
        method = path.rsplit("/", 1)[-1]
        if path.startswith("/upload/"):  # a presigned upload URL: no token
            return reply, self._upload(method, body)
        auth = headers.get("authorization", "")
        if not auth:
            return reply, {"ok": False, "error": "not_authed"}
        if auth != f"Bearer {self.token}":
            return reply, {"ok": False, "error": "invalid_auth"}
        return reply, self._method(method, body)

    def _method(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to one authorised Web API call."""
        if method == "chat.postMessage":
            channel = body.get("channel")
            if not channel:
                return {"ok": False, "error": "channel_not_found"}
            if not body.get("text") and not body.get("blocks"):
                return {"ok": False, "error": "no_text"}
            ts = self._post(channel, body.get("text"), body.get("thread_ts"), _meta(body))
            return {"ok": True, "channel": channel, "ts": ts}
        if method == "conversations.history":
            oldest = float(body.get("oldest") or 0)
            with self._lock:
                found = [
                    m
                    for m in reversed(self._posted)
                    if m["channel"] == body.get("channel")
                    and float(m["ts"]) >= oldest
                    and m.get("thread_ts") is None
                ]
            return {"ok": True, "messages": found, "has_more": False}
        if method == "conversations.replies":
            parent, oldest = body.get("ts"), float(body.get("oldest") or 0)
            with self._lock:
                found = [
                    m
                    for m in self._posted
                    if m["channel"] == body.get("channel")
                    and (m["ts"] == parent or (m.get("thread_ts") == parent))
                    and float(m["ts"]) >= oldest
                ]
            return {"ok": True, "messages": found, "has_more": False}
        if method == "files.getUploadURLExternal":
            if "files:write" not in self.scopes:
                return {
                    "ok": False,
                    "error": "missing_scope",
                    "needed": "files:write",
                    "provided": ",".join(self.scopes),
                }
            with self._lock:
                file_id = f"F{len(self._files) + 1:08d}"
                self._files[file_id] = {"id": file_id, "name": body.get("filename")}
            url = f"http://127.0.0.1:{self.port}/upload/{file_id}"
            return {"ok": True, "upload_url": url, "file_id": file_id}
        if method == "files.completeUploadExternal":
            return self._complete(body)
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://fake.slack.test/",
                "team": "Fake",
                "user": "ckpt-advisor",
                "team_id": "T00000000",
                "user_id": "U00000000",
                "bot_id": "B00000000",
            }
        return {"ok": False, "error": "unknown_method"}

    def _post(
        self, channel: str, text: str | None, thread_ts: str | None, extra: dict[str, Any]
    ) -> str:
        """Put a message in a channel (or a thread); return its ts."""
        ts = self._next_ts()
        message = {"channel": channel, "ts": ts, "text": text, **extra}
        if thread_ts:
            message["thread_ts"] = thread_ts
        with self._lock:
            self._posted.append(message)
        return ts

    def _upload(self, file_id: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if file_id not in self._files:
                return {"ok": False, "error": "file_not_found"}
            self.uploads[file_id] = body.get("_raw", b"")
        return {"ok": True}

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Share uploaded files: one message holding them, in the channel or the thread."""
        with self._lock:
            wanted = [f.get("id") for f in body.get("files") or []]
            if not wanted or any(i not in self.uploads for i in wanted):
                return {"ok": False, "error": "file_not_found"}
            files = [
                {**self._files[i], "title": f.get("title")}
                for i, f in zip(wanted, body["files"], strict=True)
            ]
        channel = body.get("channel_id")
        if channel:
            self._post(
                channel, body.get("initial_comment"), body.get("thread_ts"), {"files": files}
            )
        return {"ok": True, "files": files}


def _meta(body: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": body["metadata"]} if body.get("metadata") else {}


def _parse_body(path: str, content_type: str, raw: bytes) -> dict[str, Any]:
    """Parse a JSON or form-encoded body and the query string; JSON-valued form fields
    (``blocks``, ``files``) are decoded. An upload's bytes are kept whole as ``_raw``."""
    if path.startswith("/upload/"):
        return {"_raw": raw}
    fields: dict[str, Any] = dict(parse_qsl(urlsplit(path).query, keep_blank_values=True))
    text = raw.decode("utf-8") if raw else ""
    if text and content_type.startswith("application/json"):
        parsed = json.loads(text)
        fields.update(parsed if isinstance(parsed, dict) else {"_": parsed})
        return fields
    fields.update(parse_qsl(text, keep_blank_values=True))
    for name in _JSON_FIELDS & fields.keys():
        if isinstance(fields[name], str):
            fields[name] = json.loads(fields[name])
    return fields


def _handler_for(slack: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            received_s = time.monotonic()
            headers = {k.lower(): v for k, v in self.headers.items()}
            raw = self.rfile.read(int(headers.get("content-length", "0") or 0))
            path = urlsplit(self.path).path
            body = _parse_body(self.path, headers.get("content-type", ""), raw)
            reply, payload = slack._answer(path, headers, body)
            slack._record(
                RecordedRequest(
                    "POST", path, headers, body, reply.status, payload["ok"], received_s
                )
            )
            if reply.delay_s and slack._stopping.wait(reply.delay_s):
                return
            data = json.dumps(payload).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-oauth-scopes", ",".join(slack.scopes))
                if reply.retry_after is not None:
                    self.send_header("Retry-After", str(reply.retry_after))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a scripted delay outlived its timeout)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet (the default writes every request to stderr)."""

    return Handler
