"""boto3 clients for the sandbox's own machinery (runtime, poller, event bus, deploy).

`endpoint_url=None` means in-process `mock_aws`: such a client never follows an
AWS_ENDPOINT_URL that a function's environment may have put in os.environ meanwhile. With an
endpoint (a moto server) and no credentials around, fake ones are used: moto accepts any key.
Every such client marks its user agent with INTERNAL_USER_AGENT: a served sandbox lets these
requests through while it starts and holds everyone else's (sandbox.serving).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
from botocore.config import Config

INTERNAL_USER_AGENT = "pipeops-sandbox-internal"


def sandbox_client(service: str, region: str, endpoint_url: str | None, *, read_timeout: int = 60) -> Any:
    kwargs: dict[str, Any] = {
        "region_name": region,
        "config": Config(
            retries={"max_attempts": 2, "mode": "standard"},
            ignore_configured_endpoint_urls=endpoint_url is None,  # type: ignore[call-arg]  # botocore has it, its stubs not yet
            read_timeout=read_timeout,
            user_agent_extra=INTERNAL_USER_AGENT,
        ),
    }
    if endpoint_url:
        kwargs["endpoint_url"] = endpoint_url
        if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
            kwargs["aws_access_key_id"] = "testing"  # sandbox only
            kwargs["aws_secret_access_key"] = "testing"
    return boto3.client(service, **kwargs)  # type: ignore[call-overload]  # a service named at run time: the stubs type literal names only


class ClientCache:
    """A part's sandbox clients, one per (service, region), made on first use and shared by the
    part's threads (boto3 clients are thread-safe; each costs about 4 ms to make)."""

    def __init__(self, region: str, endpoint_url: str | None, *, read_timeout: int = 60) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self._read_timeout = read_timeout
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def client(self, service: str, region: str | None = None) -> Any:
        """The client of `service` in `region` (default: the cache's region)."""
        key = (service, region or self.region)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = sandbox_client(
                    service, key[1], self.endpoint_url, read_timeout=self._read_timeout
                )
            return client
