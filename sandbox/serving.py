"""Serving the sandbox on loopback, ready only when it says so.

`ThreadedMotoServer` answers as soon as it binds its port, but the sandbox is not a working AWS
until the stack is deployed and corrected and the runtime, the SQS poller and the event bus run.
A client that polls `describe_stacks` in that window sees `CREATE_COMPLETE` (moto's
`create_stack` is synchronous) and uploads into a pipeline that cannot yet deliver its events;
worse, moto builds a stack's resources lazily, so a `describe_stacks` racing `create_stack`
creates a second copy of a table that the stack's Outputs then name.

`GatedMotoServer` therefore holds every request that is not the sandbox's own until the
`ReadinessGate` opens: a client's first call simply takes as long as the start-up, as a call to a
stack still `CREATE_IN_PROGRESS` would have to wait. If the start-up fails, held and later
requests get HTTP 503 with the reason. The sandbox's own clients identify themselves by the
user-agent marker that `sandbox.clients.sandbox_client` adds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from sandbox.clients import INTERNAL_USER_AGENT

# How long a client's request may be held while the sandbox starts (a start takes seconds).
MAX_HOLD_SECONDS = 600.0

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class ReadinessGate:
    """Closed while the sandbox starts; opened once it is ready, or failed with a reason."""

    def __init__(self) -> None:
        self._settled = threading.Event()
        self._failure: str | None = None

    def open(self) -> None:
        self._settled.set()

    def fail(self, reason: str) -> None:
        self._failure = reason
        self._settled.set()

    @property
    def ready(self) -> bool:
        return self._settled.is_set() and self._failure is None

    def wait(self, timeout: float) -> str | None:
        """Block until settled; None when ready, else why the sandbox cannot answer."""
        if not self._settled.wait(timeout):
            return f"the sandbox did not become ready within {timeout:.0f} s"
        return None if self._failure is None else f"the sandbox failed to start: {self._failure}"

    def wrap(self, app: WsgiApp, max_hold_seconds: float = MAX_HOLD_SECONDS) -> WsgiApp:
        def gated(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if not self.ready and INTERNAL_USER_AGENT not in environ.get("HTTP_USER_AGENT", ""):
                problem = self.wait(max_hold_seconds)
                if problem is not None:
                    body = json.dumps({"__type": "ServiceUnavailable", "message": problem}).encode()
                    start_response(
                        "503 Service Unavailable",
                        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
                    )
                    return [body]
            return app(environ, start_response)

        return gated


# An action: (HTTP method, query string, request body) -> (HTTP status, JSON-ready answer).
Action = Callable[[str, str, bytes], tuple[int, Any]]
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
MAX_ACTION_BODY = 64 * 1024


def with_routes(
    app: WsgiApp, routes: Mapping[str, Callable[[], Any]], actions: Mapping[str, Action] | None = None
) -> WsgiApp:
    """`app`, except that a GET of one of `routes`' paths answers its function's value as JSON
    (the sandbox's own facts, such as the clock its alarms run on), and any request to one of
    `actions`' paths is answered by its action (the sandbox's controls, such as its faults)."""
    actions = dict(actions or {})

    def routed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        action = actions.get(path)
        if action is not None:
            status, answer = action(environ.get("REQUEST_METHOD", ""), environ.get("QUERY_STRING", ""), _body(environ))
            return _json(start_response, status, answer)
        route = routes.get(path)
        if route is None or environ.get("REQUEST_METHOD") != "GET":
            return app(environ, start_response)
        return _json(start_response, 200, route())

    return routed


def _body(environ: dict[str, Any]) -> bytes:
    try:
        length = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_ACTION_BODY)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length) if length > 0 else b""


def _json(start_response: Callable[..., Any], status: int, answer: Any) -> list[bytes]:
    body = json.dumps(answer).encode()
    start_response(
        f"{status} {_REASONS.get(status, 'Error')}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


class GatedMotoServer(ThreadedMotoServer):
    """moto's threaded server with a readiness gate in front of its WSGI app (and `routes`)."""

    def __init__(
        self,
        gate: ReadinessGate,
        ip_address: str = "127.0.0.1",
        port: int = 0,
        routes: Mapping[str, Callable[[], Any]] | None = None,
        actions: Mapping[str, Action] | None = None,
    ) -> None:
        super().__init__(ip_address=ip_address, port=port, verbose=False)
        self.gate = gate
        self.routes = dict(routes or {})
        self.actions = dict(actions or {})

    def _server_entry(self) -> None:  # moto seam: the same app ThreadedMotoServer builds, gated
        app = with_routes(DomainDispatcherApplication(create_backend_app), self.routes, self.actions)
        self._server = make_server(
            self._ip_address, self._port, self.gate.wrap(app), True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()
