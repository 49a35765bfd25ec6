"""BEHAVIOUR seam: moto's own SQS -> Lambda delivery is off; the sandbox's poller delivers.

What moto does: `Queue.add_message`, after appending the message, loops over the queue's
`lambda_event_source_mappings` and invokes the function inside the producer's `send_message`: one
message per invoke, `batchItemFailures` ignored, the whole batch re-queued on any failure, never
retried in the background. AWS polls with batches and partial batch failures (`sandbox.sqs_poller`).

What it adds: `add_message` sees the queue without its mappings (everything else is the queue), then
tells the poller that a message was added (`on_added`, wake-on-send). Counted: one `uninstall()`
per `install()`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from sandbox.seams.patching import CountedPatches, Patch

KIND = "BEHAVIOUR"

_on_added: Callable[[Any, Any], None] | None = None


class _QueueWithoutEventSourceMappings:
    """A view of a moto Queue whose `lambda_event_source_mappings` is empty; all else is the queue."""

    __slots__ = ("_queue",)

    def __init__(self, queue: Any) -> None:
        object.__setattr__(self, "_queue", queue)

    @property
    def lambda_event_source_mappings(self) -> dict[str, Any]:
        return {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._queue, name, value)


def _without_lambda(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def add_message(queue: Any, message: Any) -> None:
        if not _PATCHES.installed():  # uninstalled while a caller was on its way in
            original(queue, message)
            return
        original(_QueueWithoutEventSourceMappings(queue), message)
        on_added = _on_added
        if on_added is not None:
            on_added(queue, message)

    return add_message


def _patches() -> list[Patch]:
    from moto.sqs.models import Queue

    return [Patch(Queue, "add_message", _without_lambda)]


_PATCHES = CountedPatches(_patches, marker="__pipeops_seam__")


def install(on_added: Callable[[Any, Any], None] | None = None) -> None:
    """Stop moto from invoking Lambda inside `Queue.add_message` (counted); `on_added(queue,
    message)` is told of every message added from now on (it must never raise)."""
    global _on_added
    if on_added is not None:
        _on_added = on_added
    _PATCHES.install()


uninstall, installed = _PATCHES.uninstall, _PATCHES.installed


@contextlib.contextmanager
def disabled(on_added: Callable[[Any, Any], None] | None = None) -> Iterator[None]:
    """While active, only the sandbox's poller delivers SQS messages to Lambda functions."""
    install(on_added)
    try:
        yield
    finally:
        uninstall()
