"""One decorator that gives every handler the same telemetry.

It injects the Lambda context into the logger (cold start, request id, function name), flushes
EMF metrics with the function name as a dimension (taken from the context: several functions may
share one interpreter in the sandbox), opens a span for the invocation and clears correlation
keys so nothing leaks from one invocation into the next.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from pipeline.config import CURRENT_FUNCTION
from pipeline.telemetry.logging import clear_correlation, logger
from pipeline.telemetry.metrics import metrics
from pipeline.telemetry.tracing import span

Handler = Callable[[Any, Any], Any]


def instrumented(name: str) -> Callable[[Handler], Handler]:
    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def invoke(event: Any, context: Any) -> Any:
            clear_correlation()
            function = getattr(context, "function_name", None) or os.environ.get("AWS_LAMBDA_FUNCTION_NAME", name)
            token = CURRENT_FUNCTION.set(function)
            dimensions = {"stage": os.environ.get("STAGE", "dev"), "function": function}
            if metrics.default_dimensions != dimensions:
                metrics.set_default_dimensions(**dimensions)
            try:
                with span(f"pipeops.{name}", faas_name=function):
                    return handler(event, context)
            finally:
                CURRENT_FUNCTION.reset(token)

        return logger.inject_lambda_context(clear_state=False)(metrics.log_metrics(invoke))

    return decorate
