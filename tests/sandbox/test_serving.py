"""The readiness gate: others wait while the sandbox starts, its own machinery does not."""

from __future__ import annotations

import threading
from typing import Any

from sandbox.clients import INTERNAL_USER_AGENT
from sandbox.serving import ReadinessGate


def call(app: Any, user_agent: str = "Boto3/1.40 md/Botocore") -> tuple[str, bytes]:
    status: list[str] = []
    body = b"".join(app({"HTTP_USER_AGENT": user_agent}, lambda s, headers: status.append(s)))
    return status[0], body


def backend(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [])
    return [b"answered"]


def test_a_request_is_held_until_the_sandbox_is_ready_then_answered() -> None:
    gate = ReadinessGate()
    app = gate.wrap(backend)
    answers: list[tuple[str, bytes]] = []
    client = threading.Thread(target=lambda: answers.append(call(app)))
    client.start()
    client.join(0.3)
    assert client.is_alive() and answers == []  # held, not answered
    gate.open()
    client.join(5)
    assert answers == [("200 OK", b"answered")]


def test_the_sandboxs_own_clients_pass_while_it_starts() -> None:
    app = ReadinessGate().wrap(backend)
    assert call(app, f"Boto3/1.40 {INTERNAL_USER_AGENT}") == ("200 OK", b"answered")


def test_a_failed_start_answers_503_with_the_reason() -> None:
    gate = ReadinessGate()
    gate.fail("DeployError: the template is broken")
    status, body = call(gate.wrap(backend))
    assert status.startswith("503") and b"the template is broken" in body


def test_a_start_that_never_ends_answers_503_after_the_hold() -> None:
    status, body = call(ReadinessGate().wrap(backend, max_hold_seconds=0.05))
    assert status.startswith("503") and b"did not become ready" in body
