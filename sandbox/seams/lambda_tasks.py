"""SPEED seam: the interpreter's Lambda tasks invoke their function in-process, without a botocore
round trip.

moto's ASL interpreter invokes a Task state's function through a boto3 Lambda client
(`lambda_eval_utils._invoke_lambda_function`): the payload is serialized and signed, moto's request
router dispatches it, moto's Lambda responses answer it and botocore parses the answer back, all
inside the process that then runs the handler. Measured with bench/sandbox_ratio.py (folders of 5,
50 files), that round trip was most of the interpreter's task threads' CPU (about 7% of the whole
sandbox's), several times what the Lambda runtime itself spent running the invocation.

The seam calls the function moto holds (`LambdaFunction.invoke`, where `sandbox.runtime` runs the
handler) and keeps what the round trip decided:
- IAM. The state machine's role must allow `lambda:InvokeFunction` on the function: checked by
  `sandbox.seams.iam_calls.check` exactly as the client call would be, AccessDenied raised as the
  client raises it (the interpreter then fails the task as it would).
- moto's answer. A failed invocation carries its FunctionError; an answer over moto's response
  bound becomes moto's `Function.ResponseSizeTooLarge` error; the payload is decoded by moto's own
  `_from_payload`. What the interpreter reads (`InvocationResponse`: StatusCode, FunctionError,
  Payload) is what it read from the client.
- Anything else goes the client's way, answered as moto answers it: another invocation type, a
  log tail, a qualifier, a function named without its ARN, or a function moto does not know (its
  error is then moto's own, worded as the API words it; nothing was invoked).
"""

from __future__ import annotations

import functools
import io
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.seams.patching import Patch

KIND = "SPEED"

# moto's bound on a synchronous answer (moto.awslambda.responses.LambdaResponse.invoke), and the
# answer it gives instead.
MOTO_RESPONSE_BOUND = 6_000_000
_TOO_LARGE = {
    "errorMessage": "Response payload size exceeded maximum allowed payload size (6291556 bytes).",
    "errorType": "Function.ResponseSizeTooLarge",
}


def _plain(parameters: Mapping[str, Any]) -> bool:
    """A synchronous invoke of a function named by its ARN, with nothing else asked for."""
    name = parameters.get("FunctionName")
    extra = set(parameters) - {"FunctionName", "Payload"}
    return isinstance(name, str) and name.startswith("arn:") and name.count(":") == 6 and not extra


def _function(function_arn: str, region: str) -> Any:
    """The function moto holds, or None when moto does not know it (the client path answers)."""
    from moto.awslambda.utils import get_backend

    try:
        return get_backend(function_arn.split(":")[4], region).get_function(function_arn, None)
    except Exception:
        return None


def invocation_response(payload: bytes | str, response_headers: Mapping[str, str]) -> dict[str, Any]:
    """What the interpreter reads of a synchronous invoke, as moto's Lambda responses answer it."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils import _from_payload

    function_error = response_headers.get("x-amz-function-error")
    if sys.getsizeof(payload) > MOTO_RESPONSE_BOUND:
        payload, function_error = json.dumps(_TOO_LARGE), "Unhandled"
    raw = payload.encode("utf-8") if isinstance(payload, str) else payload
    response: dict[str, Any] = {"StatusCode": 200, "Payload": _from_payload(io.BytesIO(raw))}
    if function_error:
        response["FunctionError"] = function_error
    return response


def direct(original: Callable[..., Any]) -> Callable[..., Any]:
    """Replacement of `lambda_eval_utils._invoke_lambda_function` (see the module docstring)."""

    @functools.wraps(original)
    def _invoke_lambda_function(parameters: dict[str, Any], region: str, state_credentials: Any) -> Any:
        if not _plain(parameters):
            return original(parameters, region, state_credentials)
        function = _function(parameters["FunctionName"], region)
        if function is None:
            return original(parameters, region, state_credentials)
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

        from sandbox.seams import iam_calls

        # The interpreter's own (reused) client: what IAM reads the service and region from, and
        # the error classes an AccessDenied is raised with.
        client = lambda_eval_utils.boto_client_for(
            region=region, service="lambda", state_credentials=state_credentials
        )
        iam_calls.check(client, "Invoke", parameters)
        response_headers: dict[str, str] = {}
        payload = function.invoke(
            parameters.get("Payload") or b"", {"x-amz-invocation-type": "RequestResponse"}, response_headers
        )
        return invocation_response(payload, response_headers)

    return _invoke_lambda_function


def patches() -> list[Patch]:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    return [Patch(lambda_eval_utils, "_invoke_lambda_function", direct)]
