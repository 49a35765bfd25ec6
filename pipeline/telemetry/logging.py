"""The structured JSON logger shared by every handler.

Correlation keys (job_id, execution_name, file_key, message_id) are appended per record with
`correlate(...)`; level comes from POWERTOOLS_LOG_LEVEL / LOG_LEVEL. Never log file contents,
detected values or synthetic mappings: only keys, counts and types.
"""

from __future__ import annotations

import io
import os
import sys

from aws_lambda_powertools import Logger

CORRELATION_KEYS = ("job_id", "execution_name", "file_key", "message_id")


class _CurrentStdout(io.TextIOBase):
    """Writes to whatever `sys.stdout` is at the moment, like `print` (and EMF metrics) do.

    powertools binds its stream once, at import; a runtime that captures each invocation's
    stdout (the sandbox's, a test's) would otherwise miss every log line.
    """

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


logger = Logger(
    service=os.environ.get("POWERTOOLS_SERVICE_NAME", "pipeops"),
    level=os.environ.get("POWERTOOLS_LOG_LEVEL") or os.environ.get("LOG_LEVEL") or "INFO",
    stream=_CurrentStdout(),
)


def correlate(**keys: str | None) -> None:
    """Set the correlation keys for what follows on this thread; a None value removes the key.

    Thread-safe keys: concurrent invocations in one interpreter (the sandbox) never see each
    other's job ids.
    """
    unknown = set(keys) - set(CORRELATION_KEYS)
    if unknown:
        raise ValueError(f"not correlation keys: {sorted(unknown)}")
    present = {k: v for k, v in keys.items() if v is not None}
    absent = [k for k, v in keys.items() if v is None]
    if absent:
        logger.thread_safe_remove_keys(absent)
    if present:
        logger.thread_safe_append_keys(**present)
