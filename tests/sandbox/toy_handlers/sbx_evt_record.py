"""Toy handler for the event-bus tests: records every event it receives; `failing` also raises."""

EVENTS: list[dict] = []  # {"function", "event", "request_id"}; list.append is atomic


class TargetUnavailableError(Exception):
    pass


def _record(event, context):
    EVENTS.append({"function": context.function_name, "event": event, "request_id": context.aws_request_id})


def handler(event, context):
    _record(event, context)
    return {"recorded": True}


def failing(event, context):
    _record(event, context)
    raise TargetUnavailableError("the tracker store is unavailable")
