"""`dlq-messages` on a pipeline we did not build: its DLQs counted, then each moved back whole.

The stack's redrive (`redrive`) reads each message to diagnose and group it; a pipeline we did not
build has messages we cannot read, so nothing is diagnosed per message. A dry run counts each DLQ
(the evidence: queue name -> messages); an apply starts SQS's own move task, which returns each
message to the queue it came from, and audits it (the runbook stream of the sidecar's table).
`groups` are the DLQ names to act on (the evidence's keys), empty: every DLQ.

One implementation for `pipeops runbook run dlq-messages` against a sidecar stack and the sidecar's
Automation document (its RunbookFunction runs `handler`). Verdict absent (every DLQ empty),
remains (a dry run that found messages), cleared (the moves started).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pipeline.aws import client
from pipeline.stores.audit import AuditStore, AuditStream
from pipeline.telemetry import logger
from pipeline.telemetry.handler import instrumented
from runbooks.automation.redrive import MOVE_TASK_RATE, queue_arn, queue_depth, sendable, unsupported
from runbooks.catalog import Runbook

Client = Callable[[str], Any]  # a client per service: the Lambda's shared ones, or the CLI's connection
HELD_SECONDS = 60  # a message moved by hand is held this long while it is sent back


@dataclass(frozen=True)
class SidecarQueues:
    """The DLQs the sidecar watches, the queue they feed back, and where the audit goes."""

    dead_letter_queues: tuple[str, ...]
    main_queue: str
    sidecar_table: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SidecarQueues:
        queues = tuple(name for name in env["DEAD_LETTER_QUEUES"].split(",") if name)
        return cls(queues, env["MAIN_QUEUE_NAME"], env["SIDECAR_TABLE"])


def depths(sqs: Any, queues: Sequence[str]) -> dict[str, int]:
    """Each queue's visible messages."""
    return {name: queue_depth(sqs, sqs.get_queue_url(QueueName=name)["QueueUrl"])["visible"] for name in queues}


def _answer(verdict: str, evidence: Mapping[str, str], moves: Mapping[str, str] | None = None, error: str = "") -> dict[str, Any]:
    exit_code = {"absent": 0, "cleared": 0, "remains": 1, "error": 2}[verdict]
    return {
        "id": Runbook.DLQ_MESSAGES.value, "verdict": verdict, "exit_code": exit_code, "evidence": dict(evidence),
        "error": error, "moves": dict(moves or {}),
    }  # fmt: skip


def redrive(
    queues: SidecarQueues, aws: Client, *, apply: bool, actor: str, now: datetime, groups: Sequence[str] = ()
) -> dict[str, Any]:
    """Count the DLQs (the named `groups` of them, else all); with `apply`, move each one's messages back."""
    unknown = sorted(set(groups) - set(queues.dead_letter_queues))
    chosen = [queue for queue in queues.dead_letter_queues if not groups or queue in groups]
    counted = depths(aws("sqs"), chosen)
    evidence = {queue: str(depth) for queue, depth in counted.items()}
    if unknown:
        return _answer("error", evidence, error=f"not a DLQ the sidecar watches: {', '.join(unknown)}")
    waiting = {queue: depth for queue, depth in counted.items() if depth}
    if not waiting:
        return _answer("absent", evidence)
    if not apply:
        return _answer("remains", evidence)
    sqs, moves = aws("sqs"), {}
    audit = AuditStore(queues.sidecar_table, aws("dynamodb"), stream=AuditStream.RUNBOOK)
    for queue, depth in waiting.items():
        url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        try:
            task = sqs.start_message_move_task(SourceArn=queue_arn(sqs, url), MaxNumberOfMessagesPerSecond=MOVE_TASK_RATE)
            moves[queue], after = task["TaskHandle"], {"method": "move_task", "task_handle": task["TaskHandle"]}
        except Exception as exc:  # no move task at this endpoint (moto): the messages one by one
            if not unsupported(exc):
                raise
            moved = _move_by_hand(sqs, url, sqs.get_queue_url(QueueName=queues.main_queue)["QueueUrl"], depth)
            moves[queue] = f"moved {moved} to {queues.main_queue} one by one"
            after = {"method": "send_delete", "to": queues.main_queue, "done": moved}
        audit.record(
            action="move_back", target=queue, reason="redrive to the source queue (the sidecar reads no message)",
            before={"queue": queue, "messages": depth}, after=after, by=actor, at=now,
        )  # fmt: skip
    return _answer("cleared", evidence, moves)


def _move_by_hand(sqs: Any, dead_letters: str, source: str, most: int) -> int:
    """Each message sent back with its attributes, then deleted (held while it moves); at most `most`."""
    moved = 0
    while moved < most:
        batch = sqs.receive_message(
            QueueUrl=dead_letters, MaxNumberOfMessages=min(10, most - moved), VisibilityTimeout=HELD_SECONDS,
            MessageAttributeNames=["All"], WaitTimeSeconds=0,
        ).get("Messages", [])  # fmt: skip
        if not batch:
            return moved
        for message in batch:
            sqs.send_message(QueueUrl=source, MessageBody=message["Body"], MessageAttributes=sendable(message.get("MessageAttributes", {})))
            sqs.delete_message(QueueUrl=dead_letters, ReceiptHandle=message["ReceiptHandle"])
            moved += 1
    return moved


@instrumented("sidecar-runbook")
def handler(event: dict[str, Any] | None, context: Any) -> dict[str, Any]:
    """The document's step: `{"RunbookId": "dlq-messages", "DryRun": bool, "Groups": [queue, …]}`."""
    event = event or {}
    runbook = str(event.get("RunbookId", Runbook.DLQ_MESSAGES.value))
    if runbook != Runbook.DLQ_MESSAGES.value:
        return _answer("error", {}, error=f"this function runs {Runbook.DLQ_MESSAGES.value} only, not {runbook}")
    actor = str(getattr(context, "invoked_function_arn", "") or "sidecar-runbook")
    groups = [str(group) for group in event.get("Groups") or []]
    dry_run = bool(event.get("DryRun", True))
    answer = redrive(SidecarQueues.from_env(os.environ), client, apply=not dry_run, actor=actor, now=datetime.now(UTC), groups=groups)
    logger.info("sidecar redrive", extra={key: answer[key] for key in ("verdict", "exit_code", "error")})
    return answer
