"""BEHAVIOUR seam: an SQS receive is one atomic step, as on AWS.

What moto lacks: `SQSBackend.receive_message` walks the queue's visible messages, marks each
received and moves those past `maxReceiveCount` to the dead-letter queue with no lock, and the
sandbox receives on many threads at once (the SQS poller, a DLQ redrive, a game day's inbox; a
served moto answers on many). Seen without this seam: two concurrent receivers both handed the
same message inside its visibility timeout, and a receive failing with HTTP 500
(`list.remove(x): x not in list`) when both moved the same message to the dead-letter queue.
AWS never answers a receive with a server error for that, and a received message stays hidden
from every other receiver until its visibility timeout ends.

What it adds: one lock around the scan-and-mark of a receive and around the calls that change a
queue's messages (delete, visibility, purge). A long poll keeps its meaning: the wait happens
outside the lock (moto's own wait for a visible message), so one receiver's 20-second poll never
holds back another's.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from sandbox.seams.patching import Patch

KIND = "BEHAVIOUR"

# moto.sqs.models.SQSBackend methods that change which messages a queue holds or shows.
SQS_MESSAGE_OPERATIONS = (
    "delete_message",
    "delete_message_batch",
    "change_message_visibility",
    "change_message_visibility_batch",
    "purge_queue",
)

_SQS_LOCK = threading.RLock()


def _atomic(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _SQS_LOCK:
            return method(*args, **kwargs)

    return locked


def _atomic_receive(receive_message: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive_message)
    def receive(
        backend: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> Any:
        deadline = time.monotonic() + (wait_seconds_timeout or 0)
        while True:
            with _SQS_LOCK:  # a short receive: scan, mark, move to the DLQ; no waiting inside
                result = receive_message(backend, queue_name, count, 0, visibility_timeout, message_attribute_names)
            remaining = deadline - time.monotonic()
            if result or remaining <= 0:
                return result
            backend.get_queue(queue_name).wait_for_messages(min(1.0, remaining))

    return receive


def patches() -> list[Patch]:
    from moto.sqs.models import SQSBackend

    return [
        Patch(SQSBackend, "receive_message", _atomic_receive),
        *(Patch(SQSBackend, name, _atomic) for name in SQS_MESSAGE_OPERATIONS),
    ]
