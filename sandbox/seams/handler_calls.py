"""BEHAVIOUR seam: a handler's AWS calls answer with an injected error, or its function dies around
one (`sandbox.faults`).

What moto lacks: nothing in it throttles or fails a call on demand, and no test can kill a
handler between two of its calls the way a crashed runtime would.

Where. `botocore.endpoint.Endpoint._do_get_response` sends one attempt of a call and parses the
answer; it runs in the *caller's* thread, in-process (`mock_aws` answers in its `before-send`
event) and served (an HTTP request to the moto server) alike, so the handler that makes the call is
known (`sandbox.runtime.running_function()`) and no user-agent guessing is needed. The sandbox's
own clients (marked by their user agent, `sandbox.clients`), the CLI's and the state machine's
interpreter's calls are no handler's: never faulted.

What it adds, while a `FaultBoard` is attached:
- an `ApiFault` that matches answers the attempt with the service's own error, built as the
  service sends it for the client's protocol (JSON `__type`, or the XML `<Error>`) and parsed by
  botocore's parser: botocore's retry handler sees a real throttle and retries it (each attempt
  decided again), the caller then gets the ClientError AWS would raise. A throttle is counted in
  the metrics AWS publishes for it (`FaultBoard.api_fault_fired`).
- a `CallCrash` raises `InjectedCrash` (a SystemExit: no handler's `except Exception` catches
  it; the runtime reports Runtime.ExitError, as for a runtime that died) before the attempt is
  sent, or after it was answered without error.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol
from xml.sax.saxutils import escape

from sandbox.clients import INTERNAL_USER_AGENT
from sandbox.runtime import running_function
from sandbox.seams.patching import Patch, RoutedSeam

KIND = "BEHAVIOUR"


class InjectedCrash(SystemExit):
    """The function's runtime died here (a sandbox fault)."""


class CallFaults(Protocol):
    def api_fault(self, caller: str, service: str, operation: str) -> Any: ...

    def crash(self, caller: str, service: str, operation: str, when: str) -> Any: ...

    def api_fault_fired(self, fault: Any, service: str, operation: str, params: Any) -> None: ...


class _Body:
    """The raw body botocore's AWSResponse reads (`stream()`)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self._data


def error_payload(protocol: str, code: str, message: str) -> tuple[dict[str, str], bytes]:
    """(headers, body) of an AWS error answer in `protocol`, as the services send it."""
    request_id = str(uuid.uuid4())
    if protocol in ("json", "rest-json", "smithy-rpc-v2-cbor"):
        body = json.dumps({"__type": code, "message": message}).encode()
        return {"x-amzn-ErrorType": code, "x-amzn-RequestId": request_id, "Content-Type": "application/x-amz-json-1.0"}, body
    error = f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
    if protocol == "rest-xml":
        body = f"<Error>{error}<RequestId>{request_id}</RequestId></Error>".encode()
    else:  # query, ec2
        body = f"<ErrorResponse><Error><Type>Sender</Type>{error}</Error><RequestId>{request_id}</RequestId></ErrorResponse>".encode()
    return {"x-amzn-RequestId": request_id, "Content-Type": "text/xml"}, body


def _answer(endpoint: Any, request: Any, operation_model: Any, fault: Any) -> Any:
    """What `_do_get_response` returns for an attempt the fault answers."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from botocore.endpoint import convert_to_response_dict

    protocol = operation_model.service_model.resolved_protocol
    headers, body = error_payload("json" if protocol == "smithy-rpc-v2-cbor" else protocol, fault.code, fault.message)
    http_response = AWSResponse(request.url, int(fault.status), HTTPHeaders.from_dict(headers), _Body(body))
    response_dict = convert_to_response_dict(http_response, operation_model)
    parser = endpoint._response_parser_factory.create_parser("json" if protocol == "smithy-rpc-v2-cbor" else protocol)
    parsed = parser.parse(response_dict, operation_model.output_shape)
    return (http_response, parsed), None


def _is_internal(request: Any) -> bool:
    """A call of the sandbox's own clients (`sandbox.clients`), even on a handler's thread."""
    agent = request.headers.get("User-Agent", b"")
    return INTERNAL_USER_AGENT in (agent.decode() if isinstance(agent, bytes) else str(agent))


def _params(request: Any) -> Any:
    try:
        return json.loads(request.body or b"{}")
    except (TypeError, ValueError):
        return {}


def _faulted(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _do_get_response(self: Any, request: Any, operation_model: Any, context: Any) -> Any:
        board = SEAM.current()
        running = running_function() if board is not None else None
        if board is None or running is None or _is_internal(request):
            return original(self, request, operation_model, context)
        caller = running.function_name
        service = operation_model.service_model.endpoint_prefix
        operation = operation_model.name
        if board.crash(caller, service, operation, "before") is not None:
            raise InjectedCrash(f"sandbox fault: {caller} died before {service}:{operation}")
        fault = board.api_fault(caller, service, operation)
        if fault is not None:
            board.api_fault_fired(fault, service, operation, _params(request))
            return _answer(self, request, operation_model, fault)
        result = original(self, request, operation_model, context)
        answered, error = result
        ok = error is None and answered is not None and answered[0].status_code < 300
        if ok and board.crash(caller, service, operation, "after") is not None:
            raise InjectedCrash(f"sandbox fault: {caller} died after {service}:{operation}")
        return result

    return _do_get_response


def _patches() -> list[Patch]:
    from botocore.endpoint import Endpoint

    return [Patch(Endpoint, "_do_get_response", _faulted)]


SEAM: RoutedSeam[CallFaults] = RoutedSeam(_patches)
