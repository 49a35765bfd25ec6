"""Lambda's advanced logging controls, which moto does not model (its CreateFunction drops
`LoggingConfig`): the log format and application log level a function was deployed with, the
variables Lambda sets from them, and the application log lines Lambda lets through.

What AWS documents (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html):
- With the JSON log format, Lambda sets AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL (the
  application log level, INFO unless configured) in the function's environment; loggers such as
  powertools' read the level from there.
- Lambda sends application log lines of the configured level and above; the rest are dropped
  before CloudWatch Logs sees them. A line's level is its JSON "level" ("If the level value field
  is invalid or missing, Lambda will assign the log output the level INFO"; without a valid RFC 3339
  timestamp likewise). So a line with no level -- every EMF metric document -- is INFO: dropped,
  metric and all, once the application log level is above INFO.
- Log-level filtering needs the JSON log format; with Text nothing is filtered.

`sandbox.runtime` applies all three per invocation: `environment()` to the function's variables,
`delivered()` to its captured lines before they reach the log group and the EMF extraction.
System log lines (START, END, REPORT) are not application logs and are left alone.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

# Lambda's application log levels, least severe first, with the Python names loggers write.
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
_RANK = {name: rank for rank, name in enumerate(LEVELS)} | {"WARNING": 3, "CRITICAL": 5}
_TIMESTAMP_KEYS = ("timestamp", "time")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

_configs: dict[str, dict[str, str]] = {}
_lock = threading.Lock()


def _unqualified(function_arn: str) -> str:
    return ":".join(function_arn.split(":")[:7])


def configure(function_arn: str, logging_config: Mapping[str, Any] | None) -> None:
    """Record a function's `LoggingConfig` as deployed (None or empty: Lambda's default, Text)."""
    with _lock:
        if logging_config:
            _configs[_unqualified(function_arn)] = {str(k): str(v) for k, v in logging_config.items()}
        else:
            _configs.pop(_unqualified(function_arn), None)


def config_of(function_arn: str) -> dict[str, str]:
    with _lock:
        return dict(_configs.get(_unqualified(function_arn), {}))


def application_level(config: Mapping[str, str]) -> str | None:
    """The level Lambda filters application logs at; None when it filters nothing (Text format)."""
    if config.get("LogFormat", "Text") != "JSON":
        return None
    level = str(config.get("ApplicationLogLevel") or "INFO").upper()
    return level if level in _RANK else "INFO"


def environment(config: Mapping[str, str]) -> dict[str, str]:
    """The variables Lambda adds for a function's logging configuration."""
    level = application_level(config)
    if level is None:
        return {}
    return {"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": level}


def level_of(line: str) -> str:
    """The level Lambda reads from one application log line (Lambda's names)."""
    text = line.strip()
    if not text.startswith("{"):
        return "INFO"
    try:
        doc = json.loads(text)
    except ValueError:
        return "INFO"
    if not isinstance(doc, dict):
        return "INFO"
    level = str(doc.get("level", "")).upper()
    stamp = next((doc[k] for k in _TIMESTAMP_KEYS if k in doc), None)
    if level not in _RANK or not (isinstance(stamp, str) and _RFC3339.match(stamp)):
        return "INFO"
    return LEVELS[_RANK[level]]


def passes(line: str, level: str | None) -> bool:
    """Whether Lambda sends `line` on at application log level `level` (None: no filtering)."""
    return level is None or _RANK[level_of(line)] >= _RANK[level]


def delivered(lines: Sequence[tuple[int, str]], config: Mapping[str, str]) -> list[tuple[int, str]]:
    """The captured (timestamp, line) pairs Lambda sends to CloudWatch Logs."""
    level = application_level(config)
    if level is None or _RANK[level] <= _RANK["TRACE"]:
        return list(lines)
    return [(ts, line) for ts, line in lines if passes(line, level)]
