"""Toy handler for the SQS poller tests: records every batch, fails on demand.

Module state is shared by every function that uses this module (one import per process); tests
call `reset()` first and filter `calls()` by function name.
"""

import threading

_LOCK = threading.Lock()
_CALLS: list[dict] = []


def reset():
    with _LOCK:
        _CALLS.clear()


def calls(function_name=None):
    with _LOCK:
        return [dict(c) for c in _CALLS if function_name in (None, c["function"])]


def _record(event, context):
    records = event.get("Records", [])
    entry = {
        "function": context.function_name,
        "ids": [r["messageId"] for r in records],
        "bodies": [r["body"] for r in records],
        "receive_counts": [int(r["attributes"]["ApproximateReceiveCount"]) for r in records],
        "event": event,
    }
    with _LOCK:
        _CALLS.append(entry)
    return records


def handler(event, context):
    """Reports every record whose body starts with "fail" as a batch item failure."""
    records = _record(event, context)
    failed = [{"itemIdentifier": r["messageId"]} for r in records if r["body"].startswith("fail")]
    return {"batchItemFailures": failed}


def raise_on_first_delivery(event, context):
    """Raises while any record is on its first delivery; succeeds (returns None) afterwards."""
    records = _record(event, context)
    if any(r["attributes"]["ApproximateReceiveCount"] == "1" for r in records):
        raise RuntimeError("first delivery fails")


def unknown_identifier_on_first_delivery(event, context):
    """Names a message that is not in the batch while any record is on its first delivery."""
    records = _record(event, context)
    if any(r["attributes"]["ApproximateReceiveCount"] == "1" for r in records):
        return {"batchItemFailures": [{"itemIdentifier": "no-such-message"}]}
    return {"batchItemFailures": []}
