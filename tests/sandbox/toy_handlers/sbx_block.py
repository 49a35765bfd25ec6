"""Toy handler: blocks until the test opens GATE (a target with a backlog that does not move)."""

import threading

GATE = threading.Event()
ENTERED: list[str] = []  # request ids of the invocations that reached the gate; list.append is atomic


def handler(event, context):
    ENTERED.append(context.aws_request_id)
    GATE.wait(120)
    return {"released": GATE.is_set()}
