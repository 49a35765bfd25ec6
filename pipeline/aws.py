"""boto3 clients, built once per process and shared (each costs ~4 ms to build).

Retries use botocore's adaptive mode: exponential backoff with jitter on throttling, plus a
client-side rate limiter, so handlers never hand-roll sleep loops.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

RETRY_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=30)


@cache
def _client(service: str, region: str | None, endpoint_url: str | None) -> Any:
    return boto3.session.Session().client(
        service, region_name=region, endpoint_url=endpoint_url, config=RETRY_CONFIG
    )


def client(service: str) -> Any:
    """A shared client for `service` in the current region (and AWS_ENDPOINT_URL, if set)."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return _client(service, region, os.environ.get("AWS_ENDPOINT_URL") or None)


def reset_clients() -> None:
    """Forget cached clients (tests switch endpoints and mocks between cases)."""
    _client.cache_clear()


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError, or '' for anything else."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""
