"""BEHAVIOUR seam: real Python handlers behind every Lambda route (`sandbox.runtime`).

What moto lacks: without Docker it cannot run handler code. Every route into a function (the
Invoke API, the interpreter's Lambda tasks, async invokes, S3/SNS/Logs deliveries, moto's own SQS
mapping) ends in `LambdaFunction.invoke`, which calls `LambdaFunction._invoke_lambda(event)` and
expects `(payload, errored, logs)`. With `use_docker: False` moto routes the API through
`LambdaSimpleBackend.invoke` instead, which echoes the payload. moto reports an error escaping a
handler as "Handled".

What it adds: `_invoke_lambda` runs the function with the attached `LambdaRuntime`;
`LambdaSimpleBackend.invoke` is pointed back at `LambdaBackend.invoke`, so the same seam is
reached; `X-Amz-Function-Error: Handled` becomes "Unhandled", as the AWS Python runtime reports an
exception escaping the handler or a timeout. One runtime per process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from sandbox.seams.patching import Patch, RoutedSeam

KIND = "BEHAVIOUR"


class Runner(Protocol):
    def run_moto_function(self, fn: Any, event: Any = None) -> tuple[str, bool, str]: ...


def _routed(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _invoke_lambda(fn: Any, event: Any = None) -> tuple[str, bool, str]:
        runtime = SEAM.current()
        if runtime is None:  # detached while a caller was on its way in: behave like moto
            return original(fn, event)
        return runtime.run_moto_function(fn, event)

    return _invoke_lambda


def _unhandled(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def invoke(fn: Any, body: Any, request_headers: Any, response_headers: Any) -> Any:
        result = original(fn, body, request_headers, response_headers)
        if response_headers.get("x-amz-function-error") == "Handled":
            # The Python runtime reports an exception escaping the handler (and a timeout) as Unhandled.
            response_headers["x-amz-function-error"] = "Unhandled"
        return result

    return invoke


def _patches() -> list[Patch]:
    from moto.awslambda.models import LambdaBackend, LambdaFunction
    from moto.awslambda_simple.models import LambdaSimpleBackend

    return [
        Patch(LambdaFunction, "_invoke_lambda", _routed),
        Patch(LambdaFunction, "invoke", _unhandled),
        Patch(LambdaSimpleBackend, "invoke", lambda _original: LambdaBackend.invoke),
    ]


SEAM: RoutedSeam[Runner] = RoutedSeam(_patches, single="LambdaRuntime")
