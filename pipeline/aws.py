"""boto3 clients, built once per process and shared, from one boto3 session.

One session, because a session loads botocore's service models and endpoint data itself: a
client from a new session costs ~150 ms (endpoints.json alone is 1.2 MB), a further client of the
same session a few ms. A session is not thread-safe, so clients are built under a lock; the
clients themselves are.

Retries use botocore's adaptive mode: exponential backoff with jitter on throttling, plus a
client-side rate limiter, so handlers never hand-roll sleep loops.
"""

from __future__ import annotations

import os
import threading
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

RETRY_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=30)


_SESSION_LOCK = threading.Lock()
_session: boto3.session.Session | None = None


@cache
def _client(service: str, region: str | None, endpoint_url: str | None) -> Any:
    global _session
    with _SESSION_LOCK:
        if _session is None:
            _session = boto3.session.Session()
        return _session.client(service, region_name=region, endpoint_url=endpoint_url, config=RETRY_CONFIG)  # type: ignore[call-overload]  # a service named at run time: the stubs type literal names only


def client(service: str) -> Any:
    """A shared client for `service` in the current region (and AWS_ENDPOINT_URL, if set)."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return _client(service, region, os.environ.get("AWS_ENDPOINT_URL") or None)


def reset_clients() -> None:
    """Forget cached clients and the session (tests switch endpoints, mocks and credentials)."""
    global _session
    _client.cache_clear()
    with _SESSION_LOCK:
        _session = None


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError, or '' for anything else."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""
