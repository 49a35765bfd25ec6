"""BEHAVIOUR seam: DynamoDB item writes are atomic, as on AWS.

What moto lacks: `DynamoDBBackend.update_item` reads, checks the condition and mutates the item
with no lock, and the sandbox runs handlers on many threads (a served moto also answers on many).
Measured without this seam: 8 threads doing 300 conditional acquire/release pairs each on one
semaphore item left `active_count` at -1 with no holder.

What it adds: one re-entrant lock around the backend's item reads and writes and around the same
operations as moto answers a request, so every item operation (and a whole transaction) is one
atomic step, and the sandbox never manufactures drift that the reconciler would then "find".
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from sandbox.seams.patching import Patch

KIND = "BEHAVIOUR"

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

# The same operations as moto answers a request (moto.dynamodb.responses.DynamoHandler): the handler
# reads the item before the backend call (a deepcopy, for ReturnValues) and serializes it after, both
# outside the backend's methods, so a concurrent write to the same item could change it mid-copy
# ("dictionary changed size during iteration"). The lock is re-entrant: the backend calls inside nest.
DYNAMODB_REQUEST_OPERATIONS = (
    *DYNAMODB_ITEM_OPERATIONS,
    "batch_get_item",
    "batch_write_item",
    "transact_get_items",
    "execute_statement",
)

_DYNAMODB_LOCK = threading.RLock()


def _atomic(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _DYNAMODB_LOCK:
            return method(*args, **kwargs)

    return locked


def patches() -> list[Patch]:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    return [
        *(Patch(DynamoDBBackend, name, _atomic) for name in DYNAMODB_ITEM_OPERATIONS),
        *(Patch(DynamoHandler, name, _atomic) for name in DYNAMODB_REQUEST_OPERATIONS),
    ]
