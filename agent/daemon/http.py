"""The metrics listener: ``/metrics`` (prometheus-client's WSGI app) and ``/advice/JOB``.

One threaded WSGI server (the standard library's ``wsgiref``, as prometheus-client's own
``start_wsgi_server``) at ``[metrics] listen``. ``/advice/JOB`` (``JOB`` percent-encoded as in
URLs) answers the job's advice (``agent/advice.py``) as JSON when ``[advice] endpoint`` is on;
otherwise, and for a job without advice, 404 with a JSON ``{"error": …}``. Every other path is
the metrics, as before.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import unquote
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from ckpt_advisor.agent.advice import AdviceBoard

ADVICE_PREFIX = "/advice/"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def routes(registry: CollectorRegistry, board: AdviceBoard | None) -> WsgiApp:
    """The listener's WSGI app: ``/advice/JOB`` from ``board``, anything else the metrics."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(ADVICE_PREFIX):
            served: Iterable[bytes] = metrics(environ, start_response)
            return served
        job = unquote(path[len(ADVICE_PREFIX) :])
        if board is None or not board.endpoint:
            return _json(start_response, "404 Not Found", {"error": "[advice] endpoint is off"})
        record = board.get(job)
        if record is None:
            return _json(start_response, "404 Not Found", {"error": f"no advice for job {job!r}"})
        return _json(start_response, "200 OK", record)

    return app


def _json(start_response: StartResponse, status: str, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [data]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line per scrape would drown the daemon's log)."""


def serve(host: str, port: int, app: WsgiApp) -> WSGIServer:
    """Serve ``app`` on ``host:port`` (IPv4 or IPv6) from a daemon thread; returns the server,
    whose ``shutdown()`` stops it.

    Raises:
        OSError: the address cannot be bound (or resolved).
    """
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(_Server):
        address_family = family[0]

    server = make_server(str(family[4][0]), port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
