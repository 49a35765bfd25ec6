"""SPEED seam: one boto3 client per (region, service, endpoint) for the interpreter's tasks.

What moto does: its ASL interpreter builds a new boto3 client (~4 ms) for every Task state's
service integration (`boto_client_for`, imported by name into each task module).

What it changes (no behaviour): the client is built once and reused; boto3 clients are
thread-safe, and moto's function ignores the task's credentials (every client it builds signs as
"ak"), so the reused client is the one it would have built. The clients do not outlive an
uninstall (`drop_clients`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from sandbox.seams.patching import Patch

KIND = "SPEED"

# Modules that import moto's `boto_client_for` by name (the interpreter's service integrations).
_CLIENT_MODULE_PREFIX = "moto.stepfunctions.parser."

_CLIENTS: dict[tuple[str, str, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _reused_client(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        from moto.core.models import botocore_stubber
        from moto.settings import moto_server_port

        key = (region, service, None if botocore_stubber.enabled else moto_server_port())
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = original(region, service, state_credentials)
            return client

    return boto_client_for


def _client_modules() -> list[Any]:
    """Every interpreter module that imports moto's `boto_client_for` by name, imported now (the
    service integrations load lazily, at their first Task state)."""
    import importlib
    from pathlib import Path

    import moto.stepfunctions.parser as parser_package
    from moto.stepfunctions.parser.asl.utils import boto_client

    original = boto_client.boto_client_for  # the module's own: patches replace only the importers'
    root = Path(parser_package.__file__).parent
    modules = []
    for path in sorted(root.rglob("*.py")):
        if "import boto_client_for" not in path.read_text(encoding="utf-8"):
            continue
        name = _CLIENT_MODULE_PREFIX + ".".join(path.relative_to(root).with_suffix("").parts)
        module = importlib.import_module(name)
        if getattr(module, "boto_client_for", None) is original:
            modules.append(module)
    return modules


def drop_clients() -> None:
    with _CLIENTS_LOCK:
        _CLIENTS.clear()


def patches() -> list[Patch]:
    from moto.stepfunctions.parser.asl.utils import boto_client

    reused = _reused_client(boto_client.boto_client_for)
    return [Patch(module, "boto_client_for", lambda _original: reused) for module in _client_modules()]
