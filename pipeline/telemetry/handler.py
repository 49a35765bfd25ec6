"""One decorator that gives every handler the same telemetry.

Per invocation it sets the Lambda context keys on the logger (cold start, request id, function),
collects EMF metrics with the function name as a dimension and flushes them at the end, opens a
span, and sets CURRENT_FUNCTION. Log keys and metrics are kept per invocation (thread-safe keys,
one metric set each): the sandbox runs several functions at once in one interpreter, and AWS
behaviour (one invocation per container at a time) is the same either way.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

from pipeline.config import CURRENT_FUNCTION
from pipeline.telemetry.logging import logger
from pipeline.telemetry.metrics import invocation_metrics
from pipeline.telemetry.tracing import span

Handler = Callable[[Any, Any], Any]
_warm: set[str] = set()
_warm_lock = threading.Lock()


def _cold_start(function: str) -> bool:
    with _warm_lock:
        cold = function not in _warm
        _warm.add(function)
    return cold


def instrumented(name: str) -> Callable[[Handler], Handler]:
    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def invoke(event: Any, context: Any) -> Any:
            function = getattr(context, "function_name", None) or os.environ.get("AWS_LAMBDA_FUNCTION_NAME", name)
            logger.thread_safe_append_keys(
                cold_start=_cold_start(function),
                function_name=function,
                function_request_id=getattr(context, "aws_request_id", None),
                function_memory_size=getattr(context, "memory_limit_in_mb", None),
            )
            token = CURRENT_FUNCTION.set(function)
            try:
                with invocation_metrics(function), span(f"pipeops.{name}", faas_name=function):
                    return handler(event, context)
            finally:
                CURRENT_FUNCTION.reset(token)
                logger.thread_safe_clear_keys()

        return invoke

    return decorate
