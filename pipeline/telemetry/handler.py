"""One decorator that gives every handler the same telemetry.

Per invocation it sets the Lambda context keys on the logger (cold start, request id, function)
and, at a cold start, the log level and span exporters from the function's environment,
collects the invocation's metrics and prints them as one EMF document at the end, opens a span when
a tracer provider records (without one the API's no-op span would change nothing, so none is made),
flushes our span exporter if one is configured, and sets CURRENT_FUNCTION. Log keys and metrics are
kept per invocation (thread-safe keys, one point list each): the sandbox runs several functions at
once in one interpreter, and AWS behaviour (one invocation per container at a time) is the same
either way. Its cost stays at the bare libraries' (bench/telemetry_cost.py): nothing is built per
invocation that can be built once.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

from pipeline.config import CURRENT_FUNCTION
from pipeline.telemetry import metrics, tracing
from pipeline.telemetry.logging import apply_log_level, logger

Handler = Callable[[Any, Any], Any]
_warm: set[str] = set()
_warm_lock = threading.Lock()


def _cold_start(function: str) -> bool:
    if function in _warm:  # every invocation but the first: no lock
        return False
    with _warm_lock:
        cold = function not in _warm
        _warm.add(function)
    return cold


def forget_warm(function: str) -> None:
    """`function`'s next invocation is a cold start again (a new execution environment)."""
    with _warm_lock:
        _warm.discard(function)


def instrumented(name: str) -> Callable[[Handler], Handler]:
    span_name = f"pipeops.{name}"

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def invoke(event: Any, context: Any) -> Any:
            function = getattr(context, "function_name", None) or os.environ.get("AWS_LAMBDA_FUNCTION_NAME", name)
            cold = _cold_start(function)
            if cold:  # its own level and exporters (one interpreter may host several: the sandbox)
                apply_log_level()
                tracing.configure()
            keys = logger.registered_formatter  # once, not per call: it holds the thread-safe keys
            keys.thread_safe_append_keys(
                cold_start=cold,
                function_name=function,
                function_request_id=getattr(context, "aws_request_id", None),
                function_memory_size=getattr(context, "memory_limit_in_mb", None),
            )
            token = CURRENT_FUNCTION.set(function)
            points, collecting = metrics.collect()
            try:
                if tracing.recording():
                    with tracing.get_tracer().start_as_current_span(span_name, attributes={"faas_name": function}):
                        return handler(event, context)
                return handler(event, context)  # no provider: the no-op span would change nothing
            finally:
                metrics.stop(collecting)
                CURRENT_FUNCTION.reset(token)
                keys.thread_safe_clear_keys()
                metrics.flush(function, points)
                tracing.flush()

        return invoke

    return decorate
