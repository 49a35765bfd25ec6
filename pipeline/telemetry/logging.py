"""The structured JSON logger shared by every handler.

Correlation keys (job_id, execution_name, file_key, message_id) are appended per record with
`correlate(...)`. Never log file contents, detected values or synthetic mappings: only keys,
counts and types.

Level. The level asked for is POWERTOOLS_LOG_LEVEL (LOG_LEVEL, legacy). Lambda's advanced logging
controls set AWS_LAMBDA_LOG_LEVEL from the function's ApplicationLogLevel, and powertools gives
that variable precedence over every other setting ("We prioritise log level settings in this
order: 1. AWS_LAMBDA_LOG_LEVEL environment variable, 2. explicit level in the constructor or
setLevel(), 3. POWERTOOLS_LOG_LEVEL": https://docs.powertools.aws.dev/lambda/python/latest/core/logger/,
and `Logger._determine_log_level`). The template cannot raise ApplicationLogLevel above INFO:
Lambda gives a line without a "level" -- every EMF metric document -- the level INFO and drops it
below that ("If the level value field is invalid or missing, Lambda will assign the log output
the level INFO": https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html).
So Lambda filters at INFO at most, and `apply_log_level` sets the level asked for on the logger
underneath powertools (`effective_log_level`: never below Lambda's, whose drops would waste the
write).
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Mapping

from aws_lambda_powertools import Logger

from pipeline.stack import SERVICE_NAME, SERVICE_NAME_ENV

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


# Lambda's application log levels (TRACE .. FATAL) and Python's, by name.
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}


def effective_log_level(requested: str | None, lambda_level: str | None) -> int:
    """The level to log at: the one asked for (INFO when none, or unknown), but never below
    Lambda's application log level, under which Lambda drops every line anyway. Pure."""
    wanted = _LEVELS.get((requested or "").strip().upper(), logging.INFO)
    floor = _LEVELS.get((lambda_level or "").strip().upper(), logging.NOTSET)
    return max(wanted, floor)


def requested_log_level(environ: Mapping[str, str]) -> str | None:
    return environ.get("POWERTOOLS_LOG_LEVEL") or environ.get("LOG_LEVEL")


logger = Logger(
    service=os.environ.get(SERVICE_NAME_ENV) or SERVICE_NAME,
    level=requested_log_level(os.environ) or "INFO",
    stream=_CurrentStdout(),  # type: ignore[arg-type]  # a TextIOBase, which typeshed keeps apart from IO[str]
    # Lambda reads a line's level only with an RFC 3339 "timestamp" ("If you don't supply a valid
    # timestamp, Lambda will assign the log the level INFO"); powertools' default is not one.
    use_rfc3339=True,
)


def apply_log_level(environ: Mapping[str, str] = os.environ) -> int:
    """Set the logger's level from `environ` past powertools' precedence (module docstring);
    at import and at each function's cold start (the sandbox runs every function in one
    interpreter). Returns the level set."""
    level = effective_log_level(requested_log_level(environ), environ.get("AWS_LAMBDA_LOG_LEVEL"))
    logging.getLogger(logger.service).setLevel(level)
    return level


apply_log_level()


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
