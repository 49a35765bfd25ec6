"""Patches of moto internals that make it behave as AWS does where the sandbox relies on it.

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3): each seam names the moto function it wraps,
and tests/sandbox/test_moto_seams.py fails when one moves.

DynamoDB item writes are atomic. AWS applies each item write (a conditional update included) as
one atomic step; moto's `DynamoDBBackend.update_item` reads, checks the condition and mutates the
item with no lock, and the sandbox runs handlers on many threads (a served moto also answers on
many). Measured without this seam: 8 threads doing 300 conditional acquire/release pairs each on
one semaphore item left `active_count` at -1 with no holder. One re-entrant lock around the
backend's item reads and writes makes every item operation (and a whole transaction) atomic,
as on AWS, so the sandbox never manufactures drift that the reconciler would then "find".
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

# The item reads and writes of moto.dynamodb.models.DynamoDBBackend (batch and PartiQL
# operations go through these per item; transact_write_items holds the lock for the whole set).
DYNAMODB_ITEM_OPERATIONS = (
    "put_item",
    "get_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "transact_write_items",
)

_DYNAMODB_LOCK = threading.RLock()
_INSTALL_LOCK = threading.Lock()
_originals: dict[str, Callable[..., Any]] = {}
_installs = 0


def _atomic(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _DYNAMODB_LOCK:
            return method(*args, **kwargs)

    locked.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return locked


def install() -> None:
    """Make moto's DynamoDB item operations atomic (counted: one uninstall per install)."""
    global _installs
    from moto.dynamodb.models import DynamoDBBackend

    with _INSTALL_LOCK:
        _installs += 1
        if _installs > 1:
            return
        for name in DYNAMODB_ITEM_OPERATIONS:
            _originals[name] = DynamoDBBackend.__dict__[name]
            setattr(DynamoDBBackend, name, _atomic(_originals[name]))


def uninstall() -> None:
    global _installs
    from moto.dynamodb.models import DynamoDBBackend

    with _INSTALL_LOCK:
        if _installs == 0:
            return
        _installs -= 1
        if _installs:
            return
        for name, original in _originals.items():
            setattr(DynamoDBBackend, name, original)
        _originals.clear()


def installed() -> bool:
    return _installs > 0
